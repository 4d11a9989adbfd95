"""A workflow's status, as JSON for the owner's page, and the owner's retry and cancel of it.

The rules of the task status view (shared, ``jobs.web.owned``), applied to a chain or a batch:
it is shown only to its owner and to users holding ``view_task`` (its members are tasks); cancelling
another's workflow also needs ``cancel_task``, retrying its failed members ``retry_task``;
``is_staff`` alone grants nothing. Anyone else gets the same 404 as for an id that does not
exist or is not a UUID. The body has the task status's shape (``status``, ``message``,
``progress``, ``is_finished``, ``can_retry``, ``can_cancel``, ``urls``), so the same progress
bar and script (``jobs/progress.html``, ``progress.js``) show it; its figures are
``jobs.workflows.progress``'s.
"""

from django.urls import reverse
from django.utils import timezone

from jobs.models import Task, Workflow
from jobs.states import Status
from jobs.web import owned
from jobs.web.owned import CANCEL_PERMISSION, RETRY_PERMISSION
from jobs.web.views import status_text
from jobs.workflows import api
from jobs.workflows.progress import MEMBER, Progress
from jobs.workflows.progress import progress as count_progress

MEMBERS_SHOWN = 200  # members listed in the JSON; the counts cover all of them
NOT_FOUND = "No such workflow."


def visible_workflow(user, workflow_id) -> Workflow:
    """Return the workflow ``workflow_id`` if ``user`` may see it; raise Http404 otherwise."""
    return owned.visible(
        user, workflow_id, rows=Workflow.objects.all(), owned=lambda rows, u: rows.filter(owner=u),
        not_found=NOT_FOUND,
    )  # fmt: skip


def may_cancel(workflow: Workflow, user) -> bool:
    """Tell whether ``user`` may cancel ``workflow`` (still running)."""
    running = workflow.status == Workflow.State.RUNNING
    return running and owned.may_act(workflow, user, CANCEL_PERMISSION)


def may_retry(workflow: Workflow, user, counted: Progress | None = None) -> bool:
    """Tell whether ``user`` may run the failed and cancelled members of ``workflow`` again."""
    if workflow.status not in (Workflow.State.FAILED, Workflow.State.CANCELLED):
        return False
    counted = counted or count_progress(workflow)
    return bool(counted.failed or counted.cancelled) and owned.may_act(
        workflow, user, RETRY_PERMISSION
    )


def message(workflow: Workflow, counted: Progress) -> str:
    """One line for the person waiting: "7 of 10 done, 1 failed"."""
    if workflow.status == Workflow.State.CANCELLED:
        return f"Cancelled: {counted.text}."
    if workflow.status == Workflow.State.SUCCEEDED:
        if counted.total == 1:
            return f"1 {counted.unit}." if counted.noun else "Done."
        return f"All {counted.total:,} {counted.unit}."
    return f"{counted.text}."


def _member(task: Task, now) -> dict:
    return {
        "id": str(task.pk),
        "summary": task.summary,
        "status": str(task.status),
        "status_display": Status(task.status).label,
        "message": status_text(task, now),
    }


def describe_workflow(workflow: Workflow, user, *, now=None) -> dict:
    """Return the status of ``workflow`` as ``user`` may see it (the JSON view's body)."""
    now = now or timezone.now()
    counted = count_progress(workflow)
    tasks = Task.objects.filter(workflow=workflow).order_by("created_at", "pk")
    members = tasks.filter(workflow_role=MEMBER)
    callbacks = tasks.exclude(workflow_role=MEMBER)
    status = str(workflow.status)
    return {
        "id": str(workflow.pk),
        "kind": str(workflow.kind),
        "summary": workflow.summary,
        "status": status,
        "status_display": Workflow.State(status).label,
        "is_finished": status != Workflow.State.RUNNING,
        "cancel_requested": False,  # a workflow is cancelled at once (its running tasks stop)
        "message": message(workflow, counted),
        "progress": {
            "percent": counted.percent,
            "current": counted.done,
            "total": counted.total,
            "message": counted.text,
        },
        "counts": counted.as_dict(),
        "members": [_member(task, now) for task in members[:MEMBERS_SHOWN]],
        "callbacks": {task.workflow_role: _member(task, now) for task in callbacks},
        "eta_seconds": None,
        "eta_text": "",
        "error": None,
        "result": None,
        "result_url": None,
        "can_retry": may_retry(workflow, user, counted),
        "can_cancel": may_cancel(workflow, user),
        "created_at": workflow.created_at.isoformat(),
        "finished_at": workflow.finished_at.isoformat() if workflow.finished_at else None,
        "updated_at": workflow.updated_at.isoformat(),
        "urls": {
            "status": reverse("jobs:workflow-status", args=[workflow.pk]),
            "action": reverse("jobs:workflow-action", args=[workflow.pk]),
        },
    }


@owned.polled
def workflow_status(request, workflow_id):
    """Return the workflow's status as JSON, to its owner or a viewer; 404 to anyone else."""
    return owned.status_response(
        request, workflow_id, find=visible_workflow, describe=describe_workflow, missing=NOT_FOUND
    )


@owned.acted
def workflow_action(request, workflow_id):
    """Cancel a running workflow, or retry a finished one's failed members
    (``action=cancel|retry``): JSON, or a redirect to a safe ``next``, as the task's action."""
    return owned.action_response(
        request, workflow_id, find=visible_workflow, describe=describe_workflow, act=_act,
        noun="workflow", missing=NOT_FOUND,
    )  # fmt: skip


def _act(workflow: Workflow, user, action: str) -> tuple[bool, str]:
    if action == "retry" and may_retry(workflow, user):
        n = api.retry_workflow(workflow)
        ok, text = n > 0, f"{n:,} {'task' if n == 1 else 'tasks'} queued again."
    elif action == "cancel" and may_cancel(workflow, user):
        api.cancel_workflow(workflow, by=user)
        ok, text = True, "Cancelled."
    else:
        ok, text = owned.refused(action, "workflow")
    workflow.refresh_from_db()
    return ok, text
