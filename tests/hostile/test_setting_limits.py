"""The numeric ``JOBS_*`` settings a worker uses are refused at startup when they are NaN,
infinite, out of range or of the wrong kind, with the same bounds as the commands' options."""

import pytest

from jobs import checks


def errors(settings, **values):
    for name, value in values.items():
        setattr(settings, f"JOBS_{name}", value)
    return [
        error.msg
        for check in (checks.check_settings, checks.check_numeric_limits)
        for error in check(None)
    ]


def test_the_defaults_pass(settings):
    assert errors(settings) == []


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("POLL_INTERVAL", float("nan"), "a finite number of seconds"),
        ("LEASE_SECONDS", float("inf"), "a finite number of seconds"),
        ("LEASE_SECONDS", 10**30, "at most 31,536,000"),
        ("HEALTH_FAILURE_WINDOW", float("nan"), "a finite number of seconds"),
        ("SHUTDOWN_GRACE", -1, "from 0"),
        ("SHUTDOWN_GRACE", float("nan"), "a finite number"),
        ("CANCEL_GRACE", 0, "above 0"),
        ("MAINTENANCE_INTERVAL", "5", "a finite number"),
        ("DATABASE_RETRY_SECONDS", 1e400, "a finite number"),
        ("PRUNE_INTERVAL", True, "a finite number"),
        ("METRICS_WINDOW_SECONDS", 10**12, "at most"),
        ("BACKOFF_MAX", float("inf"), "a finite number"),
        ("BACKOFF_FACTOR", 0.5, "from 1 to 100"),
        ("BACKOFF_FACTOR", float("nan"), "from 1 to 100"),
        ("BACKOFF_JITTER", 2, "a fraction from 0 to 1"),
        ("CONCURRENCY", 100_000, "at most 256"),
        ("MAX_CONCURRENCY", 0, "at least 1"),
        ("MAX_TASKS_PER_CHILD", 0, "at least 1"),
        ("MAX_TASKS_PER_CHILD", 10**30, "at most"),
        ("MAX_MEMORY_PER_CHILD", float("inf"), "whole number"),
        ("PRUNE_BATCH_SIZE", 10**9, "at most 100,000"),
    ],
)
def test_bad_values_are_reported(settings, name, value, fragment):
    [message] = errors(settings, **{name: value})
    assert f"JOBS_{name}" in message
    assert fragment in message


def test_max_concurrency_raises_the_concurrency_limit(settings):
    assert errors(settings, CONCURRENCY=300, MAX_CONCURRENCY=512) == []


@pytest.mark.django_db  # Django 6's checks of these tags may query the database
def test_runworker_runs_these_checks(settings):
    from django.core.checks import run_checks
    from django.core.management import load_command_class

    settings.JOBS_POLL_INTERVAL = float("nan")
    command = load_command_class("jobs", "runworker")
    selected = run_checks(tags=command.requires_system_checks)
    assert "jobs.E021" in [error.id for error in selected]
