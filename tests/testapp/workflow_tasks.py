"""Tasks of the workflow tests (jobs.workflows): links that pass results, and callbacks that
count how often they ran (one SideEffect row per run)."""

import time

from jobs import PermanentError, task
from tests.testapp.models import SideEffect


@task
def double(x):
    return x * 2


@task
def add_one(x):
    return x + 1


@task(max_attempts=1)
def fail_now(label="failed"):
    raise PermanentError(f"It failed: {label}")


@task
def mark(key, *args):
    """Record that it ran, with what it received."""
    SideEffect.objects.create(key=f"{key}:{list(args)}")
    return key


@task
def slow_mark(key, seconds):
    """Sleep, then record that it ran: a member a worker may be killed during."""
    time.sleep(seconds)
    SideEffect.objects.create(key=key)
    return key


@task
def callback(batch_id, key):
    """A batch's callback: one SideEffect row per run, keyed by ``key``."""
    SideEffect.objects.create(key=key)
    return batch_id


@task
def callback_raises(batch_id, key, kind):
    """A batch's callback that records its run, then raises a ``BaseException`` from its body:
    ``SystemExit`` (``kind="exit"``) or ``KeyboardInterrupt`` (``kind="ctrl-c"``)."""
    SideEffect.objects.create(key=key)
    if kind == "exit":
        raise SystemExit(3)
    raise KeyboardInterrupt("pressed by the callback itself")
