"""History in the admin: the dashboard's charts of the last hour, day or week per queue and
per task type, and a page per task type. Numbers from ``jobs.metrics.history`` (the rollups);
this module only formats them, as inline SVG coloured by the admin's CSS variables so that the
charts follow its light and dark themes (``jobs/admin/history.css``)."""

from typing import cast
from urllib.parse import urlencode

from django.http import Http404
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape, format_html, format_html_join
from django.utils.safestring import mark_safe

from jobs import metrics
from jobs.admin import errors
from jobs.exceptions import PayloadError
from jobs.humanize import moment_text, seconds_text
from jobs.metrics.history import PERIODS
from jobs.metrics.rollups import Figures
from jobs.models import Task
from jobs.tasks.payload import check_name

ERRORS_SHOWN = 20  # distinct errors on a task type's page
NAME_LENGTH = cast(int, Task._meta.get_field("name").max_length)
LABELS = {"hour": "last hour", "day": "last day", "week": "last week"}


def period_of(request) -> str:
    """The period a page's ``?history=`` asks for; the hour for anything else."""
    key = request.GET.get("history", "")
    return key if key in PERIODS else next(iter(PERIODS))


def dashboard_context(request) -> dict:
    """What the dashboard's history section shows: the charts of every queue and task type."""
    period = period_of(request)
    found = metrics.history(period)
    total = found.total()
    return {
        "history": _common(found, period, request),
        "history_chart": finished_chart(found.slots, total, found.slot_seconds),
        "history_queues": [
            _series_row(key, f, found) for key, f in sorted(found.per_queue.items())
        ],
        "history_types": [
            {**_series_row(key, f, found), "url": type_url(key, period)}
            for key, f in sorted(found.per_name.items())
        ],
    }


def render_task_type(request, context):
    """Render the page of the task type ``?name=`` (the admin checked the permission)."""
    name = request.GET.get("name", "")
    try:
        # The rule of enqueue: no task can have another name (PostgreSQL refuses a NUL).
        check_name(name, "task name", NAME_LENGTH)
    except PayloadError as exc:
        raise Http404(f"No task type has such a name: {exc}") from None
    period = period_of(request)
    found = metrics.history(period, name=name)
    slots = found.total()
    whole = found.summed(slots)
    groups = metrics.error_groups(window=PERIODS[period][0], name=name, limit=ERRORS_SHOWN)
    context.update(
        title=f"Task type {name.rpartition('.')[2]}",
        name=name,
        history=_common(found, period, request, name=name),
        figures=_figures(whole),
        charts=[
            ("Tasks finished", finished_chart(found.slots, slots, found.slot_seconds)),
            ("Failure rate", rate_chart(found.slots, slots)),
            ("Run time, p50 and p95", time_chart(found.slots, slots, "run")),
            ("Wait time, p50 and p95", time_chart(found.slots, slots, "wait")),
        ],
        queues=[_series_row(key, f, found) for key, f in sorted(found.per_queue.items())],
        error_rows=[errors.error_row(group) for group in groups],
        at_limit=len(groups) >= ERRORS_SHOWN,
        limit=ERRORS_SHOWN,
        tasks_url=f"{reverse('admin:jobs_task_changelist')}?{urlencode({'name': name})}",
        time_zone=timezone.get_current_timezone_name(),
    )
    return TemplateResponse(request, "admin/jobs/task_type.html", context)


def type_url(name: str, period: str = "hour") -> str:
    """The page of the task type ``name``."""
    query = urlencode({"name": name, **({"history": period} if period != "hour" else {})})
    return f"{reverse('admin:jobs_task_type')}?{query}"


def _common(found, period, request, *, name=None) -> dict:
    extra = {"name": name} if name else {}
    return {
        "period": period,
        "label": LABELS[period],
        "periods": [(key, LABELS[key], urlencode({**extra, "history": key})) for key in PERIODS],
        "from": moment_text(found.slots[0]),
        "slot": seconds_text(found.slot_seconds),
        "rolled_until": moment_text(found.rolled_until) if found.rolled_until else None,
    }


def _figures(whole: Figures) -> dict:
    rate = whole.failure_rate
    return {
        "finished": whole.finished,
        **{status: getattr(whole, status) for status in Figures.COUNTS[:3]},
        "retried": whole.retried,
        "failure_rate": "—" if rate is None else f"{rate:.1%}",
        "run_p50": seconds_text(whole.run_percentile(0.5)),
        "run_p95": seconds_text(whole.run_percentile(0.95)),
        "wait_p50": seconds_text(whole.wait_percentile(0.5)),
        "wait_p95": seconds_text(whole.wait_percentile(0.95)),
    }


def _series_row(key: str, series: list[Figures], found) -> dict:
    return {
        "key": key,
        "short": key.rpartition(".")[2] or key,
        "spark": finished_chart(found.slots, series, found.slot_seconds, small=True),
        **_figures(found.summed(series)),
    }


# Charts ------------------------------------------------------------------------------------

WIDTH, HEIGHT, LEFT, BOTTOM = 640, 150, 44, 18  # the plot: right of LEFT, above BOTTOM
SMALL = (160, 28)


def finished_chart(slots, figures: list[Figures], slot_seconds: int, *, small=False):
    """Stack, per slot, the tasks that succeeded, failed and were cancelled, as SVG bars."""
    layers = [
        (f"jobs-h-{status}", status, [getattr(f, status) for f in figures])
        for status in Figures.COUNTS[:3]
    ]
    top = max([f.finished for f in figures] + [1])
    width, height = SMALL if small else (WIDTH, HEIGHT)
    left, bottom = (0, 0) if small else (LEFT, BOTTOM)
    plot_h = height - bottom - (0 if small else 8)
    slot = (width - left) / len(slots)
    width_text = f"{max(slot - 0.4, 0.4):.1f}"
    shapes = []
    for i, moment in enumerate(slots):
        y = float(height - bottom)
        # A small chart is a picture of its row (aria-hidden): no title per bar to build.
        tip = "" if small else _tip(moment, [(layer[1], layer[2][i]) for layer in layers])
        for css, _, values in layers:
            h = values[i] / top * plot_h
            if h:
                y -= h
                # Numbers and our own class names; the one text, the tip, is escaped.
                shapes.append(
                    f'<rect class="{css}" x="{left + i * slot:.1f}" y="{y:.1f}" '
                    f'width="{width_text}" height="{h:.1f}">{tip}</rect>'
                )
    bars = mark_safe("".join(shapes))
    per = seconds_text(slot_seconds)
    label = f"Tasks finished per {per}, {len(slots)} slots, at most {top} in one"
    if small:
        return format_html(
            '<svg class="jobs-h-chart" viewBox="0 0 {} {}" width="{}" height="{}" '
            'aria-hidden="true">{}</svg>',
            width,
            height,
            width,
            height,
            bars,
        )
    return _svg(width, height, label, bars, _axes(slots, str(top), width))


def _tip(moment, counts) -> str:
    text = ", ".join(f"{n} {label}" for label, n in counts)
    return f"<title>{escape(moment_text(moment))}: {escape(text)}</title>"


def rate_chart(slots, figures: list[Figures]):
    """Draw the failure rate of each slot (failed of succeeded + failed) as an SVG line."""
    rates = [None if f.failure_rate is None else f.failure_rate * 100 for f in figures]
    return _lines(slots, [("jobs-h-failed-line", "failure rate", rates)], 100.0, "%")


def time_chart(slots, figures: list[Figures], kind: str):
    """Draw the p50 and p95 of the run (or wait) time of each slot as SVG lines, in seconds."""
    read = Figures.run_percentile if kind == "run" else Figures.wait_percentile
    p95 = [read(f, 0.95) for f in figures]
    p50 = [read(f, 0.5) for f in figures]
    top = max([v for v in p95 if v is not None] + [0.001])
    return _lines(slots, [("jobs-h-p95", "p95", p95), ("jobs-h-p50", "p50", p50)], top, "s")


def _lines(slots, lines, top: float, unit: str):
    plot_h = HEIGHT - BOTTOM - 8
    slot = (WIDTH - LEFT) / len(slots)
    drawn = []
    for css, label, values in lines:
        points = [
            (f"{LEFT + (i + 0.5) * slot:.1f}", f"{HEIGHT - BOTTOM - v / top * plot_h:.1f}", v, i)
            for i, v in enumerate(values)
            if v is not None
        ]
        path = " ".join(f"{x},{y}" for x, y, _, _ in points)
        drawn.append(format_html('<polyline class="{}" points="{}"/>', css, path))
        drawn.append(
            format_html_join(
                "",
                '<circle class="{}" cx="{}" cy="{}" r="2"><title>{}: {} {}</title></circle>',
                (
                    (css, x, y, moment_text(slots[i]), label, _value(v, unit))
                    for x, y, v, i in points
                ),
            )
        )
    names = " and ".join(label for _, label, _ in lines)
    aria = f"{names} per slot, {len(slots)} slots, at most {_value(top, unit)}"
    body = format_html_join("", "{}", ((one,) for one in drawn))
    return _svg(WIDTH, HEIGHT, aria, body, _axes(slots, _value(top, unit), WIDTH))


def _value(value: float, unit: str) -> str:
    return f"{value:.1f} %" if unit == "%" else seconds_text(value)


def _axes(slots, top_text: str, width: int):
    base = HEIGHT - BOTTOM
    return format_html(
        '<line class="jobs-h-axis" x1="{}" y1="{}" x2="{}" y2="{}"/>'
        '<text class="jobs-h-label" x="{}" y="14" text-anchor="end">{}</text>'
        '<text class="jobs-h-label" x="{}" y="{}" text-anchor="end">0</text>'
        '<text class="jobs-h-label" x="{}" y="{}">{}</text>'
        '<text class="jobs-h-label" x="{}" y="{}" text-anchor="end">{}</text>',
        LEFT, base, width, base,
        LEFT - 4, top_text,
        LEFT - 4, base,
        LEFT, HEIGHT - 3, moment_text(slots[0]),
        width, HEIGHT - 3, moment_text(slots[-1]),
    )  # fmt: skip


def _svg(width, height, label, body, axes):
    return format_html(
        '<svg class="jobs-h-chart" viewBox="0 0 {} {}" width="{}" height="{}" role="img" '
        'aria-label="{}">{}{}</svg>',
        width,
        height,
        width,
        height,
        label,
        axes,
        body,
    )
