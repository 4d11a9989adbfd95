"""Database tests: one part against the real database (SQLite or PostgreSQL), in-process.

They may use the database, threads with connections of their own and forked children, but
start no ``runworker``: a test here marked ``process`` or asking for a worker fixture fails
before it runs.
"""

import select

import psycopg
import pytest
from django.db import connection

from tests.layers import refuse, starts_processes


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if starts_processes(item):
        refuse(item, "starts worker processes", "tests/process/")


# PostgreSQL's NOTIFY, heard as an idle worker hears it ----------------------------------------


@pytest.fixture
def listener(postgres_only):
    settings = connection.settings_dict
    with psycopg.connect(
        host=settings["HOST"], port=settings["PORT"] or 5432, user=settings["USER"],
        dbname=settings["NAME"], autocommit=True,
    ) as listening:  # fmt: skip
        listening.execute("LISTEN jobs_task_ready")
        yield listening


def received(listening, wait=0.5) -> list[str]:
    payloads = []
    select.select([listening.fileno()], [], [], wait)
    for notify in listening.notifies(timeout=0.2, stop_after=None):
        payloads.append(notify.payload)
    return payloads
