"""The one retry loop of jobs.db: what it retries, how long, and what it raises."""

import pytest
from django.db import IntegrityError, OperationalError

from jobs import db
from jobs.sql import postgresql as sql_postgresql
from jobs.sql import sqlite as sql_sqlite


def failing(*errors, result="done"):
    """An operation raising ``errors`` one per call, then returning ``result``."""
    calls = []

    def operation():
        calls.append(1)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return result

    operation.calls = calls
    return operation


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch):
    monkeypatch.setattr(db, "_sleep_unless", lambda seconds, abandon: None)


def test_a_connection_fault_is_retried_until_the_operation_answers():
    operation = failing(OperationalError("server closed the connection"))
    assert db.retry_on_database_error(operation, what="test", deadline_seconds=5) == "done"
    assert len(operation.calls) == 2


def test_a_refused_row_is_raised_at_once():
    operation = failing(IntegrityError("duplicate key"))
    with pytest.raises(IntegrityError):
        db.retry_on_database_error(operation, what="test", deadline_seconds=5)
    assert len(operation.calls) == 1


def test_abandon_ends_the_retries_with_the_fault():
    operation = failing(*[OperationalError("down")] * 5)
    with pytest.raises(OperationalError):
        db.retry_on_database_error(operation, what="test", deadline_seconds=5, abandon=lambda: True)
    assert len(operation.calls) == 1


def test_sqlite_locked_is_waited_out_and_nothing_else():
    sqlite = sql_sqlite
    operation = failing(OperationalError("database is locked"), OperationalError("locked"))
    assert db.wait_while_locked(sqlite, operation) == "done"
    assert len(operation.calls) == 3
    other = failing(OperationalError("no such table"))
    with pytest.raises(OperationalError):
        db.wait_while_locked(sqlite, other)
    on_postgres = failing(OperationalError("database is locked"))
    with pytest.raises(OperationalError):
        db.wait_while_locked(sql_postgresql, on_postgres)


def test_the_deadline_ends_the_wait():
    operation = failing(*[OperationalError("database is locked")] * 3)
    with pytest.raises(OperationalError):
        db.wait_while_locked(sql_sqlite, operation, deadline_seconds=-1)
    assert len(operation.calls) == 1
