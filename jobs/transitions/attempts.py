"""Outcomes of an attempt a worker claimed: success (one or many in one statement), failure,
retry, cancellation at a checkpoint, release, snooze.
"""

import functools
import logging
import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db import DatabaseError, connections, transaction
from django.db.models import F
from django.utils import timezone

from jobs import signals, sql, states
from jobs.db import is_connection_fault, record_isolating, savepoint_in_transaction
from jobs.error_records import ErrorRecord, unstorable_error
from jobs.models import Task
from jobs.states import Status
from jobs.transitions.base import (
    CANCELLED_MESSAGE,
    _apply,
    _apply_to_attempt,
    _as_uuid,
    _run,
    _run_rows,
    _settle,
    _using,
)

logger = logging.getLogger(__name__)


def succeed(task: Task, result=None, *, now=None) -> bool:
    now = now or timezone.now()
    values = {"result": result, "finished_at": now, "lease_expires_at": None}
    return _apply_to_attempt(states.SUCCEED, task, values, now)


@dataclass(frozen=True)
class Success:
    """A successful attempt waiting to be recorded: which attempt, its result, when it ended.

    ``waited_for``: known to be a workflow's or to have dependents (as claimed), so that,
    recorded alone, it goes straight to the transaction that settles it. False tells nothing:
    the statement reads it again.
    """

    task_id: uuid.UUID
    attempts: int
    worker_id: str
    result: object
    finished_at: datetime
    waited_for: bool = False


def succeed_many(successes: list[Success], *, now=None) -> set:
    """Record many successful attempts in one statement; return the ids it applied to.

    The same guard as ``succeed``, row by row: the task is still ``running`` in the attempt and
    under the worker that claimed it. A success that is not recorded (a refused row, or a
    worker gone before the write) leaves its task ``running`` under a lease, so it is rescued
    and run again: at least once, never lost.

    A result the database will not store (a NUL in jsonb, a trigger's refusal: any error but a
    connection fault) fails only its own task, ``failed`` with the reason; the batch is split
    until that task stands alone, and the others are recorded (``jobs.db.record_isolating``).

    A transaction only where one is needed: inside a caller's, none of its own; alone, one for
    the tasks a workflow or a dependent waits for (the outcome and its settling stand or fall
    together), none for the others (one statement in autocommit).
    """
    if not successes:
        return set()

    now = now or timezone.now()
    recorded: list = []
    unstorable: set = set()
    waited = successes
    unknown = [success for success in successes if not success.waited_for]
    if unknown and not connections[_using()].in_atomic_block:
        # Alone (outside the claim's transaction), the successes of the tasks nothing waits
        # for are one statement in autocommit: no BEGIN, no COMMIT, no savepoint. The others
        # (a workflow's, a dependency's), left alone by it, go on with their settling.
        done, refused = _record_successes(unknown, now, unwaited=True)
        recorded += done
        unstorable |= {id(success) for success in refused}
        moved = {_as_uuid(row[0]) for row in done}
        waited = [
            success
            for success in successes
            if id(success) not in unstorable and _as_uuid(success.task_id) not in moved
        ]
    if waited:
        # One transaction: the outcomes, and what waits for them released (jobs.workflows).
        # Inside a caller's (the claim's) no savepoint of its own: the two stand or fall with
        # it, and record_isolating keeps a refused row from aborting it.
        with transaction.atomic(using=_using(), savepoint=False):
            done, refused = _record_successes(waited, now)
            _settle(done, now)
        recorded += done
        unstorable |= {id(success) for success in refused}
    applied = [row[0] for row in recorded]
    return succeeded([success for success in successes if id(success) not in unstorable], applied)


def _record_successes(successes: list[Success], now, *, unwaited=False) -> tuple[list, list]:
    """Run ``succeed_attempts`` of ``jobs.sql`` over ``successes`` (with ``unwaited``, only the
    tasks nothing waits for), failing those whose result the database refuses; return the rows
    it recorded and the successes it refused."""

    def record(part):
        run = functools.partial(sql.dialect(_using()).succeed_attempts, unwaited=unwaited)
        return _run_rows(run, states.SUCCEED, success_rows(part), now)

    recorded, refused = record_isolating(successes, record, using=_using())
    for success, error in refused:
        fail_unstorable(success, error, now=now)
    return recorded, [success for success, _ in refused]


def fail_unstorable(success: Success, error: Exception, *, now=None) -> bool:
    """Fail the attempt of ``success``: the database refused its result, saying ``error``.

    Retrying would compute the same result and be refused the same way, so it is permanent.
    If even the failure cannot be written, the task stays ``running`` until its lease lapses
    and it is rescued, as for a worker that died.
    """
    record = unstorable_error(error)
    rows = Task.objects.filter(pk=success.task_id, attempts=success.attempts)
    task = rows.filter(worker_id=success.worker_id, status=Status.RUNNING).first()
    if task is None:
        return False
    try:
        with savepoint_in_transaction(_using()):
            return fail(task, record, now=now)
    except DatabaseError as exc:
        if is_connection_fault(exc):
            raise
        logger.exception("could not record the failure either task_id=%s", success.task_id)
        return False


def success_rows(successes: list[Success]) -> list[tuple]:
    """The rows of ``successes`` as ``succeed_attempts`` takes them (``jobs.sql.common.SUCCESS``);
    ``succeed_many`` runs it, then ``succeeded`` with the ids recorded."""
    return [
        (success.task_id, success.attempts, success.worker_id, success.result, success.finished_at)
        for success in successes
    ]


def succeeded(successes: list[Success], applied_ids) -> set:
    """After a statement recorded ``success_rows(successes)`` (``applied_ids`` it returned): log
    refusals, send signals."""
    applied = {_as_uuid(task_id) for task_id in applied_ids}
    done: list[Success] = []
    refused: list[Success] = []
    for success in successes:
        (done if _as_uuid(success.task_id) in applied else refused).append(success)
    for success in refused:
        logger.warning(
            "transition refused transition=%s task_id=%s attempt=%s worker_id=%s",
            states.SUCCEED.name,
            success.task_id,
            success.attempts,
            success.worker_id,
        )
    if done and signals.has_listeners(states.SUCCEED.target):
        for task in Task.objects.filter(pk__in=[success.task_id for success in done]):
            signals.send_status(task)
    return {success.task_id for success in done}


def release_many(attempts, *, now=None) -> int:
    """Hand back many claimed attempts at once, ``(task_id, attempts, worker_id)`` each.

    Like ``release``: claimable at once, the attempt undone. An attempt no longer running under
    that worker (its outcome was recorded, or it was rescued) is left alone, silently: a worker
    hands back everything it is unsure of, and some of it may have finished.
    """
    now = now or timezone.now()
    rows = [(task_id, attempt, worker_id) for task_id, attempt, worker_id in attempts]
    if not rows:
        return 0
    return len(_run(sql.dialect(_using()).release_attempts, states.RELEASE, rows, now))


def fail(task: Task, error: ErrorRecord, *, now=None) -> bool:
    now = now or timezone.now()
    values = {
        "last_error": error.user_message,
        "error_details": [*task.error_details, error.as_entry(task, now)],
        "finished_at": now,
        "lease_expires_at": None,
    }
    return _apply_to_attempt(states.FAIL, task, values, now)


def retry_later(task: Task, error: ErrorRecord, run_after, *, now=None) -> bool:
    now = now or timezone.now()
    values = {
        "last_error": error.user_message,
        "error_details": [*task.error_details, error.as_entry(task, now)],
        "run_after": run_after,
        "lease_expires_at": None,
    }
    return _apply_to_attempt(states.RETRY_LATER, task, values, now)


def cancel_running(task: Task, *, now=None) -> bool:
    """Record that a running task stopped because its cancellation was asked for."""
    now = now or timezone.now()
    values = {"finished_at": now, "lease_expires_at": None, "last_error": CANCELLED_MESSAGE}
    return _apply_to_attempt(states.CANCEL_RUNNING, task, values, now)


def release(task: Task, *, now=None) -> bool:
    """Hand an unfinished task back (worker shutting down): claimable at once, attempt undone."""
    now = now or timezone.now()
    values = {
        "attempts": F("attempts") - 1,
        "run_after": now,
        "worker_id": "",
        "lease_expires_at": None,
    }
    applied = _apply_to_attempt(states.RELEASE, task, values, now, send=False)
    if applied:
        task.refresh_from_db(fields=["attempts"])
    return applied


def snooze(task: Task, run_after, *, now=None) -> bool:
    """Put a running task back to wait until ``run_after`` (it raised ``jobs.Snooze``).

    As a release does: its attempt undone, no error recorded, no signal sent (the task is not
    finished, and nothing failed); its count of snoozes goes up by one. A task whose
    cancellation was asked meanwhile is cancelled instead: the owner asked it to stop, and a
    snooze is no checkpoint to ignore that at.
    """
    now = now or timezone.now()
    values = {
        "attempts": F("attempts") - 1,
        "snoozes": F("snoozes") + 1,
        "run_after": run_after,
        "worker_id": "",
        "lease_expires_at": None,
    }
    rows = Task.objects.filter(
        pk=task.pk,
        attempts=task.attempts,
        worker_id=task.worker_id,
        cancel_requested_at__isnull=True,
    )
    if _apply(states.SNOOZE, rows, values, now) == 1:
        task.status, task.run_after, task.worker_id = states.SNOOZE.target, run_after, ""
        task.lease_expires_at = None
        task.refresh_from_db(fields=["attempts", "snoozes"])
        return True
    if Task.objects.filter(pk=task.pk, cancel_requested_at__isnull=False).exists():
        return cancel_running(task, now=now)
    return _apply_to_attempt(states.SNOOZE, task, values, now, send=False)  # refused: logged
