"""The task status, as JSON for the owner's page, and the owner's retry and cancel actions.

Who may see and act, the answers and the headers are ``jobs.web.owned``'s, shared with a
workflow's status: a task is shown only to its owner and to users holding ``view_task``; acting
on another's also needs ``retry_task`` or ``cancel_task``; anyone else gets a 404. Nothing here
shows developer detail: the user's message is ``last_error``; tracebacks stay in
``error_details``.
"""

import re

from django.urls import reverse
from django.utils import timezone

from jobs import transitions
from jobs.humanize import moment_text, remaining_text, seconds_text, waiting_text
from jobs.metrics import waiting as waiting_reasons
from jobs.models import Task
from jobs.states import CANCELLABLE, TERMINAL, WITH_ERROR, Status
from jobs.web import owned
from jobs.web.owned import (  # noqa: F401 - the names projects import from here
    CANCEL_PERMISSION,
    RETRY_PERMISSION,
    VIEW_PERMISSION,
    anonymous_without_auth_middleware,
)

NOT_FOUND = "No such task."


# A scheme as a browser reads one, once it has dropped the spaces around the URL.
URL_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*):")
LINK_SCHEMES = frozenset({"http", "https"})
# Browsers drop tabs and newlines anywhere in a URL ("java\tscript:" is "javascript:"), and other
# control characters have no business in a link: a URL holding any of them is refused outright.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")


def safe_link(url) -> str | None:
    """Return ``url`` if it is fit for an ``href``: http(s) or relative; ``None`` otherwise.

    A result comes from task code that may echo user input: ``javascript:``, ``data:`` or
    ``vbscript:`` in any case or spacing would run in the owner's page. progress.js applies the
    same rule to the polled JSON.
    """
    if not isinstance(url, str) or CONTROL_CHARACTERS.search(url):
        return None
    url = url.strip()
    scheme = URL_SCHEME.match(url)
    if not url or (scheme and scheme.group(1).lower() not in LINK_SCHEMES):
        return None
    return url


CANCELLED_NOT_RETRIED = (
    "A cancelled task cannot be retried here: enqueue it again, or ask an operator to retry it "
    "in the admin."
)


def visible_task(user, task_id) -> Task:
    """Return the task ``task_id`` if ``user`` may see it; raise Http404 otherwise."""
    return owned.visible(
        user, task_id, rows=Task.objects.all(), owned=lambda rows, u: rows.owned_by(u),
        not_found=NOT_FOUND,
    )  # fmt: skip


def _failed_for_good(task: Task) -> bool:
    """Tell whether the last failure was a PermanentError: input that a retry cannot fix."""
    return bool(task.error_details) and bool(task.error_details[-1].get("permanent"))


def may_retry(task: Task, user) -> bool:
    """Tell whether ``user`` may put the failed ``task`` back in the queue."""
    return (
        task.status == Status.FAILED
        and owned.may_act(task, user, RETRY_PERMISSION)
        and not _failed_for_good(task)
    )


def may_cancel(task: Task, user) -> bool:
    """Tell whether ``user`` may cancel ``task`` (waiting or running, not already asked)."""
    return (
        task.status in CANCELLABLE
        and task.cancel_requested_at is None
        and owned.may_act(task, user, CANCEL_PERMISSION)
    )


def estimate_remaining(task: Task, now) -> int | None:
    """Return the seconds left at the rate progress has been made this attempt, if known."""
    total, done = task.progress_total, task.progress_current
    if task.status != Status.RUNNING or not task.started_at or not total or not 0 < done < total:
        return None
    elapsed = max(0.0, (now - task.started_at).total_seconds())
    return round(elapsed / done * (total - done))


def status_text(task: Task, now=None, waiting: waiting_reasons.Waiting | None = None) -> str:
    """Return one line that tells the owner where the task stands; with ``waiting`` (from
    ``jobs.metrics.waiting``), a waiting task says why, in words that name no key."""
    if task.status == Status.RUNNING and task.cancel_requested_at:
        return "Cancelling…"
    if task.status == Status.RETRYING:
        return retrying_text(task, now or timezone.now())
    if task.status == Status.FAILED and task.last_error:
        return task.last_error
    if transitions.is_expired(task):
        return transitions.EXPIRED_MESSAGE
    if task.status == Status.CANCELLED:
        canceller = cancelled_by(task)
        return f"Cancelled by {canceller}." if canceller else "Cancelled."
    if task.status == Status.SUCCEEDED:
        return task.progress_message or "Done."
    if task.status == Status.PENDING and waiting is not None:
        expiry = waiting_reasons.owner_expiry(waiting)
        return " ".join(filter(None, [waiting_reasons.owner_message(waiting), expiry]))
    if task.status == Status.PENDING:
        until = task.waiting_until(now)
        return f"{waiting_text(until)}." if until else "Waiting to start…"
    return task.progress_message or "Working…"


def retrying_text(task: Task, now) -> str:
    """Say which attempt failed, why, and when the next one is: "Attempt 2 of 5 failed: The
    mail server did not answer. Next try in 30 s (2026-12-01 14:05:30 UTC)." """
    error = (task.last_error or "it did not finish").rstrip(". ")
    wait = (task.run_after - now).total_seconds()
    when = f"in {seconds_text(round(wait))} ({moment_text(task.run_after)})" if wait >= 1 else "now"
    return f"Attempt {task.attempts} of {task.max_attempts} failed: {error}. Next try {when}."


def cancelled_by(task: Task) -> str | None:
    """The username of whoever cancelled ``task`` when it was not its owner (None otherwise:
    the owner, the system, or a user since deleted)."""
    canceller = task.cancelled_by if task.cancelled_by_id != task.owner_id else None
    return canceller.get_username() if canceller is not None else None


def _cancel_reason(task: Task):
    if task.status != Status.CANCELLED:
        return None
    return "expired" if transitions.is_expired(task) else "cancelled"  # not a status: a reason


def _iso(value):
    return value.isoformat() if value else None


def waiting_json(waiting: waiting_reasons.Waiting | None, user) -> dict | None:
    """Why a waiting task waits, as ``user`` may see it: the concurrency and rate keys and their
    counts only to a user with the view permission (a key may hold another customer's id)."""
    if waiting is None:
        return None
    body = {
        "reasons": waiting.reasons,
        "until": _iso(waiting.due_at),
        "rate_limited_until": _iso(waiting.rate_until),
        "expires_at": _iso(waiting.expires_at),
        "message": waiting_reasons.owner_message(waiting),
        "expiry_message": waiting_reasons.owner_expiry(waiting) or None,
    }
    if waiting.held and user.has_perm(VIEW_PERMISSION):
        body["concurrency"] = {
            "key": waiting.key,
            "running": waiting.running,  # not a status: a count
            "limit": waiting.limit,
        }
    if waiting.rate_limited and waiting.rate is not None and user.has_perm(VIEW_PERMISSION):
        body["rate"] = {
            "key": waiting.rate_key,
            "started": waiting.rate_started,
            "limit": waiting.rate.count,
            "period_seconds": waiting.rate.period,
        }
    return body


def describe(task: Task, user, *, now=None) -> dict:
    """Return the status of ``task`` as ``user`` may see it (the JSON view's body)."""
    now = now or timezone.now()
    waiting = waiting_reasons.why_waiting(task, now=now)
    eta = estimate_remaining(task, now)
    show_error = task.status in WITH_ERROR
    show_result = task.status == Status.SUCCEEDED and task.result_public
    result = task.result if show_result else None
    return {
        "id": str(task.pk),
        "name": task.name,
        "summary": task.summary,
        "status": str(task.status),
        "status_display": Status(task.status).label,
        "is_finished": task.status in TERMINAL,
        "cancel_requested": task.cancel_requested_at is not None,
        "message": status_text(task, now, waiting),
        # Why it waits (pending or retrying; None otherwise): jobs.metrics.waiting's reasons.
        "waiting": waiting_json(waiting, user),
        "progress": {
            "percent": task.progress_percent,
            "current": task.progress_current,
            "total": task.progress_total,
            "message": task.progress_message,
        },
        "attempts": task.attempts,
        "max_attempts": task.max_attempts,
        "eta_seconds": eta,
        "eta_text": remaining_text(eta),  # progress.js shows this, never its own wording
        "error": (task.last_error or None) if show_error else None,
        # Why a cancelled task ended: "expired" (not started by its deadline) or "cancelled".
        "cancel_reason": _cancel_reason(task),
        # Who cancelled it when it was not its owner (an operator): their username, else None.
        "cancelled_by": cancelled_by(task) if task.status == Status.CANCELLED else None,
        "can_retry": may_retry(task, user),
        "can_cancel": may_cancel(task, user),
        "result": result,
        # The link the page may render: result["url"] if it passes safe_link, else None.
        "result_url": safe_link(result.get("url")) if isinstance(result, dict) else None,
        "created_at": _iso(task.created_at),
        "started_at": _iso(task.started_at),
        "finished_at": _iso(task.finished_at),
        "waiting_until": _iso(task.waiting_until(now)),
        "expires_at": _iso(task.expires_at),
        "updated_at": _iso(task.updated_at),
        "urls": {
            "status": reverse("jobs:task-status", args=[task.pk]),
            "action": reverse("jobs:task-action", args=[task.pk]),
        },
    }


@owned.polled
def task_status(request, task_id):
    """Return the task's status as JSON, to its owner or a viewer; 404 to anyone else."""
    return owned.status_response(
        request, task_id, find=visible_task, describe=describe, missing=NOT_FOUND
    )


@owned.acted
def task_action(request, task_id):
    """Retry a failed task, or cancel a waiting or running one (``action=retry|cancel``).

    Answers JSON (the new status, 409 when the action does not apply); a plain form post with a
    safe ``next`` URL is redirected there instead, so the buttons work without JavaScript.
    """
    return owned.action_response(
        request, task_id, find=visible_task, describe=describe, act=_act, noun="task",
        missing=NOT_FOUND,
    )  # fmt: skip


def _act(task: Task, user, action: str) -> tuple[bool, str]:
    if action == "retry" and may_retry(task, user):
        transitions.requeue(task)
        return task.status == Status.PENDING, "Queued again."
    if action == "cancel" and may_cancel(task, user):
        outcome = transitions.cancel(task, by=user)
        ok = outcome is not transitions.CancelOutcome.REFUSED
        return ok, "Cancelled." if outcome is transitions.CancelOutcome.CANCELLED else "Cancelling…"
    if action == "retry" and task.status == Status.CANCELLED:
        # The status view retries failures only; the task's own "Cancelled." would read as if
        # the retry had cancelled it. Running it again is the admin's call, or a new enqueue.
        return False, CANCELLED_NOT_RETRIED
    return owned.refused(action, "task")
