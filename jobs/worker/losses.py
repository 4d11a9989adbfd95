"""What a task becomes when the child running it was lost: killed (timeout, memory, lease,
cancel) or dead. The pool (``jobs.worker.pool``) notices the loss; this records it.
"""

import logging
import time

from django.db import DatabaseError

from jobs import transitions
from jobs.db import first_line
from jobs.exceptions import MemoryLimitExceeded, WorkerCrashed
from jobs.execution import executor, finishing
from jobs.execution.aio import timeout_error
from jobs.models import Task
from jobs.states import Status
from jobs.worker.child import Child, StopReason
from jobs.worker.wire import Claimed

logger = logging.getLogger(__name__)


def lost_error(child: Child, reason: str, timeout: float, max_memory_bytes: int | None):
    """The error to record for a task whose child was killed or died; None for a cancel."""
    if reason == StopReason.CANCEL:
        return None
    if reason == StopReason.TIMEOUT:
        return timeout_error(timeout)
    if reason == StopReason.LEASE:
        return WorkerCrashed(
            "The task was stopped: its worker could not reach the database to renew its lease.",
            detail=f"child process {child.pid} killed, lease not renewed",
        )
    if reason == StopReason.SESSION:
        return WorkerCrashed(
            "The task was stopped: its worker lost its database session, so another worker "
            "may take it over.",
            detail=f"child process {child.pid} killed, session lock lost",
        )
    if reason == StopReason.MEMORY:
        assert max_memory_bytes is not None, "killed for memory only under a limit"
        return MemoryLimitExceeded(
            "The task used more memory than this worker allows.",
            detail=f"child rss above {max_memory_bytes // 2**20} MiB",
        )
    return WorkerCrashed(
        "The task stopped unexpectedly.",
        detail=f"child process {child.pid} exited with code {child.process.exitcode}",
    )


def record_running(child: Child, reason: str, max_memory_bytes: int | None, retry):
    """Record the loss of the tasks ``child`` was running, taken out of its batch.

    The task it was stopped for (the one running; for a cancellation, the async tasks asked to
    cancel) records ``reason``'s error; async tasks running beside it on its loop record
    ``lost_beside``'s.
    """
    running = child.running()
    indices = child.running_all()
    if reason == StopReason.CANCEL and child.cancelling:
        stopped_for = [index for index in indices if index in child.cancelling]
    else:
        stopped_for = [running[0]] if running and running[0] in child.batch else []
    for index in indices:
        claimed = child.batch.pop(index)
        if index in stopped_for:
            error = lost_error(child, reason, child.timeouts[index], max_memory_bytes)
        else:
            error = lost_beside(child, reason, max_memory_bytes)
        started = running[1] if running and running[0] == index else child.dispatched
        record_lost(claimed, error, started, retry)


def lost_beside(child: Child, reason: str, max_memory_bytes: int | None):
    """The error to record for an async task stopped with its child for another task's sake
    (or for the child's: memory, lease), transient: retried under its policy."""
    if reason in (StopReason.LEASE, StopReason.SESSION, StopReason.MEMORY):
        return lost_error(child, reason, 0.0, max_memory_bytes)
    return WorkerCrashed(
        "The task was stopped with the worker process it ran in, beside other tasks.",
        detail=f"child process {child.pid} stopped, reason={reason}",
    )


def record_lost(claimed: Claimed, exc, started: float, retry):
    """Record the attempt of ``claimed`` as ended by ``exc`` (cancelled if None), unless its
    child recorded an outcome before it went; through ``retry(operation, what)``."""

    def record():
        current = Task.objects.get(pk=claimed.id)
        if (current.status, current.attempts, current.worker_id) != (
            Status.RUNNING,
            claimed.attempts,
            claimed.worker_id,
        ):
            return False  # the child recorded its outcome before it went
        try:
            runnable = executor.resolve(current)
        except Exception:
            runnable = None
        if exc is None:
            recorded = transitions.cancel_running(current)
        else:
            outcome = executor.outcome_for_exception(current, exc, runnable)
            outcome.duration = time.monotonic() - started
            recorded = executor.record(current, outcome)
        if recorded:  # Django's task_finished, sent here in the supervisor
            finishing.finished(current, runnable, exc)
        return recorded

    try:
        retry(record, f"record_lost task_id={claimed.id}")
    except DatabaseError as exc:
        logger.warning(
            # It runs again once its lease lapses.
            "loss not recorded, database unreachable task_id=%s error=%r",
            claimed.id, first_line(exc),
        )  # fmt: skip
