"""Operator and owner actions, set-based: cancel, requeue, run now."""

import enum
import logging
from dataclasses import dataclass

from django.db import transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone

from jobs import states
from jobs.models import Task
from jobs.states import Status
from jobs.transitions.base import (
    CANCELLED_MESSAGE,
    _apply_many,
    _move_many,
    _using,
)
from jobs.transitions.workflows import reopen_workflows
from jobs.worker import notify

logger = logging.getLogger(__name__)


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
