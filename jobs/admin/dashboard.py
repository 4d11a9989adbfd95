"""The queue dashboard of the admin: every number from ``jobs.metrics``, charts as inline SVG.

This module only formats: it asks ``metrics.snapshot`` for the numbers and turns them into rows
and pictures, so the CLI and the exporter that read the same snapshot can never disagree with
what the page shows.
"""

from urllib.parse import urlencode

from django.contrib import messages
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from jobs import metrics
from jobs.conf import jobs_settings
from jobs.humanize import moment_text, seconds_text
from jobs.maintenance import pausing
from jobs.metrics import waiting
from jobs.states import Status
from jobs.tasks.payload import queue_name_problem

# Waiting and running first: what an operator acts on.
COUNTED = [
    Status.PENDING,
    Status.RETRYING,
    Status.RUNNING,
    Status.SUCCEEDED,
    Status.FAILED,
    Status.CANCELLED,
]


def render_dashboard(request, context):
    """Render the dashboard page for ``request`` (the admin checked the permission)."""
    snap = metrics.snapshot()
    context.update(
        snapshot=snap,
        statuses=[status.label for status in COUNTED],
        queues=[_queue_row(queue) for queue in snap.queues],
        chart=bar_chart(snap.throughput.total(), snap.throughput.minutes),
        total_per_minute=f"{snap.throughput.per_minute():.1f}",
        total_last_minute=snap.throughput.in_last_minute(),
        chart_top=max(snap.throughput.total(), default=0),
        workers=[_worker_row(worker) for worker in snap.workers],
        failures=[_failure_row(group) for group in snap.failures],
        waiting_too_long=[_late_row(task) for task in snap.waiting_too_long],
        # Due tasks a worker could take but for their concurrency key: apart from the queues'
        # waiting counts, which are tasks waiting for a worker (or for their time).
        held=waiting.held_by_keys(now=snap.now),
        # Due tasks held back until their rate key's window ends.
        held_rates=waiting.held_by_rates(now=snap.now),
        running_too_long=[_late_row(task) for task in snap.running_too_long],
        window=seconds_text(snap.window.total_seconds()),
        refresh_seconds=jobs_settings.DASHBOARD_REFRESH_SECONDS,
        # Keys name thresholds, not statuses: "running" is not a status here.
        thresholds=dict(
            warning=seconds_text(jobs_settings.WAITING_WARNING_SECONDS),
            critical=seconds_text(jobs_settings.WAITING_CRITICAL_SECONDS),
            running=seconds_text(jobs_settings.RUNNING_WARNING_SECONDS),
        ),
    )
    return TemplateResponse(request, "admin/jobs/dashboard.html", context)


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


def _changelist(**filters) -> str:
    return f"{reverse('admin:jobs_task_changelist')}?{urlencode(filters)}"


def _queue_row(queue: metrics.QueueOverview) -> dict:
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
    }


def _worker_row(worker: metrics.WorkerStatus) -> dict:
    return {
        "worker": worker,
        "queues": ", ".join(worker.queues) or "all",
        "heartbeat": seconds_text(worker.heartbeat_age),
    }


def _failure_row(group: metrics.FailureGroup) -> dict:
    return {
        "group": group,
        "url": _changelist(name=group.name, status__exact=Status.FAILED),
        "task_url": reverse("admin:jobs_task_change", args=[group.last_task_id]),
    }


def _late_row(task: metrics.LateTask) -> dict:
    return {
        "task": task,
        "for": seconds_text(task.seconds),
        "url": reverse("admin:jobs_task_change", args=[task.id]),
    }


def bar_chart(counts: list[int], minutes, *, width: int = 600, height: int = 120):
    """Draw tasks finished per minute as an SVG bar chart, the oldest minute on the left."""
    if not counts:
        return ""
    top = max(max(counts), 1)
    slot = width / len(counts)
    bars = format_html_join(
        "",
        '<rect x="{}" y="{}" width="{}" height="{}"><title>{}: {}</title></rect>',
        (
            (
                # format_html escapes its arguments into strings: numbers are formatted first.
                f"{i * slot + 0.5:.1f}",
                f"{height - n / top * height:.1f}",
                f"{max(slot - 1, 0.5):.1f}",
                f"{n / top * height:.1f}",
                moment_text(minute),
                n,
            )
            for i, (n, minute) in enumerate(zip(counts, minutes, strict=True))
        ),
    )
    return format_html(
        '<svg class="jobs-chart" viewBox="0 0 {} {}" width="{}" height="{}" role="img" '
        'aria-label="Tasks finished per minute, last {} minutes, at most {} a minute">{}</svg>',
        width,
        height,
        width,
        height,
        len(counts),
        top,
        bars,
    )


def sparkline(counts: list[int], *, width: int = 120, height: int = 24):
    """Draw a small SVG line of per-minute counts, for a table cell."""
    if not counts:
        return ""
    top = max(max(counts), 1)
    step = width / max(len(counts) - 1, 1)
    points = " ".join(
        f"{i * step:.1f},{height - 1 - n / top * (height - 2):.1f}" for i, n in enumerate(counts)
    )
    return format_html(
        '<svg class="jobs-sparkline" viewBox="0 0 {} {}" width="{}" height="{}" aria-hidden="true">'
        '<polyline points="{}"/></svg>',
        width,
        height,
        width,
        height,
        points,
    )
