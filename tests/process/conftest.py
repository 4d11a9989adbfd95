"""Process tests: real ``runworker`` processes, subprocesses and signals.

Every test here carries the ``process`` mark, so ``-m "not process"`` leaves the layer out.
"""

import pytest


def pytest_itemcollected(item):
    item.add_marker(pytest.mark.process)
