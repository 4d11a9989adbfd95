"""The numeric ``JOBS_*`` settings a worker uses are refused at startup when they are NaN,
infinite, out of range or of the wrong kind, with the same bounds as the commands' options."""

import math
import subprocess
import sys
from datetime import timedelta

import pytest
from django.core import checks as django_checks
from django.core.checks.registry import registry
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from jobs.conf import DEFAULTS
from tests.conftest import ROOT


def jobs_checks():
    """Every system check tagged "jobs": the ones ``runworker`` runs before it starts."""
    return [check for check in registry.get_checks() if "jobs" in check.tags]


def reported(settings, **values):
    for name, value in values.items():
        setattr(settings, f"JOBS_{name}", value)
    return [error for check in jobs_checks() for error in check(app_configs=None)]


def errors(settings, **values):
    return [
        error.msg for error in reported(settings, **values) if error.level >= django_checks.ERROR
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
        ("BACKOFF_JITTER", 2, "a fraction from 0 to below 1"),
        # jobs.Backoff refuses a jitter of 1 (a delay of 0 at random): every retry would fail.
        ("BACKOFF_JITTER", 1, "a fraction from 0 to below 1"),
        ("CONCURRENCY", 100_000, "at most 256"),
        ("MAX_CONCURRENCY", 0, "at least 1"),
        ("MAX_TASKS_PER_CHILD", 0, "at least 1"),
        ("MAX_TASKS_PER_CHILD", 10**30, "at most"),
        ("MAX_MEMORY_PER_CHILD", float("inf"), "whole number"),
        ("PRUNE_BATCH_SIZE", 10**9, "at most 100,000"),
        ("DEFAULT_PRIORITY", 101, "from -100 to 100"),  # Django's range: @jobs.task's default
        ("DEFAULT_PRIORITY", -32768, "from -100 to 100"),
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


# Values no setting of jobs should ever take, of every kind: not numbers, NaN, infinities,
# overflowing, negative, zero, bool, containers.
HOSTILE = {
    "nan": float("nan"),
    "inf": float("inf"),
    "-inf": float("-inf"),
    "huge-int": 10**400,
    "huge-float": 1e308,
    "negative": -1,
    "zero": 0,
    "text": "5",
    "none": None,
    "true": True,
    "list": [1],
    "dict": {"a": 1},
    "object": object(),
}
# What each setting may legitimately take among HOSTILE (the rest must be reported).
ACCEPTED = {
    "DEFAULT_PRIORITY": {"negative", "zero"},
    "SHUTDOWN_GRACE": {"zero"},
    "DATABASE_RETRY_SECONDS": {"zero"},
    "BACKOFF_JITTER": {"zero"},
    "HEALTH_MAX_FAILURE_RATE": {"zero"},
    "HEALTH_FAILURE_MIN_TASKS": {"zero"},
    "MAX_TASKS_PER_CHILD": {"none"},
    "MAX_MEMORY_PER_CHILD": {"none"},
    "METRICS_TOKEN": {"none"},
    "LISTEN_DATABASE": {"none"},  # the task table's own connection
    "LEADER_LEASE_SECONDS": {"none"},  # four maintenance intervals
    "CHILD_CONNECTIONS": {"none"},  # no cap: every child may hold one
    "TRANSPORT": {"none"},  # the database's own notifications
    "SESSION_RESCUE": {"none", "true"},  # on where the database allows it
    "AUTO_PRUNE": {"true"},
    "LOG_EACH_SUCCESS": {"true"},
    "DEFAULT_QUEUE": {"text"},
}


@pytest.mark.parametrize("label", sorted(HOSTILE))
@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_every_setting_refuses_hostile_values_without_crashing(settings, name, label):
    messages = errors(settings, **{name: HOSTILE[label]})  # no check may raise
    if label in ACCEPTED.get(name, ()):
        return
    assert any(f"JOBS_{name}" in message for message in messages), messages


@pytest.mark.parametrize(
    "every",
    [float("nan"), float("inf"), -5, 0, 0.5, 10**30, 1e308, "60", True, [60], timedelta(0)],
)
def test_a_schedule_every_must_be_a_sane_number_of_seconds(settings, every):
    schedules = {"x": {"task": "tests.testapp.tasks.add", "every": every}}
    [message] = errors(settings, SCHEDULES=schedules)
    assert "'x'" in message
    assert "every" in message


@pytest.mark.parametrize(
    "schedules",
    [
        [("x", {"task": "tests.testapp.tasks.add", "every": 60})],
        {"x": "every minute"},
        {"x": {"task": "tests.testapp.tasks.add", "cron": 5}},
        {"x": {"task": "tests.testapp.tasks.add", "every": 60, "time_zone": 5}},
        {"x": {"task": "tests.testapp.tasks.add", "every": 60, "priority": 10**9}},
        {"x": {"task": "tests.testapp.tasks.add", "every": 60, "queue": "q" * 1000}},
        {"x": {"task": "tests.testapp.tasks.add", "every": 60, "nonsense": 1}},
    ],
)
def test_broken_schedules_are_reported_not_raised(settings, schedules):
    [message] = errors(settings, SCHEDULES=schedules)
    assert "JOBS_SCHEDULES" in message or "'x'" in message


def test_sane_schedules_pass(settings):
    schedules = {
        "a": {"task": "tests.testapp.tasks.add", "every": 60},
        "b": {"task": "tests.testapp.tasks.add", "every": timedelta(days=1), "priority": -5},
        "c": {"task": "tests.testapp.tasks.add", "cron": "*/5 * * * *", "queue": "emails"},
    }
    assert errors(settings, SCHEDULES=schedules) == []


@pytest.mark.parametrize(
    "age",
    [
        float("inf"),
        float("nan"),
        -1,
        0,
        10**30,
        1e308,
        timedelta.max,
        timedelta(days=-1),
        timedelta(days=36_501),
        "7d",
        True,
    ],
)
def test_a_retention_must_be_a_sane_age(settings, age):
    [message] = errors(settings, PRUNE_AFTER={"succeeded": age})
    assert "JOBS_PRUNE_AFTER['succeeded']" in message


def test_a_retention_of_a_hundred_years_or_for_ever_passes(settings):
    ages = {"succeeded": timedelta(days=36_500), "failed": 36_500 * 86400, "cancelled": None}
    assert errors(settings, PRUNE_AFTER=ages) == []


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("HEALTH_MAX_WAIT_SECONDS", float("nan")),
        ("HEALTH_MAX_WAIT_SECONDS", float("inf")),
        ("HEALTH_HEARTBEAT_SECONDS", float("inf")),
        ("HEALTH_HEARTBEAT_SECONDS", -1),
        ("HEALTH_FAILURE_WINDOW", 10**400),
        ("HEALTH_MAX_FAILURE_RATE", 2),
        ("HEALTH_MAX_FAILURE_RATE", -0.1),
        ("HEALTH_MAX_FAILURE_RATE", float("nan")),
        ("HEALTH_FAILURE_MIN_TASKS", -1),
        ("HEALTH_FAILURE_MIN_TASKS", 10**30),
    ],
)
def test_health_thresholds_are_checked(settings, name, value):
    [message] = errors(settings, **{name: value})
    assert f"JOBS_{name}" in message


def test_a_misspelt_setting_is_warned_of(settings):
    settings.JOBS_POLL_INTERVALL = 5
    [warning] = [error for error in reported(settings) if error.id == "jobs.W001"]
    assert "JOBS_POLL_INTERVALL" in warning.msg


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("PRUNE_AFTER", {"succeeded": float("inf")}),
        ("SCHEDULES", {"x": {"task": "tests.testapp.tasks.add", "every": math.nan}}),
        ("HEALTH_HEARTBEAT_SECONDS", math.inf),
    ],
)
def test_manage_py_check_reports_them(settings, name, value):
    setattr(settings, f"JOBS_{name}", value)
    with pytest.raises(SystemCheckError, match=f"JOBS_{name}|'x'"):
        call_command("check")


def manage(worker_env, tmp_path, settings_lines, *args):
    """Run ``manage.py *args`` in a real process with ``settings_lines`` added to the settings."""
    (tmp_path / "broken_settings.py").write_text(
        "from tests.settings import *  # noqa: F403\n" + "\n".join(settings_lines) + "\n"
    )
    env = {
        **worker_env,
        "DJANGO_SETTINGS_MODULE": "broken_settings",
        "PYTHONPATH": f"{tmp_path}:{ROOT}",
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_runworker_refuses_a_broken_schedule(worker_env, tmp_path):
    """A real worker process: the schedule is refused before any child is started."""
    schedule = "JOBS_SCHEDULES = {'x': {'task': 'tests.testapp.tasks.add', 'every': float('nan')}}"
    done = manage(worker_env, tmp_path, [schedule], "runworker", "--burst")
    assert done.returncode != 0
    assert "jobs.E201" in done.stderr
    assert "every must be a finite number of seconds" in done.stderr
    assert "Traceback" not in done.stderr


def test_manage_py_check_reports_every_broken_setting_without_a_traceback(worker_env, tmp_path):
    """The stranger's settings: today OverflowError (retention) and ValueError (the backend)."""
    lines = [
        "JOBS_PRUNE_AFTER = {'succeeded': float('inf')}",
        "JOBS_DEFAULT_MAX_ATTEMPTS = float('nan')",
        "JOBS_HEALTH_HEARTBEAT_SECONDS = float('inf')",
        "JOBS_HEALTH_MAX_FAILURE_RATE = 2",
    ]
    done = manage(worker_env, tmp_path, lines, "check")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr, done.stderr
    for name in ("PRUNE_AFTER", "DEFAULT_MAX_ATTEMPTS", "HEALTH_HEARTBEAT_SECONDS"):
        assert f"JOBS_{name}" in done.stderr
    assert "JOBS_HEALTH_MAX_FAILURE_RATE" in done.stderr


@pytest.mark.parametrize("attempts", [math.nan, 0, 2**31, "3", True])
def test_a_backend_max_attempts_option_is_checked(attempts):
    from jobs.backends import DatabaseBackend

    backend = DatabaseBackend(alias="hostile", params={"OPTIONS": {"MAX_ATTEMPTS": attempts}})
    [message] = [error.msg for error in backend.check() if error.id == "jobs.E007"]
    assert "MAX_ATTEMPTS" in message
