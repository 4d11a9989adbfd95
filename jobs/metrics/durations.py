"""Durations of finished tasks: run-time and wait-time percentiles, and histograms."""

import math
from datetime import timedelta

from django.db import connections, router
from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, Sum

from jobs import sql
from jobs.metrics.results import Percentiles
from jobs.metrics.window import as_window as _window
from jobs.metrics.window import now_or_current as _now
from jobs.metrics.window import ran_in as _ran_in
from jobs.models import Task


def run_time_percentiles(*, now=None, window=None) -> dict[str, Percentiles]:
    """Return, per queue, p50 and p95 of the run time of tasks whose last attempt ran to its
    end in the window (succeeded or failed; ``jobs.metrics.window.ran_in``)."""
    return _percentiles("started_at", "finished_at", _now(now), _window(window))


def wait_time_percentiles(*, now=None, window=None) -> dict[str, Percentiles]:
    """Return, per queue, p50 and p95 of the wait (due to start) of the same tasks."""
    return _percentiles("run_after", "started_at", _now(now), _window(window))


def _percentiles(start: str, end: str, now, window) -> dict[str, Percentiles]:
    rows = _ran_in(now, window)
    connection = connections[router.db_for_read(Task)]
    inner_query = rows.order_by().values("queue", start, end).query
    inner, params = inner_query.get_compiler(connection=connection).as_sql()
    statement = sql.dialect(connection).percentiles_sql(inner, start, end)
    if statement is None:  # no percentile function in this database
        return _percentiles_portable(rows, start, end)
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return {
            queue: Percentiles(p50=float(p50), p95=float(p95), count=n)
            for queue, p50, p95, n in cursor.fetchall()
        }


def _percentiles_portable(rows, start, end) -> dict[str, Percentiles]:
    duration = ExpressionWrapper(F(end) - F(start), output_field=DurationField())
    found = {}
    for queue, n in rows.order_by().values_list("queue").annotate(n=Count("*")):
        ordered = (
            rows.filter(queue=queue)
            .annotate(duration=duration)
            .order_by("duration")
            .values_list("duration", flat=True)
        )
        found[queue] = Percentiles(
            p50=_interpolate(ordered, n, 0.5), p95=_interpolate(ordered, n, 0.95), count=n
        )
    return found


def _interpolate(ordered, n: int, fraction: float) -> float:
    # percentile_cont: the value at rank fraction * (n - 1), interpolated between its neighbours.
    position = fraction * (n - 1)
    lower = math.floor(position)
    values = [value.total_seconds() for value in ordered[lower : lower + 2]]
    low, high = values[0], values[-1]
    return low + (high - low) * (position - lower)


def duration_histograms(start: str, end: str, bounds, *, now=None, window=None) -> dict:
    """Bucket, per queue, ``end - start`` of tasks finished in the window (one grouped query).

    Return ``{queue: (cumulative counts at or under each bound, sum in seconds, count)}``.
    """
    now, window = _now(now), _window(window)
    rows = _ran_in(now, window).annotate(
        d=ExpressionWrapper(F(end) - F(start), output_field=DurationField())
    )
    counts = {
        f"le{i}": Count("pk", filter=Q(d__lte=timedelta(seconds=bound)))
        for i, bound in enumerate(bounds)
    }
    found = {}
    for row in rows.order_by().values("queue").annotate(n=Count("pk"), total=Sum("d"), **counts):
        total = row["total"].total_seconds() if row["total"] is not None else 0.0
        found[row["queue"]] = ([row[f"le{i}"] for i in range(len(bounds))], total, row["n"])
    return found
