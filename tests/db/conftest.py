"""Database tests: one part against the real database (SQLite or PostgreSQL), in-process.

They may use the database, threads with connections of their own and forked children, but
start no ``runworker``: a test here marked ``process`` or asking for a worker fixture fails
before it runs.
"""

import pytest

from tests.layers import refuse, starts_processes


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if starts_processes(item):
        refuse(item, "starts worker processes", "tests/process/")
