"""Tasks the test suite enqueues and runs in real worker processes."""

import os
import signal
import time

from jobs import PermanentError, TransientError, task
from tests.testapp import (
    chain_tasks,  # noqa: F401 - registered with the rest
    hostile_tasks,  # noqa: F401 - registers the hostile suite's tasks
    value_tasks,  # noqa: F401 - registered with the rest
    workflow_tasks,  # noqa: F401 - registered with the rest
)
from tests.testapp.models import SideEffect


class FlakyServiceError(Exception):
    """Declared transient by ``declared_transient``."""


@task
def add(a, b):
    return a + b


@task
def record_effect(key):
    SideEffect.objects.create(key=key)
    return key


@task(max_attempts=3)
def fail_until_attempt(key, succeed_on):
    """Raise a connection error until attempt ``succeed_on``, counting attempts as effects."""
    SideEffect.objects.create(key=key)
    if SideEffect.objects.filter(key=key).count() < succeed_on:
        raise ConnectionRefusedError("connection refused by the mail server")
    return "ok"


@task(max_attempts=5)
def always_transient():
    raise TransientError("The mail server is unavailable; we will retry.")


@task(max_attempts=5)
def bad_file():
    raise PermanentError("Unsupported file format: please upload a CSV", detail="got image/png")


@task(max_attempts=5)
def enqueues_a_bad_value():
    """Enqueue another task with a datetime argument: jobs refuses it with a PayloadError."""
    import datetime

    add.enqueue(datetime.date(2026, 1, 1), 1)


@task(max_attempts=5)
def returns_text(length):
    return "x" * length


@task(max_attempts=5)
def buggy():
    return {}["missing"]


@task(max_attempts=3, transient=(FlakyServiceError,))
def declared_transient():
    raise FlakyServiceError("flaky")


@task
def returns_not_json():
    return object()


@task(priority=5, queue="priority")
def on_priority_queue(key):
    SideEffect.objects.create(key=key)


@task
def backend_pid(n):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


@task(takes_context=True, max_attempts=3)
def slow_on_first_attempt(context, key, seconds):
    """Take long on the first attempt only (to be killed mid-way), then record one effect."""
    if context.attempt == 1:
        time.sleep(seconds)
    SideEffect.objects.get_or_create(key=key)
    return context.attempt


@task(max_attempts=1)
def sleep_then_effect(key, seconds):
    time.sleep(seconds)
    SideEffect.objects.create(key=key)


@task(max_attempts=1, timeout=1)
def hang():
    time.sleep(10**6)


@task(max_attempts=1)
def exit_hard():
    os._exit(3)


@task(max_attempts=1)
def die_by_signal():
    os.kill(os.getpid(), signal.SIGKILL)


@task(max_attempts=1)
def grow_memory():
    hoard = []
    while True:
        hoard.append(bytearray(8 * 1024 * 1024))
        time.sleep(0.01)


@task(takes_context=True)
def checks_for_cancel(context):
    for _ in range(2000):
        context.check_cancelled()
        time.sleep(0.05)


@task
def ignores_cancel():
    time.sleep(10**6)


@task(max_attempts=5)
def write_and_pause(key):
    SideEffect.objects.create(key=key)
    time.sleep(0.05)
    return key


@task(max_attempts=10)
def effect_once(key):
    """Write one effect per key, however often the task runs (jobs.execution.effects.once)."""
    from jobs.execution.effects import once

    time.sleep(0.1)
    once(f"effect:{key}", lambda: SideEffect.objects.create(key=key).pk)
    return key


@task(max_attempts=5)
def pause(seconds):
    """Take ``seconds`` and do nothing else: tests of how many tasks run at once."""
    time.sleep(seconds)


@task(max_attempts=2)
def snooze_until(key, times, seconds=0.0):
    """Snooze ``times`` times (raising, then returning ``jobs.Snooze``), then succeed; each run
    is counted as an effect of ``key``."""
    from jobs import Snooze

    SideEffect.objects.create(key=key)
    runs = SideEffect.objects.filter(key=key).count()
    if runs > times:
        return runs
    if runs % 2:
        raise Snooze(seconds)
    return Snooze(seconds)


@task
def snooze_with(seconds):
    """Snooze for ``seconds``, whatever that is (the hostile values' tests)."""
    from jobs import Snooze

    raise Snooze(seconds)


@task
def snooze_forever():
    from jobs import Snooze

    return Snooze(0)


@task(expires_in=600)
def expiring(key):
    SideEffect.objects.create(key=key)
    return key


@task(max_attempts=3)
def span(seconds):
    """Take ``seconds``; return when it started and ended, and in which process (tests of how
    many tasks of a queue run at once)."""
    started = time.time()
    time.sleep(seconds)
    return [started, time.time(), os.getpid()]


@task(max_attempts=1)
def effect_then_sleep(key, seconds):
    """Use the database first, then hold the connection while sleeping (the connection cap)."""
    SideEffect.objects.create(key=key)
    time.sleep(seconds)


@task(max_attempts=1, timeout=1)
def effect_then_hang(key):
    """Hold a database connection until the timeout kills the child."""
    SideEffect.objects.create(key=key)
    time.sleep(10**6)


@task(max_attempts=3)
def ticks_to_file(path, key, seconds):
    """Run ``seconds``, appending "start", a "tick" every 50 ms, and "end" lines to ``path``
    (event, key, pid, time): when each run of a task lived, to prove two never overlapped."""
    pid = os.getpid()

    def note(event):
        with open(path, "a") as out:
            out.write(f"{event} {key} {pid} {time.time():.6f}\n")

    note("start")
    end = time.time() + seconds
    while time.time() < end:
        time.sleep(0.05)
        note("tick")
    note("end")
