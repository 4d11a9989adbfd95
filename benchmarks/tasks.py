"""The tasks the worker benchmark runs: one that does nothing, one that sleeps 50 ms, and more.

The demo's settings connect a ``task_finished`` receiver (notify the owner); the benchmark
measures a product without one, so it is disconnected here (the worker imports this module):
with a receiver, each success is recorded by its child, one statement per task.
"""

import asyncio
import time

from benchmarks.peers.stamps import write_stamp
from jobs import task
from jobs.signals import task_finished

task_finished.disconnect(dispatch_uid="demo-notify-owner")


@task(queue="bench", max_attempts=1)
def noop(n=0):
    return None


@task(queue="bench", max_attempts=1)
def sleep50(n=0):
    time.sleep(0.05)


# The same body declared with Django's @task (django.tasks on Django 6, the django_tasks backport
# on 5.2), stored by jobs.backends.DatabaseBackend: benchmarks/django_drain.py drains both.
try:
    from django.tasks import task as django_task
except ImportError:
    from django_tasks import task as django_task  # type: ignore[no-redef]


@django_task(queue_name="bench")
def django_noop(n=0):
    return None


# Async tasks awaiting 100 ms each: benchmarks/async_drain.py drains them, declared both ways.
@task(queue="bench", max_attempts=1)
async def async_sleep100(n=0):
    await asyncio.sleep(0.1)


@django_task(queue_name="bench")
async def django_async_sleep100(n=0):
    await asyncio.sleep(0.1)


# Pickup latency as benchmarks/peers.py measures it: the body's first line takes the time.
@task(queue="bench", max_attempts=1)
def stamp(n=0):
    at = time.time()
    write_stamp(n, at)
