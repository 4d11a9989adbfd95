"""System checks: settings of jobs that would fail later are reported at startup instead."""

import sqlite3

from django.apps import apps
from django.core import checks
from django.db import connections

from jobs.conf import DEFAULTS, jobs_settings

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
        connections[alias].vendor == "sqlite" for alias in (databases or ()) if alias in connections
    )
    if uses_sqlite and sqlite3.sqlite_version_info < (3, 35):
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


def sqlite_has_json() -> bool:
    """Whether this Python's SQLite has the JSON functions a worker's statements use."""
    connection = sqlite3.connect(":memory:")
    try:
        connection.execute("SELECT json_extract(json_object('a', 1), '$.a')")
    except sqlite3.OperationalError:
        return False
    finally:
        connection.close()
    return True
