"""System checks report nonsense settings at startup, with the setting's name."""

import pytest
from django.core import checks

from jobs.checks import check_settings


def messages():
    return [error.msg for error in check_settings(None)]


def test_defaults_pass():
    assert messages() == []


@pytest.mark.parametrize(
    ("setting", "value", "fragment"),
    [
        ("JOBS_CONCURRENCY", 0, "JOBS_CONCURRENCY must be a whole number of at least 1, got 0"),
        ("JOBS_MAX_PAYLOAD_BYTES", "big", "JOBS_MAX_PAYLOAD_BYTES must be a whole number"),
        ("JOBS_MAX_RESULT_BYTES", 0, "JOBS_MAX_RESULT_BYTES must be a whole number of at least 1"),
        ("JOBS_MAX_RESULT_BYTES", "1MB", "JOBS_MAX_RESULT_BYTES must be a whole number"),
        ("JOBS_MAX_RESULT_BYTES", None, "JOBS_MAX_RESULT_BYTES must be a whole number"),
        ("JOBS_PRUNE_BATCH_SIZE", True, "JOBS_PRUNE_BATCH_SIZE must be a whole number"),
        ("JOBS_LEASE_SECONDS", -1, "JOBS_LEASE_SECONDS must be a number of seconds above 0"),
        ("JOBS_POLL_INTERVAL", "1s", "JOBS_POLL_INTERVAL must be a number of seconds above 0"),
        ("JOBS_BATCH_SIZE", 0, "JOBS_BATCH_SIZE must be a whole number of at least 1"),
        ("JOBS_BATCH_SECONDS", 0, "JOBS_BATCH_SECONDS must be a number of seconds above 0"),
        ("JOBS_ASYNC_CONCURRENCY", 0, "JOBS_ASYNC_CONCURRENCY must be a whole number of at least"),
        ("JOBS_ASYNC_CONCURRENCY", 2.5, "JOBS_ASYNC_CONCURRENCY must be a whole number"),
        ("JOBS_ASYNC_CONCURRENCY", None, "JOBS_ASYNC_CONCURRENCY must be a whole number"),
    ],
)
def test_bad_values_are_reported(settings, setting, value, fragment):
    setattr(settings, setting, value)
    assert any(fragment in message for message in messages()), messages()


def test_an_async_concurrency_past_the_limit_is_reported(settings):
    from jobs.checks import check_numeric_limits

    settings.JOBS_ASYNC_CONCURRENCY = 10**6
    errors = [error.msg for error in check_numeric_limits(None)]
    assert "JOBS_ASYNC_CONCURRENCY must be at most 100,000, got 1000000." in errors


def test_a_result_limit_past_the_column_is_reported(settings):
    from jobs.checks import check_numeric_limits

    settings.JOBS_MAX_RESULT_BYTES = 2**28
    errors = [error.msg for error in check_numeric_limits(None)]
    assert "JOBS_MAX_RESULT_BYTES must be at most 134,217,728, got 268435456." in errors


def test_checks_are_registered_with_django():
    registered = {check.__name__ for check in checks.registry.registry.get_checks()}
    assert {"check_settings", "check_sqlite_version"} <= registered


def test_sqlite_without_json_functions_is_reported(monkeypatch):
    from django.db import connection

    from jobs import checks as jobs_checks

    assert jobs_checks.sqlite_has_json()  # this machine's SQLite has them
    monkeypatch.setattr(jobs_checks, "sqlite_has_json", lambda: False)
    errors = jobs_checks.check_sqlite_version(None, databases=["default"])
    if connection.vendor == "sqlite":
        assert [error.id for error in errors] == ["jobs.E004"]
    else:
        assert errors == []  # PostgreSQL needs nothing of SQLite


@pytest.mark.parametrize("alias", ["nowhere", "", 5, ["default"], "default\x00", "d" * 10_000])
def test_a_listen_database_that_is_no_alias_is_reported(settings, alias):
    from jobs.checks import check_listen_database

    settings.JOBS_LISTEN_DATABASE = alias
    [error] = check_listen_database(None)
    assert error.id == "jobs.E032"
    assert "JOBS_LISTEN_DATABASE must be an alias of DATABASES" in error.msg


def test_the_listen_database_must_be_postgresql(settings):
    from django.db import connections

    from jobs.checks import check_listen_database

    settings.JOBS_LISTEN_DATABASE = "default"
    errors = check_listen_database(None)
    if connections["default"].vendor == "postgresql":
        assert errors == []
    else:
        assert [e.id for e in errors] == ["jobs.E032"]
        assert "is not a PostgreSQL database: only PostgreSQL has LISTEN" in errors[0].msg
