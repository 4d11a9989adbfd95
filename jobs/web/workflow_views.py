"""A workflow's status, as JSON for the owner's page, and the owner's retry and cancel of it.

The rules of the task status view (``jobs.web.views``), applied to a chain or a batch: it is
shown only to its owner and to users holding ``view_task`` (its members are tasks); cancelling
another's workflow also needs ``cancel_task``, retrying its failed members ``retry_task``;
``is_staff`` alone grants nothing. Anyone else gets the same 404 as for an id that does not
exist or is not a UUID. The body has the task status's shape (``status``, ``message``,
``progress``, ``is_finished``, ``can_retry``, ``can_cancel``, ``urls``), so the same progress
bar and script (``jobs/progress.html``, ``progress.js``) show it; its figures are
``jobs.workflows.progress``'s.
"""

import uuid

from django.contrib import messages
from django.http import Http404, HttpResponseRedirect, JsonResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_GET, require_POST

from jobs.models import Task, Workflow
from jobs.states import Status
from jobs.web.views import (
    CANCEL_PERMISSION,
    RETRY_PERMISSION,
    VIEW_PERMISSION,
    anonymous_without_auth_middleware,
    status_text,
)
from jobs.workflows import api
from jobs.workflows.progress import MEMBER, Progress
from jobs.workflows.progress import progress as count_progress

MEMBERS_SHOWN = 200  # members listed in the JSON; the counts cover all of them
NOT_FOUND = "No such workflow."


def visible_workflow(user, workflow_id) -> Workflow:
    """Return the workflow ``workflow_id`` if ``user`` may see it; raise Http404 otherwise."""
    if not getattr(user, "is_authenticated", False):
        raise Http404(NOT_FOUND)
    try:
        pk = uuid.UUID(str(workflow_id))
    except ValueError:
        raise Http404(NOT_FOUND) from None
    found = Workflow.objects.all()
    if not user.has_perm(VIEW_PERMISSION):
        found = found.filter(owner=user)
    workflow = found.filter(pk=pk).first()
    if workflow is None:
        raise Http404(NOT_FOUND)
    return workflow


def _may_act(workflow: Workflow, user, permission: str) -> bool:
    if not getattr(user, "is_authenticated", False):
        return False
    return workflow.owner_id == user.pk or (
        user.has_perm(VIEW_PERMISSION) and user.has_perm(permission)
    )


def may_cancel(workflow: Workflow, user) -> bool:
    """Tell whether ``user`` may cancel ``workflow`` (still running)."""
    running = workflow.status == Workflow.State.RUNNING
    return running and _may_act(workflow, user, CANCEL_PERMISSION)


def may_retry(workflow: Workflow, user, counted: Progress | None = None) -> bool:
    """Tell whether ``user`` may run the failed and cancelled members of ``workflow`` again."""
    if workflow.status not in (Workflow.State.FAILED, Workflow.State.CANCELLED):
        return False
    counted = counted or count_progress(workflow)
    return bool(counted.failed or counted.cancelled) and _may_act(workflow, user, RETRY_PERMISSION)


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


def _not_found():
    return JsonResponse({"error": NOT_FOUND}, status=404)


@never_cache
@require_GET
@anonymous_without_auth_middleware
def workflow_status(request, workflow_id):
    """Return the workflow's status as JSON, to its owner or a viewer; 404 to anyone else."""
    try:
        workflow = visible_workflow(request.user, workflow_id)
    except Http404:
        return _not_found()
    return JsonResponse(describe_workflow(workflow, request.user))


@never_cache
@csrf_protect
@require_POST
@anonymous_without_auth_middleware
def workflow_action(request, workflow_id):
    """Cancel a running workflow, or retry a finished one's failed members
    (``action=cancel|retry``): JSON, or a redirect to a safe ``next``, as the task's action."""
    try:
        workflow = visible_workflow(request.user, workflow_id)
    except Http404:
        return _not_found()
    action = request.POST.get("action", "")
    needed = {"retry": RETRY_PERMISSION, "cancel": CANCEL_PERMISSION}.get(action)
    if needed is None:
        return JsonResponse({"error": "Unknown action: use retry or cancel."}, status=400)
    if not _may_act(workflow, request.user, needed):
        return JsonResponse({"error": f"You may not {action} this workflow."}, status=403)
    if action == "retry" and may_retry(workflow, request.user):
        n = api.retry_workflow(workflow)
        ok, text = n > 0, f"{n:,} {'task' if n == 1 else 'tasks'} queued again."
    elif action == "cancel" and may_cancel(workflow, request.user):
        api.cancel_workflow(workflow, by=request.user)
        ok, text = True, "Cancelled."
    else:
        verb = "retried" if action == "retry" else "cancelled"  # not a status: a verb
        ok, text = False, f"This workflow cannot be {verb}."
    workflow.refresh_from_db()
    next_url = request.POST.get("next", "")
    if next_url and url_has_allowed_host_and_scheme(
        next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        messages.add_message(
            request, messages.SUCCESS if ok else messages.ERROR, text, fail_silently=True
        )
        return HttpResponseRedirect(next_url)
    body = {**describe_workflow(workflow, request.user), "action_message": text}
    return JsonResponse(body, status=200 if ok else 409)
