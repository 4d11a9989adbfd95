"""Maintenance's transitions: expiry of waiting tasks past their deadline, rescue of tasks
whose worker's lease lapsed or whose worker was proven dead.
"""

import logging

from django.db import transaction
from django.utils import timezone

from jobs import signals, states
from jobs.error_records import ErrorRecord
from jobs.models import Task, Worker
from jobs.states import Status
from jobs.transitions.base import (
    _apply,
    _participants,
    _settle,
    _update_rows_returning,
    _using,
)

logger = logging.getLogger(__name__)

EXPIRED_MESSAGE = "Expired: it had not started by its deadline."
# Rows one maintenance round cancels for expiry, in one UPDATE: a backlog of a million expired
# tasks is worked through over several rounds rather than in one long transaction.
EXPIRE_BATCH = 5000


def expire_waiting(*, now=None, limit=EXPIRE_BATCH) -> int:
    """Cancel waiting tasks whose ``expires_at`` has passed ("expired"); return how many.

    At most ``limit`` rows, found by the partial index of waiting rows with a deadline
    (jobs_task_waiting_expiry_idx), moved by one guarded UPDATE that returns their ids: what
    waits for them is settled and their signals sent by those ids, never by the values it
    stamped (another process may stamp the same instant). The claim already skips these rows
    (``jobs.sql.common.due_condition``); this gives them their final status.
    """
    now = now or timezone.now()
    expired = Task.objects.expired(now).order_by("expires_at").values("pk")[:limit]
    batch = Task.objects.filter(pk__in=expired)
    values = {"finished_at": now, "last_error": EXPIRED_MESSAGE, "lease_expires_at": None}
    with transaction.atomic(using=_using()):
        moved_ids = _update_rows_returning(states.EXPIRE, batch, values, now)
        if moved_ids:
            _settle(_participants(Task.objects.filter(pk__in=moved_ids)), now)
    if moved_ids and signals.has_listeners(states.EXPIRE.target):
        for task in Task.objects.filter(pk__in=moved_ids).iterator():
            signals.send_status(task)
    if moved_ids:
        logger.info("tasks expired count=%d", len(moved_ids))
    return len(moved_ids)


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
