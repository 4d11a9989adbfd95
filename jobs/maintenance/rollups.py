"""Rollups: finished tasks added up by minute and by hour, kept when pruning deletes the rows.

Each maintenance round (``jobs.maintenance.rounds``) calls ``run``, which does three bounded
steps:

1. Minutes: the tasks that finished since the minute mark (``RollupMark`` of span 60), up to
   ``SETTLE`` before ``now``, at most ``CHUNK_ROWS`` of each status, are added up
   (``jobs.metrics.rollups.minute_figures``) and written as minute buckets. A stretch with no
   finished task is skipped in one step, so a backlog of a quiet week costs a few rounds.
2. Hours: complete hours of minute buckets become hour buckets, at most ``CHUNK_HOURS``.
3. Old buckets go: minute buckets after a day (once their hour is written), hour buckets after
   ``JOBS_HISTORY_KEEP_DAYS``.

A bucket is written once. The rows of a chunk are inserted in the transaction that moves the
mark from where the writer read it, by a conditional UPDATE: of two writers of the same chunk
(two workers' rounds), the second waits for the first's row lock on PostgreSQL, then finds the
mark moved, updates nothing and rolls back; the unique constraint on (span, bucket, queue, name)
refuses a duplicate bucket besides. Only one worker at a time tries (a ``MaintenanceLock``
lease, as pruning has), which saves the others the reading, and once nothing was left to roll
up, the next try waits ``IDLE_SECONDS``.

Pruning deletes no task finished at or after the minute mark (``rolled_until``): every task
it deletes has been counted. ``SETTLE`` covers a write that lands after its ``finished_at``
(a success held by its worker for a moment): a task whose outcome is written more than
``SETTLE`` late into a minute already rolled up is not counted there.
"""

import logging
import uuid
from datetime import UTC, timedelta

from django.db import IntegrityError, transaction
from django.db.models.functions import TruncHour

from jobs.conf import jobs_settings
from jobs.maintenance import locks
from jobs.metrics.rollups import Figures, minute_figures, rolled_until
from jobs.models import RollupMark, Task, TaskRollup
from jobs.states import TERMINAL

logger = logging.getLogger(__name__)

MINUTE, HOUR = 60, 3600
SETTLE = timedelta(minutes=2)
# Tasks of each finished status rolled up per round at most, in one grouped query; measured
# in benchmarks/history.py.
CHUNK_ROWS = 2_000
CHUNK_HOURS = 24  # hours written per round at most
MINUTES_KEPT = timedelta(days=1)
DELETE_BATCH = 1000
LOCK_NAME = "rollup"
IDLE_SECONDS = 20.0  # between tries once nothing was left: a minute is rolled within 2 min 20 s


def run(holder: str | None = None, *, now) -> int:
    """Run the three steps once if no other worker is; return the buckets written."""
    holder = f"{holder or 'maintenance'}:{uuid.uuid4().hex[:8]}"
    # Caught up, the next try waits IDLE_SECONDS; with work left, the next round goes on.
    if not locks.acquire_lock(
        LOCK_NAME, holder, now=now, hold_seconds=300, every_seconds=IDLE_SECONDS
    ):
        return 0
    written = None
    try:
        written = roll_minutes(now=now) + roll_hours(now=now)
        forget_old(now=now)
    finally:
        locks.release_lock(LOCK_NAME, holder, finished_at=now if written == 0 else None)
    return written


def catch_up(*, now, rounds: int = 100_000) -> int:
    """Roll minutes up until nothing is left before ``now - SETTLE`` (or ``rounds`` chunks)."""
    written = 0
    for _ in range(rounds):
        mark = rolled_until(MINUTE)
        written += roll_minutes(now=now)
        if rolled_until(MINUTE) == mark:
            break
    return written


def settled(now):
    """Return the end of the minutes that can be rolled up at ``now`` (``SETTLE`` before it)."""
    return _minute(now - SETTLE)


def roll_minutes(*, now) -> int:
    """Write the minute buckets of the next chunk of finished tasks; return how many.

    The chunk starts at the minute of the first task finished since the mark (a quiet stretch
    costs nothing) and holds at most ``CHUNK_ROWS`` tasks of each finished status (more only
    if one minute holds more), up to ``now - SETTLE``. It ends after the minute of its last
    task: the mark never passes the latest task written, so a ``now`` ahead of the tasks'
    clocks (a clock set wrong, a test) skips none of the tasks that finish later; a mark
    ahead of ``now`` (the clock went back) waits for it.
    """
    limit = settled(now)
    mark = rolled_until(MINUTE)
    found = _finished_edge(mark, limit, last=False)
    if found is None:
        return 0
    start = _minute(found)
    beyond = _chunk_edge(start, limit)
    if beyond is not None:
        end = max(start + timedelta(minutes=1), _minute(beyond))
    else:
        end = _minute(_finished_edge(start, limit, last=True)) + timedelta(minutes=1)
    end = min(end, limit)
    rows = [
        _rollup(MINUTE, row["minute"], row["queue"], row["name"], Figures().add(row))
        for row in minute_figures(start, end)
    ]
    return _advance(MINUTE, mark, end, rows)


def roll_hours(*, now) -> int:
    """Add the minute buckets of complete hours up into hour buckets; return how many.

    Complete: before the hour of the minute mark. The chunk starts at the hour of the first
    minute bucket since the hour mark and spans ``CHUNK_HOURS`` at most.
    """
    minutes = rolled_until(MINUTE)
    if minutes is None:
        return 0
    limit = _hour(minutes)
    mark = rolled_until(HOUR)
    after = TaskRollup.objects.filter(span=MINUTE)
    if mark is not None:
        after = after.filter(bucket_at__gte=mark)
    first = after.order_by("bucket_at").values_list("bucket_at", flat=True).first()
    if first is None or _hour(first) >= limit:
        return 0
    start = _hour(first)
    end = min(start + timedelta(hours=CHUNK_HOURS), limit)
    sums: dict[tuple, Figures] = {}
    minute_rows = TaskRollup.objects.filter(
        span=MINUTE, bucket_at__gte=start, bucket_at__lt=end
    ).annotate(hour=TruncHour("bucket_at", tzinfo=UTC))
    for row in minute_rows.iterator(chunk_size=2000):
        key = (row.hour, row.queue, row.name)
        if key not in sums:
            sums[key] = Figures()
        sums[key].add(row)
    rows = [_rollup(HOUR, at, queue, name, one) for (at, queue, name), one in sums.items()]
    return _advance(HOUR, mark, end, rows)


def forget_old(*, now) -> int:
    """Delete minute buckets older than a day whose hour is written, and hour buckets older
    than ``JOBS_HISTORY_KEEP_DAYS``; at most ``DELETE_BATCH`` of each per call."""
    deleted = 0
    hours = rolled_until(HOUR)
    if hours is not None:
        cutoff = min(hours, now - MINUTES_KEPT)
        deleted += _delete_before(MINUTE, cutoff)
    deleted += _delete_before(HOUR, now - timedelta(days=jobs_settings.HISTORY_KEEP_DAYS))
    return deleted


def _delete_before(span, cutoff) -> int:
    old = TaskRollup.objects.filter(span=span, bucket_at__lt=cutoff)
    ids = list(old.order_by("bucket_at").values_list("pk", flat=True)[:DELETE_BATCH])
    if not ids:
        return 0
    return TaskRollup.objects.filter(pk__in=ids, span=span, bucket_at__lt=cutoff).delete()[0]


def _advance(span, mark, until, rows) -> int:
    """Move the mark of ``span`` from ``mark`` to ``until`` and insert ``rows``, all or none.

    Return the rows written: 0 when another writer moved the mark first.
    """
    try:
        with transaction.atomic():
            if mark is None:
                # The first writer creates the mark; a second one's INSERT fails on its key.
                RollupMark.objects.get_or_create(span=span)
                moved = RollupMark.objects.filter(span=span, rolled_until__isnull=True)
            else:
                moved = RollupMark.objects.filter(span=span, rolled_until=mark)
            if moved.update(rolled_until=until) != 1:
                raise _Lost
            TaskRollup.objects.bulk_create(rows, batch_size=500)
    except (_Lost, IntegrityError):
        logger.info("rollup skipped span=%d reason=written_by_another", span)
        return 0
    return len(rows)


class _Lost(Exception):
    """Another writer moved the mark first: nothing of this chunk is written."""


def _rollup(span, bucket_at, queue, name, figures: Figures) -> TaskRollup:
    return TaskRollup(
        span=span,
        bucket_at=bucket_at,
        queue=queue,
        name=name,
        succeeded=figures.succeeded,
        failed=figures.failed,
        cancelled=figures.cancelled,
        retried=figures.retried,
        ran=figures.ran,
        run_seconds=figures.run_seconds,
        wait_seconds=figures.wait_seconds,
        run_bins=figures.run_bins,
        wait_bins=figures.wait_bins,
    )


def _finished_edge(start, end, *, last: bool):
    """Return the first (or ``last``) ``finished_at`` in ``[start, end)`` (``start`` None: from
    the beginning), or None: one index seek per finished status on ``(status, finished_at)``."""
    found = []
    for status in sorted(TERMINAL):
        rows = Task.objects.filter(status=status, finished_at__lt=end)
        if start is not None:
            rows = rows.filter(finished_at__gte=start)
        order = "-finished_at" if last else "finished_at"
        edge = rows.order_by(order).values_list("finished_at", flat=True).first()
        if edge is not None:
            found.append(edge)
    if not found:
        return None
    return max(found) if last else min(found)


def _chunk_edge(start, limit):
    """Return the earliest moment by which some finished status has ``CHUNK_ROWS`` tasks
    since ``start``, or None if none has that many before ``limit``: an index-only scan of
    ``CHUNK_ROWS`` entries per status."""
    edges = []
    for status in sorted(TERMINAL):
        rows = Task.objects.filter(status=status, finished_at__gte=start, finished_at__lt=limit)
        ordered = rows.order_by("finished_at").values_list("finished_at", flat=True)
        edge = next(iter(ordered[CHUNK_ROWS - 1 : CHUNK_ROWS]), None)
        if edge is not None:
            edges.append(edge)
    return min(edges, default=None)


def _minute(moment):
    return moment.astimezone(UTC).replace(second=0, microsecond=0)


def _hour(moment):
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
