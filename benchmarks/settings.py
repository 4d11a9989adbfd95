"""Benchmark settings: the demo's, plus the benchmark's tasks, without the query log."""

import os
import secrets

# The demo refuses to start without a key when DEBUG is off; a benchmark serves no one.
os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))

from demo_project.settings import *  # noqa: F403
from demo_project.settings import DATABASES, INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "benchmarks"]
DEBUG = False

# The queue of the benchmark's Django task (benchmarks.tasks.django_noop), beside the default.
TASKS = {"default": {"BACKEND": "jobs.backends.DatabaseBackend", "QUEUES": ["default", "bench"]}}

# JOBS_BENCH_PREPARE_THRESHOLD=5: psycopg prepares enqueue's INSERT and the claim, as the
# database OPTIONS "prepare_threshold" does in a deployment (docs/howto/deploy.md); unset,
# Django's default, nothing is prepared.
_threshold = os.environ.get("JOBS_BENCH_PREPARE_THRESHOLD")
if _threshold and "postgresql" in DATABASES["default"]["ENGINE"]:
    DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = int(_threshold)

# benchmarks/transports.py: the transport under measurement (None: the database).
JOBS_TRANSPORT = os.environ.get("JOBS_TRANSPORT") or None

# benchmarks/flow_control.py --floor: the workers' JOBS_BATCH_SIZE, so that their claims ask for
# at most about 8 times that many tasks (a batch for each of 4 children, and as many at hand).
if os.environ.get("JOBS_BENCH_BATCH_SIZE"):
    JOBS_BATCH_SIZE = int(os.environ["JOBS_BENCH_BATCH_SIZE"])

# Django's own task log lines ("Task id=… state=…", from the receivers Django connects to its
# task signals) are written beside jobs' at the worker's level, as in a project that shows them
# (Django 6's default logging does with DEBUG on): benchmarks/django_drain.py measures Django's
# @task with them. JOBS_BENCH_DJANGO_LOG=0 leaves them out, as a project whose logging drops them.
if os.environ.get("JOBS_BENCH_DJANGO_LOG", "1") != "0":
    LOGGING = {
        **LOGGING,  # noqa: F405 (the demo's)
        "loggers": {
            **LOGGING["loggers"],  # noqa: F405
            **{
                name: {"handlers": ["console"], "level": os.environ.get("JOBS_LOG_LEVEL", "INFO")}
                for name in ("django.tasks", "django_tasks")
            },
        },
    }
