"""The bare project with one of jobs' settings wrong, chosen by JOBS_TEST_MISCONFIGURED."""

import os

from tests.projects.bare_settings import *  # noqa: F403

_wrong = os.environ["JOBS_TEST_MISCONFIGURED"]
if _wrong == "cron":
    JOBS_SCHEDULES = {"nightly": {"task": "tests.projects.tasks.add", "cron": "61 * * * *"}}
elif _wrong == "pruning":
    JOBS_PRUNE_AFTER = {"running": 3600}
elif _wrong == "health":
    JOBS_HEALTH_MAX_FAILURE_RATE = 50
else:
    raise ValueError(f"JOBS_TEST_MISCONFIGURED={_wrong!r}: use cron, pruning or health")
