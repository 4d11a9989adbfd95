"""System checks: settings of jobs that would fail later are reported at startup instead."""

import sqlite3

from django.apps import apps
from django.core import checks
from django.db import connections

from jobs import sql
from jobs.conf import DEFAULTS, jobs_settings
from jobs.sql.sqlite import has_json as sqlite_has_json
from jobs.tasks.payload import queue_name_problem

REQUIRED_APPS = ("django.contrib.auth", "django.contrib.contenttypes")


@checks.register("jobs")  # tagged so that runworker, which runs only some checks, runs it
def check_settings(app_configs, **kwargs):
    errors = []
    whole_numbers = (
        "MAX_PAYLOAD_BYTES",
        "DEFAULT_MAX_ATTEMPTS",
        "CONCURRENCY",
        "BATCH_SIZE",
        "PRUNE_BATCH_SIZE",
        "PRUNE_MAX_BATCHES",
    )
    for name in whole_numbers:
        value = getattr(jobs_settings, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            errors.append(
                checks.Error(
                    f"JOBS_{name} must be a whole number of at least 1, got {value!r}.",
                    id="jobs.E001",
                )
            )
    seconds = ("LEASE_SECONDS", "POLL_INTERVAL", "DEFAULT_TIMEOUT", "BACKOFF_BASE", "BATCH_SECONDS")
    for name in seconds:
        value = getattr(jobs_settings, name)
        if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
            errors.append(
                checks.Error(
                    f"JOBS_{name} must be a number of seconds above 0, got {value!r} "
                    f"(default {DEFAULTS[name]}).",
                    id="jobs.E002",
                )
            )
    return errors


@checks.register("jobs")
def check_required_apps(app_configs, **kwargs):
    """Report the contrib apps jobs needs; the admin, sessions and messages are optional."""
    # Task.owner is a foreign key to AUTH_USER_MODEL, and who may see or act on a task is
    # decided by the task model's permissions: both need auth and its contenttypes.
    missing = [name for name in REQUIRED_APPS if not apps.is_installed(name)]
    if not missing:
        return []
    return [
        checks.Error(
            f"jobs needs {' and '.join(missing)} in INSTALLED_APPS: tasks have an owner "
            "(AUTH_USER_MODEL) and permissions (view, retry, cancel).",
            hint="The admin, sessions and messages are optional; these two are not.",
            id="jobs.E006",
        )
    ]


@checks.register(checks.Tags.database)
def check_sqlite_version(app_configs, databases=None, **kwargs):
    uses_sqlite = any(
        sql.dialect(connections[alias]).CHECK_LIBRARY
        for alias in (databases or ())
        if alias in connections
    )
    if uses_sqlite and sqlite3.sqlite_version_info < sql.sqlite.MINIMUM_VERSION:
        return [
            checks.Error(
                f"jobs needs SQLite 3.35 or newer (UPDATE ... RETURNING); this Python has "
                f"{sqlite3.sqlite_version}.",
                id="jobs.E003",
            )
        ]
    if uses_sqlite and not sqlite_has_json():
        return [
            checks.Error(
                "jobs needs SQLite's JSON functions (json_each, json_extract, json_object: built "
                f"in since SQLite 3.38); this Python's SQLite {sqlite3.sqlite_version} lacks them.",
                id="jobs.E004",
            )
        ]
    return []


# Seconds settings that may be 0 (no grace, no retry); the others must be above 0.
_SECONDS_FROM_ZERO = ("SHUTDOWN_GRACE", "DATABASE_RETRY_SECONDS")
_SECONDS = (
    "BACKOFF_MAX",
    "SHUTDOWN_GRACE",
    "CANCEL_GRACE",
    "MAINTENANCE_INTERVAL",
    "DATABASE_RETRY_SECONDS",
    "WAITING_WARNING_SECONDS",
    "WAITING_CRITICAL_SECONDS",
    "RUNNING_WARNING_SECONDS",
    "METRICS_WINDOW_SECONDS",
    "DASHBOARD_REFRESH_SECONDS",
    "PRUNE_INTERVAL",
)
# Checked above 0 by check_settings: here only NaN, infinity and the upper bound.
_SECONDS_CHECKED_ELSEWHERE = (
    "LEASE_SECONDS",
    "POLL_INTERVAL",
    "DEFAULT_TIMEOUT",
    "BACKOFF_BASE",
    "BATCH_SECONDS",
)


@checks.register("jobs")
def check_numeric_limits(app_configs, **kwargs):
    """Report numbers a worker would choke on: NaN, infinity, beyond ``jobs.limits``' bounds."""
    from jobs import limits

    errors = []

    def error(name, expected):
        value = getattr(jobs_settings, name)
        errors.append(
            checks.Error(f"JOBS_{name} must be {expected}, got {value!r}.", id="jobs.E021")
        )

    for name in _SECONDS:
        zero_allowed = name in _SECONDS_FROM_ZERO
        if not limits.is_seconds(getattr(jobs_settings, name), zero_allowed=zero_allowed):
            error(name, limits.seconds_expected(zero_allowed=zero_allowed))
    for name in _SECONDS_CHECKED_ELSEWHERE:
        value = getattr(jobs_settings, name)
        real = isinstance(value, int | float) and not isinstance(value, bool)
        if real and (value != value or value > limits.MAX_SECONDS):  # NaN, +inf, too long
            error(name, f"a finite number of seconds at most {limits.MAX_SECONDS:,} (a year)")
    factor = jobs_settings.BACKOFF_FACTOR
    if not limits.is_number(factor) or not 1 <= factor <= 100:
        error("BACKOFF_FACTOR", "a number from 1 to 100")
    jitter = jobs_settings.BACKOFF_JITTER
    if not limits.is_number(jitter) or not 0 <= jitter <= 1:
        error("BACKOFF_JITTER", "a fraction from 0 to 1")
    if not isinstance(jobs_settings.AUTO_PRUNE, bool):
        error("AUTO_PRUNE", "True or False")
    errors += _check_counts()
    errors += _check_enqueue_defaults()
    return errors


def _check_counts():
    from jobs import limits
    from jobs.tasks.registry import INT_RANGES

    errors = []
    whole = {
        "MAX_CONCURRENCY": 10**6,
        "CONCURRENCY": limits.max_concurrency(),
        "PRUNE_BATCH_SIZE": limits.MAX_BATCH_SIZE,
        "PRUNE_MAX_BATCHES": limits.MAX_COUNT,
        "BATCH_SIZE": limits.MAX_BATCH_SIZE,
        "MAX_PAYLOAD_BYTES": limits.MAX_PAYLOAD_BYTES,
        "DEFAULT_MAX_ATTEMPTS": INT_RANGES["max_attempts"][1],
        "MAX_TASKS_PER_CHILD": limits.MAX_TASKS_PER_CHILD,
        "MAX_MEMORY_PER_CHILD": limits.MAX_MEMORY_PER_CHILD_MIB,
    }
    # Below 1, or not whole, check_settings reports these already.
    reported_below = ("CONCURRENCY", "PRUNE_BATCH_SIZE", "PRUNE_MAX_BATCHES", "BATCH_SIZE")
    reported_below += ("MAX_PAYLOAD_BYTES", "DEFAULT_MAX_ATTEMPTS")
    for name, most in whole.items():
        value = getattr(jobs_settings, name)
        if value is None and name.endswith("_PER_CHILD"):
            continue  # no limit
        if not isinstance(most, int) or isinstance(most, bool) or most < 1:
            continue  # JOBS_MAX_CONCURRENCY itself is broken: reported on its own
        if isinstance(value, int) and not isinstance(value, bool) and value > most:
            hint = " (JOBS_MAX_CONCURRENCY raises the limit)" if name == "CONCURRENCY" else ""
            errors.append(
                checks.Error(
                    f"JOBS_{name} must be at most {most:,}, got {value!r}{hint}.", id="jobs.E022"
                )
            )
        elif name not in reported_below and (
            not isinstance(value, int) or isinstance(value, bool) or value < 1
        ):
            errors.append(
                checks.Error(
                    f"JOBS_{name} must be a whole number of at least 1, got {value!r}.",
                    id="jobs.E022",
                )
            )
    return errors


def _check_enqueue_defaults():
    """The default priority goes into every task's row: it must fit the column everywhere."""
    from jobs.tasks.registry import INT_RANGES

    low, high = INT_RANGES["priority"]
    value = jobs_settings.DEFAULT_PRIORITY
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return [
            checks.Error(
                f"JOBS_DEFAULT_PRIORITY must be a whole number from {low:,} to {high:,}, "
                f"got {value!r}.",
                id="jobs.E023",
            )
        ]
    return []


@checks.register("jobs")
def check_unknown_settings(app_configs, **kwargs):
    """Warn of a ``JOBS_*`` setting jobs does not have: a typo would be ignored in silence."""
    from django.conf import settings

    unknown = sorted(
        name
        for name in dir(settings)
        if name.startswith("JOBS_") and name.removeprefix("JOBS_") not in DEFAULTS
    )
    return [
        checks.Warning(
            f"{name} is not a setting of jobs; it has no effect.",
            hint="See the settings reference for the names jobs reads.",
            id="jobs.W001",
        )
        for name in unknown
    ]


@checks.register("jobs")
def check_default_queue(app_configs, **kwargs):
    """JOBS_DEFAULT_QUEUE follows the rule of every queue name (else every enqueue fails)."""
    problem = queue_name_problem(jobs_settings.DEFAULT_QUEUE)
    if problem is None:
        return []
    return [
        checks.Error(
            f"JOBS_DEFAULT_QUEUE {jobs_settings.DEFAULT_QUEUE!r} is no queue name: it {problem}.",
            hint="A queue name is 1 to 100 printable characters, with no comma and no "
            "whitespace at either end.",
            id="jobs.E030",
        )
    ]


@checks.register("jobs")
def check_poll_interval(app_configs, **kwargs):
    """JOBS_POLL_INTERVAL below ``jobs.limits.MIN_INTERVAL_SECONDS`` makes an idle worker spin."""
    from jobs import limits

    value = jobs_settings.POLL_INTERVAL
    # Not a number, NaN or at most 0: check_settings and check_numeric_limits report it.
    if not limits.is_number(value) or value <= 0 or value >= limits.MIN_INTERVAL_SECONDS:
        return []
    return [
        checks.Error(
            f"JOBS_POLL_INTERVAL must be at least {limits.MIN_INTERVAL_SECONDS} seconds, got "
            f"{value!r}: shorter, an idle worker polls the database in a busy loop.",
            id="jobs.E031",
        )
    ]
