"""Workflow transitions (which of these to apply is decided in ``jobs.workflows.settling``)."""

import logging

from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone

from jobs import states, transports
from jobs.models import Task, Workflow
from jobs.states import Status
from jobs.transitions.base import (
    _apply_many,
    _using,
)

logger = logging.getLogger(__name__)


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
