"""Twins: one task declared with Django's ``@task`` and with ``@jobs.task``, the same options.

For tests/db/test_one_task_object.py and tests/process/test_one_task_object.py: both kinds are
one ``JobsTask``, so they must be enqueued, retried, timed out and shown the same way.
"""

import time

try:
    from django.tasks import task as django_task
except ImportError:  # Django 5.2: the backport
    from django_tasks import task as django_task

import jobs
from jobs import Backoff


class PartnerDown(Exception):
    """What the twins declare transient."""


@django_task(max_attempts=2, transient=(PartnerDown,), backoff=Backoff(base=0.1, jitter=0))
def flaky_django(key):
    raise PartnerDown(f"partner down for {key}")


@jobs.task(max_attempts=2, transient=(PartnerDown,), backoff=Backoff(base=0.1, jitter=0))
def flaky_jobs(key):
    raise PartnerDown(f"partner down for {key}")


@django_task(timeout=1, max_attempts=1)
def hang_django():
    time.sleep(300)


@django_task(takes_context=True, max_attempts=4, priority=5)
def report_django(context, months):
    for month in range(1, months + 1):
        context.progress(month, months, f"Summarised {month} of {months} months")
    return {"months": months, "attempt": context.attempt}


@django_task
def add_django(a, b):
    return a + b
