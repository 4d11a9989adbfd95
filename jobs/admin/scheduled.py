"""The scheduled-tasks page: what runs later, in one list an operator reads top to bottom.

Two parts: the delayed tasks (waiting, due later: a delay, a snooze, a ``run_after``), soonest
first, from the claimable index; and the next slot of every enabled schedule, declared or added
in the admin, computed as the workers compute it (``jobs.maintenance.periodic``). A schedule
that cannot run (its task gone, its declaration removed) is listed with the reason instead.
"""

import json

from django.core.exceptions import ImproperlyConfigured
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from jobs.exceptions import UnknownTaskError
from jobs.humanize import moment_text, seconds_text
from jobs.maintenance import periodic, schedulable
from jobs.models import Schedule, Task

ROWS_SHOWN = 100  # of each part; the rest is counted, up to COUNT_LIMIT
COUNT_LIMIT = 10_000


def render_scheduled(request, context):
    """Render the page for ``request`` (the admin checked the permission)."""
    now = timezone.now()
    delayed = Task.objects.pending().filter(run_after__gt=now).order_by("run_after", "id")
    tasks = list(delayed.only("id", "name", "queue", "summary", "run_after")[:ROWS_SHOWN])
    counted = delayed.order_by()[: COUNT_LIMIT + 1].count()
    rows = Schedule.objects.filter(enabled=True).order_by("name")[: ROWS_SHOWN + 1]
    runs = sorted((_run(row, now) for row in rows[:ROWS_SHOWN]), key=_soonest)
    context.update(
        tasks=[_task(task, now) for task in tasks],
        tasks_total=f"{min(counted, COUNT_LIMIT):,}{'+' if counted > COUNT_LIMIT else ''}",
        tasks_cut=counted > len(tasks),
        runs=runs,
        runs_cut=len(rows) > ROWS_SHOWN,
        shown=ROWS_SHOWN,
        time_zone=timezone.get_current_timezone_name(),
        can_run=request.user.has_perm("jobs.run_schedule"),
    )
    return TemplateResponse(request, "admin/jobs/scheduled.html", context)


def _task(task, now) -> dict:
    return {
        "task": task,
        "short_name": task.name.rpartition(".")[2],
        "due": moment_text(task.run_after),
        "in": seconds_text((task.run_after - now).total_seconds()),
        "url": reverse("admin:jobs_task_change", args=[task.pk]),
    }


def _run(row: Schedule, now) -> dict:
    run = {"row": row, "url": reverse("admin:jobs_schedule_change", args=[row.pk])}
    try:
        spec = periodic.spec_of(row)
        schedulable.resolve(spec.task)  # a task removed from code since: said, not listed
        slot = spec.next_slot(now)
    except (ImproperlyConfigured, UnknownTaskError, StopIteration) as exc:
        return {**run, "problem": str(exc) or "never fires", "slot": None}
    return {
        **run,
        "slot": slot,
        "next": moment_text(slot),
        "in": seconds_text((slot - now).total_seconds()),
        "arguments": _arguments(spec),
    }


def _arguments(spec) -> str:
    parts = [json.dumps(list(spec.args), ensure_ascii=False)] if spec.args else []
    if spec.kwargs:
        parts.append(json.dumps(spec.kwargs, ensure_ascii=False, sort_keys=True))
    return " ".join(parts) or "—"


def _soonest(run: dict):
    # Those that cannot run last, by name; the others by their next slot.
    return (run["slot"] is None, run["slot"] or timezone.now(), run["row"].name)
