"""Every number about the queue that jobs shows: the admin dashboard, the CLI, the exporter.

All functions only read, take ``now`` (default: the current time) so that their answers can be
reproduced, and return dataclasses or dicts keyed by queue name. Durations are in seconds.

Definitions (the README repeats them for operators):

- *waiting*: pending or retrying with ``run_after <= now``: due, not yet claimed.
- *oldest waiting age*: ``now - run_after`` of a queue's longest-due waiting task.
- *window*: ``[now - window, now]``, ``JOBS_METRICS_WINDOW_SECONDS`` (one hour) unless given.
  Windowed numbers read tasks that *finished* (succeeded, failed or cancelled) in the window,
  through the ``(status, finished_at)`` index, so they cost what the window's traffic costs, not
  what the table's size does.
- *throughput*: tasks finished per minute, over the last ``minutes`` minutes (the current one
  included, as far as it has gone), and in the last 60 seconds.
- *run time*: ``finished_at - started_at`` (the last attempt) of tasks that succeeded or failed
  in the window: a cancelled task's times are no run (``jobs.metrics.window.ran_in``).
- *wait time*: ``started_at - run_after`` of the same tasks: from the moment the task could run
  (its enqueue, or the end of its delay or backoff) to the start of its last attempt. A delay
  asked for at enqueue is not waiting, so it is left out.
- *failure rate*: failed / (succeeded + failed) among tasks finished in the window; cancelled
  tasks are neither.
- *retries*: tasks now waiting to retry, and tasks finished in the window that needed more than
  one attempt (with the number of extra attempts).

Percentiles are ``percentile_cont`` (linear interpolation) on PostgreSQL; elsewhere the same
interpolation is computed from the one or two ordered rows around the wanted rank, so both
databases give the same answer. The result types are in ``jobs.metrics.results``.
"""

from datetime import UTC, timedelta

from django.db import connections, router
from django.db.models import Count, F, Max, Min, Sum
from django.db.models.expressions import RawSQL
from django.db.models.functions import TruncMinute

from jobs import sql
from jobs.conf import jobs_settings
from jobs.maintenance import pausing

# Re-exported: every metric is reachable as jobs.metrics.<name>.
from jobs.metrics.durations import duration_histograms as duration_histograms
from jobs.metrics.durations import run_time_percentiles as run_time_percentiles
from jobs.metrics.durations import wait_time_percentiles as wait_time_percentiles
from jobs.metrics.errors import error_groups as error_groups
from jobs.metrics.history import History as History
from jobs.metrics.history import history as history
from jobs.metrics.results import (
    ErrorGroup as ErrorGroup,
)
from jobs.metrics.results import (
    FailureGroup,
    LateTask,
    Outcomes,
    Percentiles,
    QueueOverview,
    Retries,
    Snapshot,
    Throughput,
    WorkerStatus,
)
from jobs.metrics.window import as_window as _window
from jobs.metrics.window import finished_in as _finished_in
from jobs.metrics.window import now_or_current as _now
from jobs.models import Task, Worker
from jobs.sql import common
from jobs.states import TERMINAL, Status

STATUSES = [status.value for status in Status]
FINISHED = sorted(TERMINAL)


# Counts and ages -----------------------------------------------------------------------------


def status_counts() -> dict[str, dict[str, int]]:
    """Count tasks by queue and status; each queue maps every status to a count (maybe 0)."""
    counts: dict[str, dict[str, int]] = {}
    rows = Task.objects.order_by().values_list("queue", "status").annotate(n=Count("*"))
    for queue, status, n in rows:
        counts.setdefault(queue, dict.fromkeys(STATUSES, 0))[status] = n
    return counts


def oldest_waiting(*, now=None, except_names=()) -> dict[str, float]:
    """Return, per queue that has waiting tasks, the seconds its longest-due one has waited;
    tasks named in ``except_names`` (paused task types, for the health check) left out."""
    now = _now(now)
    due = Task.objects.due(now)
    if except_names:
        due = due.exclude(name__in=sorted(except_names))
    rows = due.order_by().values_list("queue").annotate(oldest=Min("run_after"))
    return {queue: (now - oldest).total_seconds() for queue, oldest in rows}


def waiting_of_names(names, *, now=None) -> dict[str, int]:
    """Return, per queue, how many due waiting tasks carry one of ``names``."""
    if not names:
        return {}
    due = Task.objects.due(_now(now)).filter(name__in=sorted(names))
    return dict(due.order_by().values_list("queue").annotate(n=Count("*")))


def waiting_level(seconds: float | None) -> str:
    """Rate an oldest waiting age against the thresholds: "ok", "warning" or "critical"."""
    if seconds is None or seconds < jobs_settings.WAITING_WARNING_SECONDS:
        return "ok"
    if seconds < jobs_settings.WAITING_CRITICAL_SECONDS:
        return "warning"
    return "critical"


def queue_names() -> list[str]:
    """Return every queue that has tasks, sorted; a skip scan of the (queue, status) index."""
    return _distinct_values("queue")


def task_names() -> list[str]:
    """Return every task name that has tasks, sorted; a skip scan of the (name, ...) index."""
    return _distinct_values("name")


def _distinct_values(column: str) -> list[str]:
    # A skip scan of an index (see jobs.sql.common.distinct_values), not SELECT DISTINCT.
    connection = connections[router.db_for_read(Task)]
    with connection.cursor() as cursor:
        cursor.execute(common.distinct_values(connection, column))
        return [row[0] for row in cursor.fetchall()]


# Windowed numbers ----------------------------------------------------------------------------


def throughput(*, now=None, minutes: int = 60) -> Throughput:
    """Count tasks finished per queue in each of the last ``minutes`` minutes (UTC), the current
    one included (its bar grows until the minute is over), and in the 60 seconds before ``now``.

    The last 60 seconds are the rate shown as "finished in the last minute": an average over the
    hour said 5.5 a minute while 3,500 a minute finished in a burst.
    """
    now = _now(now).astimezone(UTC)
    current = now.replace(second=0, microsecond=0)
    start = current - timedelta(minutes=minutes - 1)
    buckets = [start + timedelta(minutes=i) for i in range(minutes)]
    finished = Task.objects.finished().filter(finished_at__lte=now).order_by()
    rows = (
        finished.filter(finished_at__gte=start)
        .annotate(minute=TruncMinute("finished_at", tzinfo=UTC))
        .values_list("queue", "minute")
        .annotate(n=Count("*"))
    )
    per_queue: dict[str, list[int]] = {}
    for queue, minute, n in rows:
        index = int((minute - start).total_seconds() // 60)
        per_queue.setdefault(queue, [0] * minutes)[index] += n
    recent = (
        finished.filter(finished_at__gt=now - timedelta(minutes=1))
        .values_list("queue")
        .annotate(n=Count("*"))
    )
    return Throughput(
        minutes=buckets,
        per_queue=per_queue,
        last_minute=dict(recent),
        seconds=(now - start).total_seconds(),
    )


def outcomes(*, now=None, window=None) -> dict[str, Outcomes]:
    """Count, per queue, how the tasks finished in the window ended."""
    now, window = _now(now), _window(window)
    found: dict[str, dict[str, int]] = {}
    rows = (
        _finished_in(now, window).order_by().values_list("queue", "status").annotate(n=Count("*"))
    )
    for queue, status, n in rows:
        found.setdefault(queue, {})[status] = n
    return {queue: Outcomes(**counts) for queue, counts in found.items()}


def retries(*, now=None, window=None) -> dict[str, Retries]:
    """Count, per queue, tasks waiting to retry and tasks of the window that needed retries."""
    now, window = _now(now), _window(window)
    waiting = dict(
        Task.objects.filter(status=Status.RETRYING)
        .order_by()
        .values_list("queue")
        .annotate(n=Count("*"))
    )
    retried = {
        queue: (n, extra)
        for queue, n, extra in _finished_in(now, window)
        .filter(attempts__gt=1)
        .order_by()
        .values_list("queue")
        .annotate(n=Count("*"), extra=Sum(F("attempts") - 1))
    }
    return {
        queue: Retries(
            waiting=waiting.get(queue, 0),
            retried=retried.get(queue, (0, 0))[0],
            extra_attempts=retried.get(queue, (0, 0))[1],
        )
        for queue in waiting.keys() | retried.keys()
    }


# Workers and what needs attention ------------------------------------------------------------


def live_workers(*, now=None) -> list[WorkerStatus]:
    """Return the workers that have not stopped and beat within a lease, newest first."""
    now = _now(now)
    workers = list(Worker.objects.alive(now))
    running = dict(
        Task.objects.running()
        .filter(worker_id__in=[worker.pk for worker in workers])
        .order_by()
        .values_list("worker_id")
        .annotate(n=Count("*"))
    )
    return [
        WorkerStatus(
            id=worker.pk,
            hostname=worker.hostname,
            pid=worker.pid,
            queues=list(worker.queues),
            concurrency=worker.concurrency,
            in_flight=worker.in_flight,
            busy_processes=worker.busy_processes,
            running_tasks=worker.running_tasks,
            running=running.get(worker.pk, 0),
            started_at=worker.started_at,
            last_heartbeat_at=worker.last_heartbeat_at,
            heartbeat_age=(now - worker.last_heartbeat_at).total_seconds(),
            queue_caps=_caps(worker.queue_caps),
        )
        for worker in workers
    ]


def _caps(value) -> dict[str, int]:
    # The heartbeat writes a dict of whole numbers; a row written otherwise shows no cap.
    if not isinstance(value, dict):
        return {}
    return {str(q): cap for q, cap in value.items() if type(cap) is int}


def recent_failures(*, now=None, window=None, limit: int = 10) -> list[FailureGroup]:
    """Group tasks failed in the window by name and exception class, the largest groups first."""
    now, window = _now(now), _window(window)
    last_exception = sql.dialect(router.db_for_read(Task)).LAST_EXCEPTION
    failed = Task.objects.filter(
        status=Status.FAILED, finished_at__gte=now - window, finished_at__lte=now
    ).annotate(exception=RawSQL(last_exception, ()))
    groups = (
        failed.order_by()
        .values_list("name", "exception")
        .annotate(n=Count("*"), last=Max("finished_at"))
        .order_by("-n", "-last", "name")[:limit]
    )
    found = []
    for name, exception, n, last in groups:
        example = (
            failed.filter(name=name, exception=exception)
            .order_by("-finished_at")
            .values_list("pk", "error_details")
            .first()
        )
        details = example[1][-1] if example and example[1] else {}
        found.append(
            FailureGroup(
                name=name,
                exception=exception or "",
                count=n,
                last_failed_at=last,
                last_task_id=example[0] if example else None,
                last_message=details.get("message", ""),
            )
        )
    return found


def waiting_too_long(*, now=None, threshold=None, limit: int = 20) -> list[LateTask]:
    """Return tasks waiting longer than ``threshold`` (JOBS_WAITING_WARNING_SECONDS)."""
    now = _now(now)
    seconds = jobs_settings.WAITING_WARNING_SECONDS if threshold is None else threshold
    rows = Task.objects.due(now - timedelta(seconds=seconds)).order_by("run_after")[:limit]
    return [_late(task, task.run_after, now) for task in rows.only(*_LATE_FIELDS)]


def running_too_long(*, now=None, threshold=None, limit: int = 20) -> list[LateTask]:
    """Return tasks running for longer than ``threshold`` (JOBS_RUNNING_WARNING_SECONDS)."""
    now = _now(now)
    seconds = jobs_settings.RUNNING_WARNING_SECONDS if threshold is None else threshold
    rows = Task.objects.running().filter(started_at__lte=now - timedelta(seconds=seconds))
    rows = rows.order_by("started_at")[:limit]
    return [_late(task, task.started_at, now) for task in rows.only(*_LATE_FIELDS)]


_LATE_FIELDS = ("id", "name", "queue", "status", "run_after", "started_at")


def _late(task, since, now) -> LateTask:
    return LateTask(
        task.pk, task.name, task.queue, task.status, since, (now - since).total_seconds()
    )


# Everything at once --------------------------------------------------------------------------


def queue_overview(*, now=None, window=None, minutes: int = 60) -> list[QueueOverview]:
    """Return one QueueOverview per queue that has tasks or is paused, sorted by name."""
    return snapshot(now=now, window=window, minutes=minutes).queues


def snapshot(*, now=None, window=None, minutes: int = 60) -> Snapshot:
    """Compute every number of the dashboard at ``now``, a handful of grouped queries."""
    now, window = _now(now), _window(window)
    counts = status_counts()
    oldest = oldest_waiting(now=now)
    flow = throughput(now=now, minutes=minutes)
    ends = outcomes(now=now, window=window)
    retried = retries(now=now, window=window)
    run_times = run_time_percentiles(now=now, window=window)
    wait_times = wait_time_percentiles(now=now, window=window)
    paused = pausing.paused_queues()
    queues = []
    for queue in sorted(counts.keys() | paused):
        age = oldest.get(queue)
        queues.append(
            QueueOverview(
                queue=queue,
                counts=counts.get(queue, dict.fromkeys(STATUSES, 0)),
                oldest_waiting=age,
                oldest_waiting_level=waiting_level(age),
                throughput=flow.per_queue.get(queue, [0] * minutes),
                throughput_per_minute=flow.per_minute(queue),
                run_time=run_times.get(queue, Percentiles()),
                wait_time=wait_times.get(queue, Percentiles()),
                outcomes=ends.get(queue, Outcomes()),
                retries=retried.get(queue, Retries()),
                paused=queue in paused,
                finished_last_minute=flow.in_last_minute(queue),
            )
        )
    return Snapshot(
        now=now,
        window=window,
        queues=queues,
        throughput=flow,
        workers=live_workers(now=now),
        failures=recent_failures(now=now, window=window),
        waiting_too_long=waiting_too_long(now=now),
        running_too_long=running_too_long(now=now),
    )


# Used by stats, health and the exporter ------------------------------------------------------


def last_heartbeat_age(*, now=None) -> float | None:
    """Return the seconds since the latest heartbeat of any running worker (None: no worker)."""
    now = _now(now)
    latest = Worker.objects.filter(stopped_at__isnull=True).aggregate(at=Max("last_heartbeat_at"))
    return None if latest["at"] is None else max(0.0, (now - latest["at"]).total_seconds())
