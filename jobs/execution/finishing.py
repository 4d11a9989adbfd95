"""After an outcome is recorded: what waits for it (Django Tasks' ``task_finished``).

``finished`` calls a task's hook once its outcome is recorded, in the process that recorded it
(the child, or the supervisor for a child that was lost). ``record_held`` records, in one
statement, the successes a child held because a receiver waits for them, then calls their hooks
with the rows final.
"""

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from django.utils import timezone

from jobs import transitions
from jobs.db import retry_on_database_error
from jobs.execution.runnable import Runnable
from jobs.models import Task
from jobs.states import Status

if TYPE_CHECKING:
    from jobs.execution.executor import Outcome

logger = logging.getLogger(__name__)


def finished(task: Task, runnable: Runnable | None, exception: BaseException | None = None):
    """Call the hook of ``runnable`` for the outcome of ``task`` just recorded (Django Tasks'
    ``task_finished``); also called by the worker's supervisor for a child that was lost.

    With the ``exception`` the attempt ended with being handled, as Django sends the signal:
    its receivers (django.tasks' own log line, error trackers) read it from ``sys.exc_info()``.
    """
    if runnable and runnable.on_finish:
        _call_finish(task, runnable.on_finish, exception)


def call_finish(task: Task, finish: Callable[[Task], object], exception=None):
    """Call ``finish(task)`` (a task's hook), logging what a receiver raises."""
    _call_finish(task, finish, exception)


def finish_refused(task: Task, finish: Callable[[Task], object] | None):
    """A success of ``task``'s attempt was not applied: call ``finish`` with its row if the
    database refused the result (the attempt failed instead); nothing if the attempt is no
    longer this worker's (its lease lapsed: another worker runs it)."""
    failed = Task.objects.filter(
        pk=task.pk, attempts=task.attempts, worker_id=task.worker_id, status=Status.FAILED
    ).first()
    if failed is not None and finish is not None:
        _call_finish(failed, finish)
    return failed


def _call_finish(task: Task, finish: Callable[[Task], object], exception=None):
    try:
        if exception is None:
            finish(task)
        else:
            _while_handling(exception, finish, task)
    except Exception:  # a receiver's bug; the outcome is recorded already
        logger.exception("task_finished receiver failed name=%s id=%s", task.name, task.pk)


def record_held(held: "list[tuple[Task, Outcome]]"):
    """Record the successes ``run`` held, in one statement, then send what waits for each.

    The statement is ``jobs.transitions.succeed_many`` (retried through database faults), which
    sends ``task_succeeded``/``task_finished`` for the rows it wrote; then each task's own hook
    (Django Tasks' ``task_finished``) is called, with the row final and recorded. A success the
    database refused to store fails its task (the hook sees ``failed``); one no longer this
    worker's to record (its lease lapsed) is logged by ``succeed_many`` and sends nothing.
    """
    if not held:
        return
    now = timezone.now()
    successes = [
        transitions.Success(
            task.pk,
            task.attempts,
            task.worker_id,
            o.result,
            o.finished_at or now,
            waited_for=task.workflow_id is not None or task.has_dependents,
        )
        for task, o in held
    ]
    applied = retry_on_database_error(
        lambda: transitions.succeed_many(successes),
        what=f"record {len(successes)} successes",
        model=Task,
    )
    for task, outcome in held:
        if task.pk in applied:
            task.status, task.result = Status.SUCCEEDED, outcome.result
            task.finished_at, task.lease_expires_at = outcome.finished_at, None
            if outcome.finish:
                _call_finish(task, outcome.finish)
        elif finish_refused(task, outcome.finish) is not None:
            outcome.kind, outcome.result = Status.FAILED, None


def _while_handling(exception: BaseException, call, task: Task):
    """``call(task)`` inside an ``except`` block handling ``exception``, its traceback kept."""
    traceback = exception.__traceback__
    try:
        raise exception
    except BaseException:
        call(task)
    finally:
        exception.__traceback__ = traceback
