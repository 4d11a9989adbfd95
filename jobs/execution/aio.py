"""Running one claimed async task on the caller's event loop, beside others, under its timeout.

``jobs.execution.executor`` runs a task alone; a worker's child awaits its async tasks together
on one loop (``jobs.worker.async_batch``) through ``run_async`` here, which is ``executor.run``
with the task's code awaited. The bookkeeping around it (resolving, recording, signals) is the
executor's own, called synchronously on the loop's thread (``jobs.db.outside_event_loop``): the
child's one database connection is used by one call at a time.

A task's timeout is enforced here: its coroutine is cancelled, and the attempt recorded as the
supervisor records a task it killed for its timeout (``jobs.worker.losses``). A cancellation
from outside (the owner cancelled the task, ``cancel``) is recorded ``cancelled``.
"""

import asyncio
import time

from jobs.db import outside_event_loop
from jobs.exceptions import Snooze, TaskCancelled, TaskTimeout
from jobs.execution import executor
from jobs.execution.executor import CANCELLED, Outcome
from jobs.execution.runnable import Runnable
from jobs.models import Task


def timeout_error(timeout: float) -> TaskTimeout:
    """What a task stopped for its timeout records (here or by the supervisor's kill)."""
    unit = "second" if timeout == 1 else "seconds"
    return TaskTimeout(f"The task ran longer than its timeout of {timeout:g} {unit}.")


class Cancellation:
    """Whether the coroutine of a task was cancelled because its owner asked (``cancel``)."""

    def __init__(self):
        self.requested = False


async def execute_async(
    task: Task, runnable: Runnable, timeout: float | None, cancellation: Cancellation
) -> Outcome:
    """``executor.execute`` for an async task: await it, at most ``timeout`` seconds.

    Never raises for the task: ``BaseException`` included (``SystemExit`` marks the outcome
    ``unsettled``, as there). A ``CancelledError`` the task did not ask for (the loop's own
    shutdown) propagates, as asyncio expects.
    """
    started = time.monotonic()
    deadline = asyncio.timeout(timeout)
    try:
        with outside_event_loop():
            if runnable.on_start:
                runnable.on_start(task)
            awaitable = runnable.call(task)
        async with deadline:
            result = await awaitable  # type: ignore[misc]  # a coroutine: is_async
        with outside_event_loop():
            outcome = executor.outcome_of_result(task, result)
    except TaskCancelled:
        outcome = Outcome(CANCELLED)
    except Snooze as snooze:
        with outside_event_loop():
            outcome = executor.outcome_of_result(task, snooze)
    except asyncio.CancelledError:
        if not cancellation.requested:
            raise
        current = asyncio.current_task()
        if current is not None:
            current.uncancel()  # handled: the task goes on, to record its outcome
        outcome = Outcome(CANCELLED)
    except BaseException as exc:  # the task's outcome, whatever it raised
        if isinstance(exc, TimeoutError) and deadline.expired():
            assert timeout is not None  # only a deadline set expires
            exc = timeout_error(timeout)
        with outside_event_loop():
            outcome = executor.outcome_for_exception(task, exc, runnable)
        outcome.exception = exc
        if not isinstance(exc, Exception):
            assert outcome.error is not None  # outcome_for_exception always records one
            outcome.unsettled = f"the task raised {outcome.error.exception}"
    outcome.duration = time.monotonic() - started
    return outcome


async def run_async(
    task: Task,
    runnable: Runnable,
    *,
    timeout: float | None,
    cancellation: Cancellation,
    defer_success: bool = False,
    hold_success: bool = False,
    notify_success: bool = False,
    batch_line: bool = False,
) -> Outcome:
    """``executor.run`` for an async task on the running loop (see there and the module)."""
    with outside_event_loop():
        found, outcome = executor.begin(task, runnable)
    if outcome is None:
        assert found is not None  # begin finds it or says why it could not
        outcome = await execute_async(task, found, timeout, cancellation)
    with outside_event_loop():
        return executor.end(
            task, found, outcome, defer_success=defer_success, hold_success=hold_success,
            notify_success=notify_success, batch_line=batch_line,
        )  # fmt: skip
