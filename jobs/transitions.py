"""The only writer of ``Task.status`` (the claim itself is in ``jobs.worker.claiming``; the SQL
text of both is in ``jobs.sql``).

Each transition is one conditional UPDATE from the source statuses that ``jobs.states`` allows,
and reports whether it applied: a change asked from the wrong status is refused, logged, and
leaves the row as it was. Transitions of a task a worker is running are also guarded by the
attempt number and worker id it was claimed with, so a worker whose task was rescued and handed
to another can never record an outcome over the newer attempt.
"""

import enum
import functools
import logging
import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db import DatabaseError, connections, router, transaction
from django.db.models import F, Q
from django.db.models.functions import Greatest
from django.utils import timezone

from jobs import signals, sql, states, transports
from jobs.db import is_connection_fault, record_isolating, savepoint_in_transaction
from jobs.error_records import ErrorRecord, unstorable_error
from jobs.models import Task, Worker, Workflow
from jobs.states import Status
from jobs.worker import notify

logger = logging.getLogger(__name__)


def _apply(transition: states.Transition, queryset, values: dict, now) -> int:
    """Move every row of ``queryset`` that is in an allowed source status; return how many."""
    values = {"status": transition.target, "updated_at": now, **values}
    return queryset.filter(status__in=sorted(transition.sources)).update(**values)


def _apply_many(transition: states.Transition, queryset, values: dict, now, *, moved_rows=None):
    """Like ``_apply``; return how many rows moved (``_move_many``)."""
    return len(_move_many(transition, queryset, values, now, moved_rows=moved_rows))


def _move_many(transition: states.Transition, queryset, values: dict, now, *, moved_rows=None):
    """Like ``_apply``, then send the signals of every row that moved (if anyone listens);
    return the ids of the rows it moved, as its UPDATE returns them (never found again by a
    column it set: another process may have set it too, at the same instant).

    A row moved to a final status settles what waits for it (``jobs.workflows``) in the same
    transaction; or, given a list ``moved_rows``, adds its workflow columns there for the
    caller to settle (``jobs.workflows.settling`` walks a cascade as a loop, not a recursion).
    """
    ids = list(queryset.filter(status__in=sorted(transition.sources)).values_list("pk", flat=True))
    moved: list = []
    final = transition.target in states.TERMINAL
    for start in range(0, len(ids), 5000):  # SQLite caps the parameters of one statement
        chunk = ids[start : start + 5000]
        if final:
            with transaction.atomic(using=_using()):
                these = _update_returning(transition, chunk, values, now)
                rows = _participants(Task.objects.filter(pk__in=these))
                if moved_rows is None:
                    _settle(rows, now)
                else:
                    moved_rows.extend(rows)
        else:
            these = _update_returning(transition, chunk, values, now)
        moved += these
        if these and signals.has_listeners(transition.target):
            for task in Task.objects.filter(pk__in=these):
                signals.send_status(task)
    return moved


def _update_returning(transition: states.Transition, ids, values: dict, now) -> list:
    """Move the rows ``ids`` that are in an allowed source status; return the ids it moved."""
    rows = Task.objects.filter(pk__in=ids, status__in=sorted(transition.sources))
    values = {"status": transition.target, "updated_at": now, **values}
    statement, params = sql.common.update_returning_ids(rows, values, using=_using())
    with connections[_using()].cursor() as cursor:
        cursor.execute(statement, params)
        return [_as_uuid(row[0]) for row in cursor.fetchall()]


def _apply_to_attempt(transition, task: Task, values: dict, now, *, send=True) -> bool:
    """Apply ``transition`` to the attempt of ``task`` that this process claimed, if still its.

    To a final status, in one transaction with settling what waits for it (``jobs.workflows``):
    its workflow columns are read again after the UPDATE, which holds the row, so a dependent
    enqueued while it ran is seen.
    """
    rows = Task.objects.filter(pk=task.pk, attempts=task.attempts, worker_id=task.worker_id)
    if transition.target in states.TERMINAL:
        with transaction.atomic(using=_using()):
            applied = _apply(transition, rows, values, now) == 1
            if applied:
                _settle(_participants(Task.objects.filter(pk=task.pk)), now)
    else:
        applied = _apply(transition, rows, values, now) == 1
    if applied:
        task.status = transition.target
        for name, value in values.items():
            if not hasattr(value, "resolve_expression"):
                setattr(task, name, value)
        if send:
            signals.send_status(task)
    else:
        logger.warning(
            "transition refused transition=%s task_id=%s attempt=%s worker_id=%s",
            transition.name,
            task.pk,
            task.attempts,
            task.worker_id,
        )
    return applied


# Outcomes of an attempt -----------------------------------------------------------------------


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


def _using() -> str:
    return router.db_for_write(Task)


def _run(statement, transition, rows, now) -> list:
    """Run the attempts UPDATE ``statement`` builds for ``transition`` and ``rows``; return the
    ids it moved."""
    return [row[0] for row in _run_rows(statement, transition, rows, now)]


def _run_rows(statement, transition, rows, now) -> list:
    """Like ``_run``; return the rows its statement returns."""
    sql_text, params = statement(connections[_using()], transition, rows, now=now)
    with connections[_using()].cursor() as cursor:
        cursor.execute(sql_text, params)
        return cursor.fetchall()


# The columns a settling reads of each task that reached a final status (jobs.workflows), as
# the statement recording successes returns them (``jobs.sql.common.SUCCEEDED_COLUMNS``).
_WORKFLOW_COLUMNS = ("pk", "workflow_id", "workflow_role", "has_dependents")
_IN_WORKFLOW = Q(workflow__isnull=False) | Q(has_dependents=True)


def _participants(queryset) -> list[tuple]:
    """The rows of ``queryset`` that a workflow or a dependent waits for."""
    return list(queryset.filter(_IN_WORKFLOW).values_list(*_WORKFLOW_COLUMNS))


def _settle(rows, now):
    """Release, cancel or complete what waits for ``rows`` (just final), in this transaction."""
    waited_for = [row for row in rows if row[1] is not None or row[3]]
    if waited_for:
        from jobs.workflows import settling  # a cycle: it calls this module

        settling.settle(waited_for, now=now)


def _as_uuid(task_id) -> uuid.UUID:
    # PostgreSQL returns ids as UUIDs, SQLite as hex strings.
    return task_id if isinstance(task_id, uuid.UUID) else uuid.UUID(str(task_id))


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


# Operator and owner actions, set-based --------------------------------------------------------


CANCELLED_MESSAGE = "Cancelled."


class CancelOutcome(enum.Enum):
    CANCELLED = "cancelled"  # not a status: what cancel() did
    REQUESTED = "requested"  # running: the task stops at its next checkpoint
    REFUSED = "refused"


@dataclass(frozen=True)
class CancelCounts:
    cancelled: int
    requested: int


def cancel_many(queryset, *, now=None, by=None) -> CancelCounts:
    """Cancel waiting tasks at once; ask running ones to stop at their next checkpoint.

    ``by``: the user who asked (recorded as ``cancelled_by``; None for the system)."""
    now = now or timezone.now()
    # A retrying task's last_error says "we will try again": no longer true once cancelled.
    # Its error_details keep the history of the failed attempts.
    values = {"finished_at": now, "last_error": CANCELLED_MESSAGE, "cancelled_by": by}
    cancelled = _apply_many(states.CANCEL, queryset, values, now)
    # Not a status change: the running task (or its worker) turns the request into one.
    requested = queryset.filter(status=Status.RUNNING, cancel_requested_at__isnull=True).update(
        cancel_requested_at=now, cancelled_by=by, updated_at=now
    )
    return CancelCounts(cancelled=cancelled, requested=requested)


def cancel(task: Task, *, now=None, by=None) -> CancelOutcome:
    counts = cancel_many(Task.objects.filter(pk=task.pk), now=now, by=by)
    task.refresh_from_db()
    if counts.cancelled:
        return CancelOutcome.CANCELLED
    if counts.requested or (task.status == Status.RUNNING and task.cancel_requested_at):
        return CancelOutcome.REQUESTED
    logger.info("transition refused transition=cancel task_id=%s status=%s", task.pk, task.status)
    return CancelOutcome.REFUSED


def requeue_many(queryset, *, now=None) -> int:
    """Put failed or cancelled tasks back in the queue, keeping their error history.

    A task that used up its attempts gets one more, so a requeued task always runs again. It
    gives up a unique key held while waiting or active: another task may hold the key by now,
    and the key's unique index would refuse the requeue (docs/howto/flow-control.md).
    """
    now = now or timezone.now()
    values = {
        "run_after": now,
        "finished_at": None,
        "cancel_requested_at": None,
        "cancelled_by": None,
        # A fresh start: no deadline (it may have expired) and no snoozes counted.
        "expires_at": None,
        "snoozes": 0,
        "last_error": "",
        "worker_id": "",
        "max_attempts": Greatest(F("max_attempts"), F("attempts") + 1),
        # The progress bar starts again; recorded steps stay, so the run resumes after them.
        "progress_current": 0,
        "progress_total": None,
        "progress_message": "",
        "result": None,
        "result_public": False,
        "unique_while": None,
    }
    with transaction.atomic(using=_using()):
        moved = _move_many(states.REQUEUE, queryset, values, now)
        # A workflow with a member to run again is not finished.
        for start in range(0, len(moved), 5000):  # SQLite caps the parameters of one statement
            requeued = Task.objects.filter(pk__in=moved[start : start + 5000])
            reopen_workflows(requeued.filter(workflow__isnull=False).values("workflow_id"), now=now)
    return len(moved)


def requeue(task: Task, *, now=None) -> bool:
    applied = requeue_many(Task.objects.filter(pk=task.pk), now=now) == 1
    task.refresh_from_db()
    if not applied:
        logger.info(
            "transition refused transition=requeue task_id=%s status=%s", task.pk, task.status
        )
    return applied


def run_now_many(queryset, *, now=None) -> int:
    """Make the waiting tasks of ``queryset`` that are due later due now (the admin's "Run
    now": a delayed, snoozed or backing-off task); return how many. Their status stays; idle
    workers are woken on PostgreSQL. A task claimed meanwhile is not touched (the UPDATE
    filters on the status again)."""
    now = now or timezone.now()
    later = queryset.filter(status__in=sorted(states.CLAIM.sources), run_after__gt=now)
    queues = set(later.order_by().values_list("queue", flat=True).distinct())
    moved = later.update(run_after=now, updated_at=now)
    if moved:
        notify.wake(queues, using=_using())
    return moved


# Maintenance ----------------------------------------------------------------------------------

EXPIRED_MESSAGE = "Expired: it had not started by its deadline."
# Rows one maintenance round cancels for expiry, in one UPDATE: a backlog of a million expired
# tasks is worked through over several rounds rather than in one long transaction.
EXPIRE_BATCH = 5000


def expire_waiting(*, now=None, limit=EXPIRE_BATCH) -> int:
    """Cancel waiting tasks whose ``expires_at`` has passed ("expired"); return how many.

    One UPDATE of at most ``limit`` rows, found by the partial index of waiting rows with a
    deadline (jobs_task_waiting_expiry_idx). The claim already skips these rows
    (``jobs.sql.common.due_condition``); this gives them their final status. When anyone
    listens, the rows moved are read back to send ``task_cancelled`` and ``task_finished``.
    """
    now = now or timezone.now()
    expired = Task.objects.expired(now).order_by("expires_at").values("pk")[:limit]
    batch = Task.objects.filter(pk__in=expired)
    values = {"finished_at": now, "last_error": EXPIRED_MESSAGE, "lease_expires_at": None}
    with transaction.atomic(using=_using()):
        moved = _apply(states.EXPIRE, batch, values, now)
        if moved:
            just_expired = Task.objects.filter(
                status=states.EXPIRE.target, finished_at=now, last_error=EXPIRED_MESSAGE
            )
            _settle(_participants(just_expired), now)
    if moved and signals.has_listeners(states.EXPIRE.target):
        # The rows this statement moved: stamped ``now`` and "expired" by it.
        moved_rows = Task.objects.filter(
            status=states.EXPIRE.target, updated_at=now, last_error=EXPIRED_MESSAGE
        )
        for task in moved_rows.iterator():
            signals.send_status(task)
    if moved:
        logger.info("tasks expired count=%d", moved)
    return moved


def is_expired(task: Task) -> bool:
    """Whether ``task`` was cancelled because it had not started by its deadline."""
    return task.status == Status.CANCELLED and task.last_error == EXPIRED_MESSAGE


def rescue_expired(*, now=None) -> int:
    """Return tasks whose worker stopped renewing its lease to the queue, or fail them.

    Row by row, each guarded by the lease it expired with, so a worker that renews at the last
    moment keeps its task.
    """
    now = now or timezone.now()
    rescued = 0
    for task in Task.objects.stale(now):
        message = f"lease of worker {task.worker_id!r} expired at {task.lease_expires_at}"
        guard = Task.objects.filter(pk=task.pk, lease_expires_at=task.lease_expires_at)
        rescued += _rescue(task, guard, message, now)
    return rescued


def rescue_dead(worker_ids, *, sessions=None, now=None) -> int:
    """Return the tasks of workers proven dead (``jobs.worker.liveness``) to the queue at once.

    A worker on the same host saw their pids gone, or any worker saw their session's lock free
    (``sessions``: worker id -> the key seen free and the heartbeat seen then), so their leases
    need not lapse first. Worker by worker, in a transaction that locks its row: a worker
    proven by its session is rescued only if the row still has that key and no newer
    heartbeat, so a worker that wrote a new key first (``jobs.worker.session``) keeps its
    tasks, and one whose new key comes after finds its row gone. Each task is guarded by its
    worker and its attempt, so a task already rescued and claimed again is left alone. The
    dead workers' rows are removed: nothing of them is left to judge.
    """
    now = now or timezone.now()
    sessions = sessions or {}
    rescued = 0
    for worker_id in sorted(set(worker_ids)):
        with transaction.atomic(using=_using()):
            rows = Worker.objects.select_for_update().filter(pk=worker_id)
            if worker_id in sessions:
                key, heartbeat_at = sessions[worker_id]
                rows = rows.filter(session_key=key, last_heartbeat_at__lte=heartbeat_at)
            pid = rows.values_list("pid", flat=True).first()
            if pid is None:
                continue  # rescued already, stopped, or alive after all (a new key, a beat)
            how = "its database session ended" if worker_id in sessions else f"pid {pid} gone"
            for task in Task.objects.running().filter(worker_id=worker_id):
                message = f"worker {worker_id!r} died ({how})"
                guard = Task.objects.filter(pk=task.pk, worker_id=worker_id, attempts=task.attempts)
                rescued += _rescue(task, guard, message, now)
            Worker.objects.filter(pk=worker_id).delete()
    return rescued


def _rescue(task: Task, guard, message: str, now) -> int:
    """Retry ``task`` (or fail it, its attempts spent) if ``guard`` still selects it; 1 if so."""
    error = ErrorRecord(
        user_message="The worker running this task stopped unexpectedly.",
        exception="jobs.exceptions.WorkerLost",
        message=message,
        transient=True,
    )
    exhausted = task.attempts >= task.max_attempts
    transition = states.RESCUE_EXHAUSTED if exhausted else states.RESCUE
    values = {
        "last_error": error.user_message,
        "error_details": [*task.error_details, error.as_entry(task, now)],
        "lease_expires_at": None,
    }
    values.update({"finished_at": now} if exhausted else {"run_after": now})
    with transaction.atomic(using=_using()):
        if not _apply(transition, guard, values, now):
            return 0
        if exhausted:
            _settle(_participants(Task.objects.filter(pk=task.pk)), now)
    task.refresh_from_db()
    signals.send_status(task)
    logger.warning(
        "task rescued task_id=%s name=%s worker_id=%s outcome=%s",
        task.pk,
        task.name,
        task.worker_id,
        transition.target,
    )
    return 1


# Workflows (jobs.workflows: which of these to apply is decided in jobs.workflows.settling) -----


def unblock_many(task_ids, *, now=None, passed=None) -> int:
    """Release blocked tasks whose dependencies allow them to run: ``pending``, due as their
    ``run_after`` says; return how many. ``passed``: by task id, the results to put before its
    arguments (a chain's previous link's). Idle workers are woken by the status trigger."""
    now = now or timezone.now()
    for task_id, results in (passed or {}).items():
        blocked = Task.objects.filter(pk=task_id, status=Status.BLOCKED)
        payload = blocked.values_list("payload", flat=True).first()
        if payload is not None:
            args = payload.get("args", []) if isinstance(payload, dict) else []
            blocked.update(payload={**payload, "args": [*results, *args]})
    rows = Task.objects.filter(pk__in=list(task_ids))
    moved = _apply_many(states.UNBLOCK, rows, {}, now)
    if moved:
        queues = rows.filter(status=states.UNBLOCK.target).values_list("queue", "pk")
        by_queue: dict[str, list] = {}
        for queue, task_id in queues:
            by_queue.setdefault(queue, []).append(task_id)
        for queue, ids in by_queue.items():
            transports.announce_on_commit(queue, ids, using=_using())
    return moved


def cancel_blocked(reasons: dict, *, now=None, moved_rows=None) -> int:
    """Cancel blocked tasks that will never run, each with its reason (``reasons``: by task id,
    the message its owner reads); return how many. ``moved_rows``: see ``_apply_many``."""
    now = now or timezone.now()
    by_reason: dict[str, list] = {}
    for task_id, reason in reasons.items():
        by_reason.setdefault(reason, []).append(task_id)
    moved = 0
    for reason, ids in by_reason.items():
        rows = Task.objects.filter(pk__in=ids, status=Status.BLOCKED)
        values = {"finished_at": now, "last_error": reason}
        moved += _apply_many(states.CANCEL, rows, values, now, moved_rows=moved_rows)
    return moved


def rearm_many(queryset, *, now=None) -> int:
    """Block finished tasks of a workflow being retried again, to be decided anew: a batch's
    callbacks at its next completion, a link cancelled for its dependency once that has run
    again. Their earlier attempts' errors are kept."""
    now = now or timezone.now()
    values = {
        "finished_at": None,
        "cancel_requested_at": None,
        "cancelled_by": None,
        "last_error": "",
        "worker_id": "",
        "max_attempts": Greatest(F("max_attempts"), F("attempts") + 1),
        "result": None,
        "result_public": False,
    }
    return _apply_many(states.REARM, queryset, values, now)


def lock_workflow(workflow_id, *, now=None) -> bool:
    """Take the row lock of a workflow for this transaction (an UPDATE, on every database): the
    outcomes of its last members take turns, the second reading the first's committed."""
    now = now or timezone.now()
    return Workflow.objects.filter(pk=workflow_id).update(updated_at=now) == 1


def finish_workflow(workflow_id, status: str, *, now=None) -> bool:
    """Record that a running workflow has finished, ``succeeded`` or ``failed``."""
    now = now or timezone.now()
    running = Workflow.objects.filter(pk=workflow_id, status=Workflow.State.RUNNING)
    return running.update(status=status, finished_at=now, updated_at=now) == 1


def reopen_workflows(workflow_ids, *, now=None) -> int:
    """Workflows with a member to run again (requeued, retried): running until it finishes."""
    now = now or timezone.now()
    finished = Workflow.objects.filter(pk__in=workflow_ids).exclude(status=Workflow.State.RUNNING)
    return finished.update(status=Workflow.State.RUNNING, finished_at=None, updated_at=now)


def cancel_workflow_record(workflow_id, *, now=None) -> bool:
    """Mark a workflow cancelled as a whole (its tasks are cancelled by ``cancel_many``)."""
    now = now or timezone.now()
    rows = Workflow.objects.filter(pk=workflow_id).exclude(status=Workflow.State.CANCELLED)
    return rows.update(status=Workflow.State.CANCELLED, finished_at=now, updated_at=now) == 1
