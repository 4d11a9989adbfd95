"""An installed app whose tasks.py fails to import (tests/hostile/test_broken_task_module.py)."""
