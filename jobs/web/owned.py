"""What the status views of a task (``jobs.web.views``) and of a workflow
(``jobs.web.workflow_views``) share: who may see a row and act on it, the JSON answers, the
headers a polled page needs, and the owner's retry and cancel.

A row is shown only to its owner and to users holding the task model's ``view_task``
permission; retrying or cancelling someone else's also needs ``retry_task`` or ``cancel_task``
(the permissions the admin's actions use). ``is_staff`` alone grants nothing. Everyone else
(another user, an anonymous visitor) gets the same 404 as for an id that does not exist or is
not a UUID, so the answer never reveals that a row exists. Each module says what its row is
(how to find it, describe it, act on it); the rules and the answers are here, once.
"""

import functools
import uuid
from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.models import AnonymousUser
from django.http import Http404, HttpResponseRedirect, JsonResponse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_GET, require_POST

VIEW_PERMISSION = "jobs.view_task"
# The admin's actions check the same ones (TaskAdmin.has_retry_permission, has_cancel_permission).
RETRY_PERMISSION = "jobs.retry_task"
CANCEL_PERMISSION = "jobs.cancel_task"
ACTIONS = {"retry": RETRY_PERMISSION, "cancel": CANCEL_PERMISSION}


def anonymous_without_auth_middleware(view):
    """Treat visitors as anonymous where no middleware sets ``request.user`` (no sessions)."""

    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        if not hasattr(request, "user"):
            request.user = AnonymousUser()
        return view(request, *args, **kwargs)

    return wrapped


def polled(view):
    """A status view a page polls: GET only, never cached (each poll reads the row afresh)."""
    return never_cache(require_GET(anonymous_without_auth_middleware(view)))


def acted(view):
    """An action view: POST only, CSRF-checked, never cached."""
    return never_cache(csrf_protect(require_POST(anonymous_without_auth_middleware(view))))


def visible(user, object_id, *, rows, owned: Callable, not_found: str):
    """Return the row ``object_id`` of ``rows`` if ``user`` may see it: every row to a holder
    of ``view_task``, else those of ``owned(rows, user)``; raise Http404(``not_found``)
    otherwise, for an anonymous visitor, and for an id that is not a UUID."""
    if not getattr(user, "is_authenticated", False):
        raise Http404(not_found)
    try:
        pk = uuid.UUID(str(object_id))
    except ValueError:
        raise Http404(not_found) from None
    if not user.has_perm(VIEW_PERMISSION):
        rows = owned(rows, user)
    row = rows.filter(pk=pk).first()
    if row is None:
        raise Http404(not_found)
    return row


def may_act(row, user, permission: str) -> bool:
    """Tell whether ``user`` may act on ``row`` (a task, a workflow): its owner, or a user who
    may read others' (``view_task``) and holds ``permission``, as in the admin."""
    if not getattr(user, "is_authenticated", False):
        return False
    return row.owner_id == user.pk or (user.has_perm(VIEW_PERMISSION) and user.has_perm(permission))


def not_found(text: str) -> JsonResponse:
    return JsonResponse({"error": text}, status=404)


def status_response(request, object_id, *, find: Callable, describe: Callable, missing: str):
    """The answer of a status view: ``describe(row, user)`` as JSON, or a 404 saying
    ``missing`` (``find(user, id)`` raised Http404)."""
    try:
        row = find(request.user, object_id)
    except Http404:
        return not_found(missing)
    return JsonResponse(describe(row, request.user))


def action_response(
    request, object_id, *, find: Callable, describe: Callable, act: Callable, noun: str,
    missing: str,
):  # fmt: skip
    """The answer of an action view (``action=retry|cancel``): 404 as the status view, 400 for
    another action, 403 to a viewer who may not act; else ``act(row, user, action)``, which
    returns ``(ok, text)``. JSON (the new status and ``action_message``, 409 when the action
    did not apply), or, for a plain form post with a safe ``next`` URL, a redirect there with
    the text as a message, so the buttons work without JavaScript."""
    try:
        row = find(request.user, object_id)
    except Http404:
        return not_found(missing)
    action = request.POST.get("action", "")
    needed = ACTIONS.get(action)
    if needed is None:
        return JsonResponse({"error": "Unknown action: use retry or cancel."}, status=400)
    if not may_act(row, request.user, needed):
        # A viewer who may read the row but not act on it: it exists, so say no plainly.
        return JsonResponse({"error": f"You may not {action} this {noun}."}, status=403)
    ok, text = act(row, request.user, action)
    next_url = request.POST.get("next", "")
    if next_url and url_has_allowed_host_and_scheme(
        next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        messages.add_message(
            request, messages.SUCCESS if ok else messages.ERROR, text, fail_silently=True
        )
        return HttpResponseRedirect(next_url)
    body = {**describe(row, request.user), "action_message": text}
    return JsonResponse(body, status=200 if ok else 409)


def refused(action: str, noun: str) -> tuple[bool, str]:
    """What ``act`` returns when ``action`` does not apply to the row as it stands."""
    verb = "retried" if action == "retry" else "cancelled"  # not a status: a verb
    return False, f"This {noun} cannot be {verb}."
