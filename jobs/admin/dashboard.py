"""The queue dashboard of the admin: every number from ``jobs.metrics``, charts as inline SVG.

This module only formats: it asks ``metrics.snapshot`` for the numbers and turns them into rows
and pictures, so the CLI and the exporter that read the same snapshot can never disagree with
what the page shows.
"""

from datetime import UTC
from urllib.parse import urlencode

from django.contrib import messages
from django.db.models import Count
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import url_has_allowed_host_and_scheme

from jobs import metrics
from jobs.admin import banner, history, panels
from jobs.conf import jobs_settings
from jobs.humanize import moment_text, seconds_text
from jobs.maintenance import pausing
from jobs.metrics import waiting
from jobs.models import Task, TaskPause
from jobs.states import Status
from jobs.tasks.payload import queue_name_problem

# Waiting and running first: what an operator acts on. Blocked (waiting on dependencies or
# its batch, jobs.workflows) is apart from pending and retrying (waiting for a worker).
COUNTED = [
    Status.PENDING,
    Status.BLOCKED,
    Status.RETRYING,
    Status.RUNNING,
    Status.SUCCEEDED,
    Status.FAILED,
    Status.CANCELLED,
]


def render_dashboard(request, context):
    """Render the dashboard page for ``request`` (the admin checked the permission)."""
    snap = metrics.snapshot()
    held = waiting.held_by_keys(now=snap.now)
    context.update(
        snapshot=snap,
        at=at_text(snap.now),
        # The first screen: the health verdict, worst first (jobs.admin.banner).
        banner=banner.banner(now=snap.now),
        statuses=[status.label for status in COUNTED],
        queues=[queue_row(queue) for queue in snap.queues],
        # An empty row for the live updates to copy when a queue appears (live.js).
        queue_template=queue_row(_no_queue(len(snap.throughput.minutes))),
        chart=bar_chart(snap.throughput.total(), snap.throughput.minutes),
        throughput_text=throughput_text(snap.throughput),
        chart_span=chart_span_text(snap.throughput),
        # Due tasks a worker could take but for their concurrency key: apart from the queues'
        # waiting counts, which are tasks waiting for a worker (or for their time).
        held=held,
        held_text=panels.held_text(held),
        tables=panels.tables(snap, held),
        paused_types=paused_type_rows(snap.now),
        # Due tasks held back until their rate key's window ends.
        held_rates=waiting.held_by_rates(now=snap.now),
        window=seconds_text(snap.window.total_seconds()),
        live_url=reverse("admin:jobs_task_live_dashboard"),
        live_interval=live_interval_ms(),
        live_every=seconds_text(live_interval_ms() / 1000),
        # Keys name thresholds, not statuses: "running" is not a status here.
        thresholds=dict(
            warning=seconds_text(jobs_settings.WAITING_WARNING_SECONDS),
            critical=seconds_text(jobs_settings.WAITING_CRITICAL_SECONDS),
            running=seconds_text(jobs_settings.RUNNING_WARNING_SECONDS),
        ),
    )
    context.update(history.dashboard_context(request))  # its own section: history_section.html
    return TemplateResponse(request, "admin/jobs/dashboard.html", context)


def live_interval_ms() -> int:
    """Return how often the dashboard and the task pages poll (JOBS_DASHBOARD_REFRESH_SECONDS)."""
    # Below 100 ms a poll only loads the server: a smaller setting (tests) polls no faster.
    return max(100, round(jobs_settings.DASHBOARD_REFRESH_SECONDS * 1000))


def at_text(now) -> str:
    """Say when the figures were read, in UTC as the page's header does."""
    return f"{now.astimezone(UTC):%Y-%m-%d %H:%M:%S}"


def throughput_text(flow: metrics.Throughput) -> str:
    """Sum up the throughput of every queue, for the chart's heading."""
    return (
        f"all queues: {flow.in_last_minute()} in the last minute, "
        f"{flow.per_minute():.1f} a minute on average over the hour"
    )


def chart_span_text(flow: metrics.Throughput) -> str:
    """Say which minutes the chart spans, and its tallest bar."""
    if not flow.minutes:
        return ""
    first, last = flow.minutes[0].astimezone(UTC), flow.minutes[-1].astimezone(UTC)
    return (
        f"{first:%H:%M} to {last:%H:%M} UTC, one bar a minute, the last one the current minute "
        f"so far; the tallest is {max(flow.total(), default=0)}."
    )


def pause_or_resume(request) -> tuple[str, int]:
    """Pause or resume the queue named in the POST; return the message and its level."""
    queue = request.POST.get("queue", "").strip()
    if not queue:
        return "Name a queue to pause or resume.", messages.ERROR
    problem = queue_name_problem(queue)
    if problem:
        # No task can be enqueued in such a queue (the rule of enqueue and runworker --queues);
        # PostgreSQL would refuse a NUL in the name.
        return f"No queue has such a name: the name {problem}.", messages.ERROR
    if request.POST.get("action") == "resume":
        if pausing.resume(queue, user=request.user):
            return f"Queue {queue} resumed: workers claim from it again.", messages.SUCCESS
        return f"Queue {queue} was not paused.", messages.WARNING
    if pausing.pause(queue, user=request.user):
        return (
            f"Queue {queue} paused: workers stop claiming from it at their next look; "
            "running tasks finish.",
            messages.SUCCESS,
        )
    return f"Queue {queue} was already paused.", messages.WARNING


def _no_queue(minutes: int) -> metrics.QueueOverview:
    return metrics.QueueOverview(
        queue="",
        counts=dict.fromkeys(metrics.STATUSES, 0),
        oldest_waiting=None,
        oldest_waiting_level="ok",
        throughput=[0] * minutes,
        throughput_per_minute=0.0,
        run_time=metrics.Percentiles(),
        wait_time=metrics.Percentiles(),
        outcomes=metrics.Outcomes(),
        retries=metrics.Retries(),
        paused=False,
        finished_last_minute=0,
    )


def task_type_problem(name: str) -> str | None:
    """What makes ``name`` no task type's name (the column's length, printable text), or None."""
    limit = TaskPause._meta.get_field("name").max_length or 0
    if len(name) > limit:
        return f"it is {len(name):,} characters long, over the limit of {limit}"
    if not name.isprintable():
        return "it holds a character that is not printable (a tab, a newline, a NUL...)"
    return None


def pause_or_resume_task_type(request) -> tuple[str, int]:
    """Pause or resume the task type named in the POST; return the message and its level."""
    name = request.POST.get("name", "").strip()
    if not name:
        return "Name a task type to pause or resume.", messages.ERROR
    problem = task_type_problem(name)
    if problem:
        return f"No task type has such a name: {problem}.", messages.ERROR
    if request.POST.get("action") == "resume":
        if pausing.resume_task_type(name, user=request.user):
            return f"Task type {name} resumed: workers claim its tasks again.", messages.SUCCESS
        return f"Task type {name} was not paused.", messages.WARNING
    if not pausing.task_type_known(name):
        return (
            f"No task type named {name}: no task of that name is registered or stored "
            "(a task's name is its module path and function, as the task list shows it).",
            messages.ERROR,
        )
    if pausing.pause_task_type(name, user=request.user):
        return (
            f"Task type {name} paused: workers stop claiming its tasks, in every queue, at "
            "their next look; its waiting tasks wait, running ones finish.",
            messages.SUCCESS,
        )
    return f"Task type {name} was already paused.", messages.WARNING


def way_back(request) -> str:
    """Where a pause or resume of a task type returns: the page it was asked from (a task's),
    if it is on this site, else the dashboard."""
    back = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(back, {request.get_host()}, require_https=False):
        return back
    return reverse("admin:jobs_task_dashboard")


def _paused_type_row(pause: TaskPause, waiting_counts: dict[str, int]) -> dict:
    return {
        "name": pause.name,
        "since": moment_text(pause.paused_at),
        "by": getattr(pause.paused_by, "username", "") or "—",
        "waiting": waiting_counts.get(pause.name, 0),
        "url": _changelist(name=pause.name),
    }


def paused_type_rows(now) -> list[dict]:
    """The paused task types, each with its waiting tasks (due or not), for the dashboard."""
    pauses = list(TaskPause.objects.select_related("paused_by"))
    if not pauses:
        return []
    names = [pause.name for pause in pauses]
    counts = dict(
        Task.objects.claimable()
        .filter(name__in=names)
        .order_by()
        .values_list("name")
        .annotate(n=Count("*"))
    )
    return [_paused_type_row(pause, counts) for pause in pauses]


def _changelist(**filters) -> str:
    return f"{reverse('admin:jobs_task_changelist')}?{urlencode(filters)}"


def queue_row(queue: metrics.QueueOverview) -> dict:
    """Return one row of the queue table as text (the page and its live updates)."""
    rate = queue.outcomes.failure_rate
    ran = queue.outcomes.succeeded + queue.outcomes.failed
    return {
        "name": queue.queue,
        "paused": queue.paused,
        "counts": [
            (queue.counts[status], _changelist(queue=queue.queue, status__exact=status))
            for status in COUNTED
        ],
        "oldest": seconds_text(queue.oldest_waiting) if queue.oldest_waiting is not None else "—",
        "level": queue.oldest_waiting_level,
        "per_minute": f"{queue.throughput_per_minute:.1f}",
        "last_minute": queue.finished_last_minute,
        "sparkline": sparkline(queue.throughput),
        "run_p50": seconds_text(queue.run_time.p50),
        "run_p95": seconds_text(queue.run_time.p95),
        "wait_p50": seconds_text(queue.wait_time.p50),
        "wait_p95": seconds_text(queue.wait_time.p95),
        "failure_rate": "—" if rate is None else f"{rate:.1%}",
        "failure_detail": f"{queue.outcomes.failed} of {ran}",
        "retries": queue.retries,
        "retries_text": f"{queue.retries.waiting} waiting, {queue.retries.retried} retried "
        f"(+{queue.retries.extra_attempts})",
        "per_minute_title": f"{queue.throughput_per_minute:.1f} a minute on average over the hour",
        "failure_title": f"{queue.outcomes.failed} of {ran} tasks that ran to an end",
        "run": f"{seconds_text(queue.run_time.p50)} / {seconds_text(queue.run_time.p95)}",
        "wait": f"{seconds_text(queue.wait_time.p50)} / {seconds_text(queue.wait_time.p95)}",
    }


def bar_chart(counts: list[int], minutes, *, width: int = 600, height: int = 120):
    """Draw tasks finished per minute as an SVG bar chart, the oldest minute on the left."""
    if not counts:
        return ""
    bars = format_html_join(
        "",
        '<rect x="{}" y="{}" width="{}" height="{}"><title>{}</title></rect>',
        ((bar["x"], bar["y"], bar["width"], bar["height"], bar["title"]) for bar in
         bar_geometry(counts, minutes, width=width, height=height)),
    )  # fmt: skip
    return format_html(
        '<svg class="jobs-chart" viewBox="0 0 {} {}" width="{}" height="{}" role="img" '
        'aria-label="{}">{}</svg>',
        width,
        height,
        width,
        height,
        chart_label(counts),
        bars,
    )


def chart_label(counts: list[int]) -> str:
    """Say what the bar chart shows, for a screen reader."""
    top = max(max(counts, default=0), 1)
    return f"Tasks finished per minute, last {len(counts)} minutes, at most {top} a minute"


def bar_geometry(counts: list[int], minutes, *, width: int = 600, height: int = 120) -> list:
    """Return each bar of the chart as its SVG attributes (text) and its title.

    The page draws them and the live updates move them (``jobs.admin.live``): one geometry.
    """
    top = max(max(counts, default=0), 1)
    slot = width / max(len(counts), 1)
    return [
        {
            "x": f"{i * slot + 0.5:.1f}",
            "y": f"{height - n / top * height:.1f}",
            "width": f"{max(slot - 1, 0.5):.1f}",
            "height": f"{n / top * height:.1f}",
            "title": f"{moment_text(minute)}: {n}",
        }
        for i, (n, minute) in enumerate(zip(counts, minutes, strict=True))
    ]


def sparkline(counts: list[int], *, width: int = 120, height: int = 24):
    """Draw a small SVG line of per-minute counts, for a table cell."""
    if not counts:
        return ""
    return format_html(
        '<svg class="jobs-sparkline" viewBox="0 0 {} {}" width="{}" height="{}" aria-hidden="true">'
        '<polyline points="{}"/></svg>',
        width,
        height,
        width,
        height,
        sparkline_points(counts, width=width, height=height),
    )


def sparkline_points(counts: list[int], *, width: int = 120, height: int = 24) -> str:
    """Return the sparkline's polyline points; the page and the live updates share them."""
    top = max(max(counts, default=0), 1)
    step = width / max(len(counts) - 1, 1)
    return " ".join(
        f"{i * step:.1f},{height - 1 - n / top * (height - 2):.1f}" for i, n in enumerate(counts)
    )
