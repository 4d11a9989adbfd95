"""How the admin shows a task's fields: badges, pretty JSON, the history of its errors."""

import json

from django.utils.html import format_html, format_html_join

from jobs.humanize import moment_text
from jobs.metrics import waiting as waiting_reasons
from jobs.states import Status
from jobs.transitions import is_expired

# Large JSON columns the changelist never shows: not read for a page of 100 rows (nor by its
# live updates).
HEAVY_FIELDS = ("payload", "result", "error_details", "last_error")
PROGRESS_SHOWN = 60  # characters of the progress text in the task list and on the task page

# Colours of the status badges; the stylesheet (static/jobs/admin/jobs.css) holds the palette.
BADGE_CLASSES: dict[str, str] = {
    Status.PENDING: "waiting",
    Status.RETRYING: "waiting",
    Status.BLOCKED: "waiting",  # on its dependencies or its batch (jobs.workflows)
    Status.RUNNING: "running",  # not a status: a CSS class
    Status.SUCCEEDED: "ok",
    Status.FAILED: "bad",
    Status.CANCELLED: "muted",
}


def status_label(status: str, *, cancel_requested: bool = False, note: str = "") -> str:
    """Return the status in words; a running task asked to stop says so, and ``note`` is said
    after the status ("waiting until …", "expired")."""
    label = Status(status).label
    if cancel_requested and status == Status.RUNNING:
        return f"{label} (stop requested)"
    return f"{label} ({note})" if note else label


def status_note(task) -> str:
    """Return what the badge says after the status: why it waits, or "expired"."""
    # The status view's words: "waiting until <time>" for a snoozed or delayed task,
    # "expired" for one cancelled because it had not started by its deadline.
    # The changelist does not read last_error (HEAVY_FIELDS): only the task's page says
    # "expired", rather than one query per row.
    waiting = getattr(task, "jobs_waiting", None)  # set for the changelist's page
    if waiting is not None:
        return waiting_reasons.compact_text(waiting)
    if until := task.waiting_until():
        return f"waiting until {moment_text(until)}"
    if "last_error" not in task.get_deferred_fields() and is_expired(task):
        return "expired"
    return ""


def status_badge(status: str, *, cancel_requested: bool = False, note: str = ""):
    """Return ``status_label`` as a coloured badge."""
    label = status_label(status, cancel_requested=cancel_requested, note=note)
    return format_html(
        '<span class="jobs-badge jobs-badge--{}">{}</span>', BADGE_CLASSES[status], label
    )


# The one mark of an empty field on every jobs admin page, as moment_text() writes it; Django's
# default ("-") would show both on one page.
EMPTY = "—"


class FullWidthChangeList:
    """A ModelAdmin mixin: its list uses the page's whole width, without Django's navigation
    sidebar (the breadcrumbs lead back). At 1,280 px the sidebar and the filters left the task
    list 630 px for ten columns."""

    def changelist_view(self, request, extra_context=None):
        extra_context = {"is_nav_sidebar_enabled": False, **(extra_context or {})}
        return super().changelist_view(request, extra_context)  # type: ignore[misc]


def cut(text: str, length: int):
    """Return ``text`` cut to ``length`` characters with "…", the whole of it on hover."""
    shown, whole = cut_parts(text, length)
    if not whole:
        return text
    return format_html('<span title="{}">{}</span>', whole, shown)


def cut_parts(text: str, length: int) -> tuple[str, str]:
    """Return ``text`` cut to ``length`` characters with "…", and the whole ("" if not cut)."""
    if len(text) <= length:
        return text, ""
    return f"{text[:length]}…", text


def pretty_json(value):
    """Return ``value`` as indented JSON in a <pre>, escaped."""
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    return format_html('<pre class="jobs-json">{}</pre>', text)


def progress_text(task) -> str:
    """Return "45 %" or "450 / 1000" or "—", plus the task's own progress message."""
    percent = task.progress_percent
    if task.progress_total:
        text = f"{percent} % ({task.progress_current} / {task.progress_total})"
    elif percent is not None:
        text = f"{percent} %"
    elif task.progress_current:
        text = str(task.progress_current)
    else:
        text = "—"
    return f"{text} — {task.progress_message}" if task.progress_message else text


def error_history(entries):
    """Return one block per failed attempt: what the user saw, the exception, the traceback."""
    if not entries:
        return "No failed attempt."
    rows = format_html_join(
        "",
        '<div class="jobs-error"><p><strong>Attempt {}</strong> at {} on {}{}</p>'
        "<p>User message: {}</p><p><code>{}</code>: {}</p>{}</div>",
        (
            (
                entry.get("attempt", "?"),
                moment_text(entry["at"]) if entry.get("at") else "?",
                entry.get("worker_id") or "?",
                " (transient, retried)" if entry.get("transient") else "",
                entry.get("user_message") or "—",
                entry.get("exception", ""),
                entry.get("message", ""),
                format_html('<pre class="jobs-traceback">{}</pre>', entry["traceback"])
                if entry.get("traceback")
                else "",
            )
            for entry in reversed(entries)  # the latest attempt first
        ),
    )
    return format_html('<div class="jobs-errors">{}</div>', rows)


TIMESTAMPS = [
    ("created_at", "enqueued"),
    ("run_after", "due"),
    ("started_at", "started (last attempt)"),
    ("finished_at", "finished"),
    ("cancel_requested_at", "cancellation requested"),
    ("lease_expires_at", "lease expires"),
    ("updated_at", "last change"),
]


def timings(task, *, wait: str, run: str):
    """Return the task's timestamps to the millisecond, with its wait and run times."""
    rows = [
        (label, moment_text(value, milliseconds=True))
        for name, label in TIMESTAMPS
        if (value := getattr(task, name)) is not None
    ]
    rows += [("wait (due to start)", wait), ("run time", run)]
    body = format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", rows)
    return format_html('<table class="jobs-timings">{}</table>', body)
