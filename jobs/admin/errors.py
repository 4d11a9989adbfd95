"""The admin's errors page: each distinct error of a window once, from ``jobs.metrics``.

Distinct means one task name, one exception class and one raising frame (its ``origin``); the
numbers come from one grouped query (``jobs.metrics.error_groups``), this module only formats.
"""

from datetime import timedelta
from urllib.parse import urlencode

from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from jobs import metrics
from jobs.error_records import bounded, cut
from jobs.humanize import moment_text

# The windows offered, the first the default; keys are what the page's links carry.
WINDOWS = {
    "day": ("last day", timedelta(days=1)),
    "hour": ("last hour", timedelta(hours=1)),
    "week": ("last week", timedelta(weeks=1)),
}
ORDER = ["hour", "day", "week"]  # as the page lists them
LIMIT = 100  # groups shown: the most attempts first
# What a row shows of its latest attempt: stored texts go up to 16 KB (message) and 64 KB
# (traceback) each; the traceback keeps its head and its tail, where the error is.
MESSAGE_SHOWN = 300
TRACEBACK_SHOWN = 8_000


def render_errors(request, context):
    """Render the errors page for ``request`` (the admin checked the permission)."""
    key = request.GET.get("window", "")
    if key not in WINDOWS:
        key = next(iter(WINDOWS))
    label, window = WINDOWS[key]
    groups = metrics.error_groups(window=window, limit=LIMIT)
    context.update(
        window=key,
        window_label=label,
        windows=[(name, WINDOWS[name][0]) for name in ORDER],
        rows=[error_row(group) for group in groups],
        limit=LIMIT,
        at_limit=len(groups) >= LIMIT,
        attempts=sum(group.attempts for group in groups),
        time_zone=timezone.get_current_timezone_name(),
    )
    return TemplateResponse(request, "admin/jobs/errors.html", context)


def tasks_url(name: str, exception: str) -> str:
    """The task list filtered to the tasks of ``name`` one of whose attempts raised
    ``exception`` (``jobs.admin.filters.ErrorFilter``); by name alone for an empty class."""
    filters = {"name": name, **({"error": exception} if exception else {})}
    return f"{reverse('admin:jobs_task_changelist')}?{urlencode(filters)}"


def error_row(group: metrics.ErrorGroup) -> dict:
    """Format one group for a table of errors (this page's, a task type's page)."""
    return {
        "group": group,
        "first": moment_text(group.first_at),
        "last": moment_text(group.last_at),
        "message": cut(group.last_message, MESSAGE_SHOWN),
        "message_cut": len(group.last_message) > MESSAGE_SHOWN,
        "traceback": bounded(group.last_traceback, TRACEBACK_SHOWN),
        "tasks_url": tasks_url(group.name, group.exception),
        "task_url": reverse("admin:jobs_task_change", args=[group.last_task_id]),
    }
