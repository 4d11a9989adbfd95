"""Live figures for the admin's pages, as JSON that ``static/jobs/admin/live.js`` polls.

The dashboard, the task list and the task page update in place from these answers instead of
reloading, so a half-typed search or pause form is never wiped and focus stays where it was.
Each endpoint sits behind the page's own door: the admin's login (anonymous is sent to it), then
``jobs.view_task`` (staff without it get 403), never cached. While the database is down it
answers 503 with the ops endpoints' JSON, and the page keeps its last figures.

Every value is plain text or a number, set on the page as text: a task name, an error or a
queue name is whatever code gave it (``<script>``, NUL, RTL marks) and is never parsed as HTML.
The wording and the figures come from the functions that render the page, never a second copy.
"""

import functools
import uuid

from django.contrib.admin.utils import unquote
from django.db import DatabaseError
from django.http import HttpResponseNotAllowed, JsonResponse

from jobs import metrics
from jobs.admin import banner, dashboard, display, panels
from jobs.metrics import waiting as waiting_reasons
from jobs.models import Task
from jobs.web.ops_views import DATABASE_DOWN, READ_PERMISSION

MAX_IDS = 500  # rows one request may ask about: a page shows at most 100


def view(model_admin, build):
    """Wrap ``build(model_admin, request, ...)`` as a live endpoint of ``model_admin``'s pages."""

    def answer(request, *args, **kwargs):
        if request.method not in ("GET", "HEAD"):
            return HttpResponseNotAllowed(["GET", "HEAD"])
        if not model_admin.has_view_permission(request):
            return JsonResponse(
                {"error": f"The {READ_PERMISSION} permission is required."}, status=403
            )
        body = build(model_admin, request, *args, **kwargs)
        return body if isinstance(body, JsonResponse) else JsonResponse(body)

    # The admin's own wrapper: login, is_staff and never_cache, as for every admin page.
    guarded = model_admin.admin_site.admin_view(answer)

    @functools.wraps(guarded)
    def live_view(request, *args, **kwargs):
        try:  # the session, the user, the permissions and the figures all need the database
            return guarded(request, *args, **kwargs)
        except DatabaseError:
            response = JsonResponse(DATABASE_DOWN, status=503)
            response["Cache-Control"] = "no-store"
            return response

    return live_view


# The dashboard --------------------------------------------------------------------------------


def dashboard_figures(model_admin, request) -> dict:
    """Return every figure of the dashboard that changes, worded as the page words it."""
    snap = metrics.snapshot()
    held = waiting_reasons.held_by_keys(now=snap.now)
    flow = snap.throughput
    counts = flow.total()
    return {
        "at": dashboard.at_text(snap.now),
        "banner": banner.banner(now=snap.now),
        "queues": [queue_json(queue) for queue in snap.queues],
        "chart": {
            "label": dashboard.chart_label(counts),
            "bars": dashboard.bar_geometry(counts, flow.minutes),
            "totals": dashboard.throughput_text(flow),
            "span": dashboard.chart_span_text(flow),
        },
        "tables": panels.tables(snap, held),
        "held": panels.held_text(held),
    }


def queue_json(queue: metrics.QueueOverview) -> dict:
    """Return one row of the queue table, the page's own row (``dashboard.queue_row``)."""
    row = dashboard.queue_row(queue)
    return {
        # The retries' dataclass is worded as retries_text; the sparkline is drawn from its points.
        **{key: value for key, value in row.items() if key not in ("sparkline", "retries")},
        "counts": [[count, url] for count, url in row["counts"]],
        "sparkline": dashboard.sparkline_points(queue.throughput),
    }


# The task list and the task page ----------------------------------------------------------------


def task_rows(model_admin, request) -> dict:
    """Return the state of the tasks named by ``?id=`` (the list's rows), as the list shows it.

    Ids that are no task's (pruned since, or never one) are left out; ids that are no UUID are
    ignored, past ``MAX_IDS`` too.
    """
    ids = []
    for text in request.GET.getlist("id")[:MAX_IDS]:
        try:
            ids.append(uuid.UUID(text))
        except ValueError:
            continue
    rows = list(model_admin.get_queryset(request).filter(pk__in=ids).defer(*display.HEAVY_FIELDS))
    reasons = waiting_reasons.why_waiting_many(rows)
    for task in rows:
        task.jobs_waiting = reasons.get(task.pk)  # the changelist's note, as on its page
    return {"tasks": {str(task.pk): _task_json(model_admin, task) for task in rows}}


def one_task(model_admin, request, object_id) -> dict | JsonResponse:
    """Return the state of one task as its page shows it, and which buttons apply now."""
    try:
        pk = uuid.UUID(unquote(object_id))
    except ValueError:
        pk = None
    # The payload, result and error history can be megabytes: a poll never reads them.
    # last_error stays: it is shown, and it says whether a cancelled task expired.
    rows = model_admin.get_queryset(request).defer("payload", "result", "error_details")
    task = rows.filter(pk=pk).first() if pk else None
    if task is None:
        return JsonResponse({"error": "No such task."}, status=404)
    return {
        **_task_json(model_admin, task),
        "last_error": task.last_error or "",
        "actions": model_admin.offered_actions(request, task),
    }


def _task_json(model_admin, task: Task) -> dict:
    progress, progress_title = display.cut_parts(
        display.progress_text(task), display.PROGRESS_SHOWN
    )
    return {
        "status": task.status,
        "label": display.status_label(
            task.status,
            cancel_requested=bool(task.cancel_requested_at),
            note=display.status_note(task),
        ),
        "badge": display.BADGE_CLASSES[task.status],
        "progress": progress,
        "progress_title": progress_title,
        "attempts": model_admin.attempts_display(task),
        "age": model_admin.age(task),
        "run_time": model_admin.run_time(task),
    }
