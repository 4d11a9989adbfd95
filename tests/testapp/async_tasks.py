"""``async def`` tasks, declared with jobs' ``@task`` and with Django's, for the worker's loop."""

import asyncio
import contextlib
import os
import time

from jobs import task

try:
    from django.tasks import task as django_task
except ImportError:
    from django_tasks import task as django_task  # type: ignore[no-redef]


@task(max_attempts=3)
async def nap(key, seconds):
    started = time.time()
    await asyncio.sleep(seconds)
    return [key, started, time.time(), os.getpid()]


@task(max_attempts=1)
async def raises():
    await asyncio.sleep(0.2)
    raise ValueError("async task failed")


@task(max_attempts=1)
async def exits():
    await asyncio.sleep(0.2)
    raise SystemExit(3)


@task(max_attempts=1, timeout=0.5)
async def overruns():
    await asyncio.sleep(30)


@task(max_attempts=1, timeout=1)
async def blocks_the_loop():
    await asyncio.sleep(0.1)
    time.sleep(30)  # synchronous work on the loop: only the supervisor's kill stops it


@task(max_attempts=1, takes_context=True)
async def checks_for_cancel(context):
    for _ in range(600):
        await asyncio.sleep(0.05)
        context.progress(1, 2, "waiting")
        context.check_cancelled()


@task(max_attempts=1)
async def awaits_forever():
    await asyncio.sleep(3600)


@task(max_attempts=1)
async def swallows_cancel():
    while True:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(3600)


@django_task()
async def django_nap(seconds):
    started = time.time()
    await asyncio.sleep(seconds)
    return [started, time.time(), os.getpid()]


@django_task(takes_context=True)
async def django_attempt(context, seconds):
    await asyncio.sleep(seconds)
    context.progress(1, 1, "done")
    return context.attempt


@task(max_attempts=1)
async def raises_timeout_error():
    raise TimeoutError("the task's own")


# More attempts than the connection test terminates connections: one termination fails the
# attempt of every task of the child writing before it reconnects.
@task(max_attempts=5, takes_context=True)
async def reports_progress(context, steps):
    for step in range(1, steps + 1):
        await asyncio.sleep(0.1)
        context.progress(step, steps, f"step {step}", force=True)
    return steps
