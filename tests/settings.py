"""Test settings: the demo's, with a shared test database that worker processes can open too."""

import os
from pathlib import Path

import django

# The demo refuses to start without a SECRET_KEY when DEBUG is off, as tests run it.
os.environ.setdefault("SECRET_KEY", "tests-only-not-secret-" + "0123456789" * 4)

from demo_project.settings import *  # noqa: F403
from demo_project.settings import DATABASES, INSTALLED_APPS, VAR_DIR

INSTALLED_APPS = [*INSTALLED_APPS, "tests.testapp"]

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not :memory:, so that runworker subprocesses see the same database; named after
    # DATABASE_URL's file, so runs with different URLs never share (or delete) each other's.
    _name = Path(DATABASES["default"]["NAME"]).stem
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{_name}.sqlite3")}

# No demo schedule: a worker of a test must not enqueue the hourly clean-up mid-test.
JOBS_SCHEDULES = {}

# Uploads and reports of the tests, apart from the demo's and per database (the clean-up tests
# delete files no row of their database names). Worker processes, whose DATABASE_URL names the
# test database itself, share the folder: "test-jobs" and "jobs" are one run.
_database = Path(DATABASES["default"]["NAME"]).stem
MEDIA_ROOT = VAR_DIR / "test-media" / _database.removeprefix("test-").removeprefix("test_")

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
if django.VERSION >= (6, 1):
    MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}
else:
    EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"

# Short timings keep process tests fast; tests of workers set some per process through the
# environment (JOBS_LEASE_SECONDS=1 ...).
for _name in (
    "LEASE_SECONDS",
    "MAINTENANCE_INTERVAL",
    "CANCEL_GRACE",
    "SHUTDOWN_GRACE",
    "BATCH_SECONDS",
    "LEADER_LEASE_SECONDS",
):
    if f"JOBS_{_name}" in os.environ:
        globals()[f"JOBS_{_name}"] = float(os.environ[f"JOBS_{_name}"])
if "JOBS_CHILD_CONNECTIONS" in os.environ:
    JOBS_CHILD_CONNECTIONS = int(os.environ["JOBS_CHILD_CONNECTIONS"])
if "JOBS_LOG_EACH_SUCCESS" in os.environ:
    JOBS_LOG_EACH_SUCCESS = {"1": True, "0": False}[os.environ["JOBS_LOG_EACH_SUCCESS"]]
if "JOBS_SESSION_RESCUE" in os.environ:
    JOBS_SESSION_RESCUE = {"1": True, "0": False}[os.environ["JOBS_SESSION_RESCUE"]]
JOBS_POLL_INTERVAL = float(os.environ.get("JOBS_POLL_INTERVAL", 0.2))
# A broker for the transport tests (tests/process/test_transports.py); None: the database.
JOBS_TRANSPORT = os.environ.get("JOBS_TRANSPORT") or None
JOBS_BACKOFF_BASE = 0.2
JOBS_BACKOFF_MAX = 2.0
JOBS_DATABASE_RETRY_SECONDS = float(os.environ.get("JOBS_DATABASE_RETRY_SECONDS", 10.0))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "jobs": {
            "handlers": ["console"],
            "level": os.environ.get("JOBS_LOG_LEVEL", "INFO"),
            "propagate": True,
        },
        # Django's own task log lines (django.tasks on Django 6, the backport on 5.2), written
        # when a test asks for them (tests/process/test_django_task_signals.py).
        **{
            name: {
                "handlers": ["console"],
                "level": os.environ.get("JOBS_TEST_DJANGO_TASKS_LOG_LEVEL", "WARNING"),
            }
            for name in ("django.tasks", "django_tasks")
        },
    },
}

# Processes of the PgBouncer tests (tests/process/test_pgbouncer.py) reach the task table through
# PgBouncer in transaction mode, as production often does: named (server-side) cursors cannot
# outlive a statement there (Django's documented setting for transaction pooling), and LISTEN
# goes over a direct connection when the test names one.
if os.environ.get("JOBS_TEST_THROUGH_POOLER"):
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
    if os.environ.get("JOBS_TEST_DIRECT_DATABASE_URL"):
        import environ

        DATABASES["direct"] = environ.Env.db_url_config(os.environ["JOBS_TEST_DIRECT_DATABASE_URL"])
        JOBS_LISTEN_DATABASE = "direct"

# JOBS_TEST_PREPARE_THRESHOLD=5: psycopg prepares enqueue's INSERT and the claim, as the database
# OPTIONS "prepare_threshold" does in a deployment (docs/howto/deploy.md), in the test process
# and the workers it starts; never through PgBouncer 1.18, which cannot route them.
_threshold = os.environ.get("JOBS_TEST_PREPARE_THRESHOLD")
_pooled = os.environ.get("JOBS_TEST_THROUGH_POOLER")
if _threshold and "postgresql" in DATABASES["default"]["ENGINE"] and not _pooled:
    DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = int(_threshold)
