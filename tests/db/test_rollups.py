"""Rollups: written by the maintenance round, checked against the task rows they add up."""

import math
import threading
from collections import Counter, defaultdict
from datetime import UTC, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from jobs import checks, metrics
from jobs.maintenance import pruning, rollups
from jobs.maintenance import rounds as maintenance
from jobs.metrics import rollups as figures
from jobs.metrics.rollups import BOUNDS, bin_of, percentile
from jobs.models import RollupMark, Task, TaskRollup
from jobs.states import Status
from tests.factories import TaskFactory

pytestmark = pytest.mark.django_db
RUNS = (0.03, 0.3, 1.5, 3.0, 7.0, 15.0, 45.0)  # each well inside a bin of BOUNDS


@pytest.fixture
def now():
    # Half past a minute: the minutes before are whole; rows land in known minutes.
    return timezone.now().astimezone(UTC).replace(second=30, microsecond=0)


def finished(status, at, *, queue="default", name="app.a", run=1.0, wait=0.5, attempts=1):
    started = at - timedelta(seconds=run)
    return TaskFactory(
        status=status,
        queue=queue,
        name=name,
        attempts=attempts,
        run_after=started - timedelta(seconds=wait),
        started_at=started,
        finished_at=at,
    )


def mixed(now, count=21, minutes=40, queue="default", name="app.a"):
    """``count`` finished tasks over ``minutes`` minutes ending 5 minutes before ``now``."""
    tasks = []
    kinds = [Status.SUCCEEDED] * 3 + [Status.FAILED, Status.CANCELLED]
    for i in range(count):
        at = now - timedelta(minutes=5 + (i * minutes) // count, seconds=i % 7)
        tasks.append(
            finished(
                kinds[i % len(kinds)], at, queue=queue, name=name,
                run=RUNS[i % len(RUNS)], wait=RUNS[(i * 3) % len(RUNS)], attempts=1 + i % 3,
            )
        )  # fmt: skip
    return tasks


def ran(task) -> bool:
    return task.status in (Status.SUCCEEDED, Status.FAILED) and task.started_at >= task.run_after


def test_minute_buckets_add_up_exactly_the_rows_of_their_minute(now):
    tasks = mixed(now) + mixed(now, count=9, queue="imports", name="app.b")
    TaskFactory(running=True)  # not finished: in no bucket
    rollups.catch_up(now=now)
    expected = defaultdict(Counter)
    for task in tasks:
        minute = task.finished_at.astimezone(UTC).replace(second=0, microsecond=0)
        bucket = expected[(minute, task.queue, task.name)]
        bucket[task.status] += 1
        bucket["retried"] += task.attempts > 1
        if ran(task):
            bucket["ran"] += 1
            bucket[f"run{bin_of((task.finished_at - task.started_at).total_seconds())}"] += 1
            bucket["run_seconds"] += (task.finished_at - task.started_at).total_seconds()
    stored = {(r.bucket_at, r.queue, r.name): r for r in TaskRollup.objects.filter(span=60)}
    assert stored.keys() == expected.keys()
    for key, row in stored.items():
        want = expected[key]
        assert (row.succeeded, row.failed, row.cancelled, row.retried, row.ran) == (
            want[Status.SUCCEEDED], want[Status.FAILED], want[Status.CANCELLED],
            want["retried"], want["ran"],
        )  # fmt: skip
        assert row.run_seconds == pytest.approx(want["run_seconds"])
        assert row.run_bins == [want[f"run{i}"] for i in range(len(BOUNDS) + 1)]


def bracket(durations, fraction):
    """The bounds a percentile read from bins must lie in: from the bin of the ordered value
    below the rank percentile_cont interpolates at to the bin of the value above it."""
    ordered = sorted(durations)
    position = fraction * (len(ordered) - 1)
    low, high = ordered[math.floor(position)], ordered[math.ceil(position)]
    bounds = (0.0, *BOUNDS, math.inf)
    return bounds[bin_of(low)], bounds[bin_of(high) + 1]


def test_history_agrees_with_the_live_metrics_of_the_same_rows(now):
    tasks = mixed(now) + mixed(now, count=9, queue="imports", name="app.b")
    rollups.catch_up(now=now)
    found = metrics.history("hour", now=now)
    window = timedelta(hours=1)
    live_outcomes = metrics.outcomes(now=now, window=window)
    live_runs = metrics.run_time_percentiles(now=now, window=window)
    live_waits = metrics.wait_time_percentiles(now=now, window=window)
    for queue, series in found.per_queue.items():
        whole = found.summed(series)
        outcome = live_outcomes[queue]
        assert (whole.succeeded, whole.failed, whole.cancelled) == (
            outcome.succeeded, outcome.failed, outcome.cancelled,
        )  # fmt: skip
        assert whole.failure_rate == outcome.failure_rate
        assert whole.ran == live_runs[queue].count
        # Read back from bins: in the bins around the exact percentile_cont of the rows.
        rows = [t for t in tasks if t.queue == queue and ran(t)]
        runs = [(t.finished_at - t.started_at).total_seconds() for t in rows]
        waits = [(t.started_at - t.run_after).total_seconds() for t in rows]
        for fraction, exact in ((0.5, live_runs[queue].p50), (0.95, live_runs[queue].p95)):
            low, high = bracket(runs, fraction)
            assert low <= exact <= high
            assert low <= whole.run_percentile(fraction) <= high
        low, high = bracket(waits, 0.5)
        assert low <= live_waits[queue].p50 <= high
        assert low <= whole.wait_percentile(0.5) <= high
    assert set(found.per_name) == {"app.a", "app.b"}
    assert sum(f.finished for f in found.total()) == 30


def test_hour_buckets_are_the_sum_of_their_minutes_and_feed_the_day(now):
    early = now - timedelta(hours=5)
    tasks = mixed(early, count=30, minutes=170)
    rollups.catch_up(now=now)
    while rollups.roll_hours(now=now):
        pass
    hours = TaskRollup.objects.filter(span=3600)
    # Complete hours only: those before the hour the minute mark is in.
    mark = rollups.rolled_until(60).replace(minute=0)
    expected = {t.finished_at.astimezone(UTC).replace(minute=0, second=0) for t in tasks}
    assert {h.bucket_at for h in hours} == {hour for hour in expected if hour < mark}
    assert len(expected) >= 3
    for hour in hours:
        minutes = TaskRollup.objects.filter(
            span=60,
            bucket_at__gte=hour.bucket_at,
            bucket_at__lt=hour.bucket_at + timedelta(hours=1),
        )
        total = figures.Figures()
        for minute in minutes:
            total.add(minute)
        assert (hour.succeeded, hour.failed, hour.ran) == (total.succeeded, total.failed, total.ran)
        assert hour.run_bins == total.run_bins
    day = metrics.history("day", now=now)
    whole = day.summed(day.total())
    assert whole.finished == len(tasks)
    assert whole.failed == sum(t.status == Status.FAILED for t in tasks)
    # Pruned, the tasks leave the day's figures as they were.
    Task.objects.all().delete()
    assert metrics.history("day", now=now).summed(day.total()).finished == len(tasks)


def test_rolling_again_never_counts_twice(now):
    mixed(now)
    first = maintenance.run(now=now)["rolled"]
    assert first > 0
    before = list(TaskRollup.objects.order_by("pk").values())
    assert maintenance.run(now=now)["rolled"] == 0
    assert maintenance.run(now=now + timedelta(seconds=5))["rolled"] == 0
    assert list(TaskRollup.objects.order_by("pk").values()) == before
    # A writer holding a stale mark (it read before another wrote): writes nothing at all.
    stale = rollups._advance(60, None, now, [rollups._rollup(60, now, "q", "n", figures.Figures())])
    assert stale == 0
    assert list(TaskRollup.objects.order_by("pk").values()) == before


def test_a_quiet_week_is_skipped_and_the_mark_never_passes_the_last_task(now):
    finished(Status.SUCCEEDED, now - timedelta(days=8))
    finished(Status.SUCCEEDED, now - timedelta(minutes=10))
    assert rollups.catch_up(now=now, rounds=3) == 2
    last = now - timedelta(minutes=10)
    assert rollups.rolled_until(60) == last.replace(second=0) + timedelta(minutes=1)
    # A clock far ahead moves the mark no further; one gone back does not roll again.
    assert rollups.roll_minutes(now=now + timedelta(days=365)) == 0
    assert rollups.roll_minutes(now=now - timedelta(hours=3)) == 0
    assert rollups.rolled_until(60) == last.replace(second=0) + timedelta(minutes=1)
    finished(Status.FAILED, now - timedelta(minutes=5))  # later than the mark: counted next
    assert rollups.roll_minutes(now=now) == 1
    assert sum(r.finished for r in metrics.history("hour", now=now).total()) == 2


def test_tasks_of_the_last_two_minutes_wait_for_the_next_round(now):
    finished(Status.SUCCEEDED, now - timedelta(seconds=20))
    assert rollups.catch_up(now=now) == 0
    # Its minute is rolled up once it has been over for SETTLE.
    assert rollups.catch_up(now=now + rollups.SETTLE) == 0
    assert rollups.catch_up(now=now + rollups.SETTLE + timedelta(seconds=30)) == 1


def test_a_round_rolls_a_bounded_chunk(now, monkeypatch):
    monkeypatch.setattr(rollups, "CHUNK_ROWS", 5)
    for i in range(12):
        finished(Status.SUCCEEDED, now - timedelta(minutes=30 - i))
    assert rollups.roll_minutes(now=now) == 4  # the fifth task's minute begins the next chunk
    assert sum(r.succeeded for r in TaskRollup.objects.all()) == 4
    rollups.catch_up(now=now)
    assert sum(r.succeeded for r in TaskRollup.objects.all()) == 12


def test_pruning_deletes_only_what_the_rollups_counted(settings, now):
    settings.JOBS_AUTO_PRUNE = True
    settings.JOBS_PRUNE_AFTER = {"succeeded": 3600}
    old = [finished(Status.SUCCEEDED, now - timedelta(hours=3, minutes=i)) for i in range(3)]
    settle = finished(Status.SUCCEEDED, now - timedelta(seconds=10))
    # Without rollups nothing is deleted; the round rolls up first, then prunes.
    assert Task.objects.filter(pk__in=[t.pk for t in old]).count() == 3
    assert maintenance.run(now=now)["pruned"] == 3
    assert TaskRollup.objects.filter(span=60).count() == 3
    assert Task.objects.filter(pk=settle.pk).exists()
    day = metrics.history("day", now=now)
    assert day.summed(day.total()).succeeded == 3


def test_old_buckets_are_forgotten_after_their_keep(settings, now):
    settings.JOBS_HISTORY_KEEP_DAYS = 1
    for age in (timedelta(days=3), timedelta(hours=2), timedelta(minutes=20)):
        finished(Status.SUCCEEDED, now - age)
    rollups.catch_up(now=now)
    while rollups.roll_hours(now=now):
        pass
    hours = TaskRollup.objects.filter(span=3600)
    assert hours.filter(bucket_at__lt=now - timedelta(days=2)).count() == 1
    rollups.forget_old(now=now)
    # The hour of three days ago goes, and the minutes older than a day whose hour is written.
    assert not TaskRollup.objects.filter(bucket_at__lt=now - timedelta(days=1)).exists()
    assert TaskRollup.objects.filter(span=60).count() == 2
    week = metrics.history("week", now=now)
    assert week.summed(week.total()).succeeded == 2


def test_a_week_without_tasks_is_empty_not_an_error(now):
    found = metrics.history("week", now=now)
    assert len(found.slots) == 168
    assert found.per_queue == {}
    assert found.rolled_until is None
    assert found.summed(found.total()).run_percentile(0.95) is None


def test_percentile_reads_back_inside_the_bin_of_the_rank():
    bins = [0] * (len(BOUNDS) + 1)
    bins[bin_of(3.0)] = 10  # ten runs between 2 s and 5 s
    assert 2 <= percentile(bins, 0.5) <= 5
    bins[-1] = 100  # beyond the last bound: the bound, a lower limit
    assert percentile(bins, 0.95) == BOUNDS[-1]
    assert percentile([0] * len(bins), 0.5) is None


@pytest.mark.parametrize("value", [0, -1, 1.5, "7", True, 10**9])
def test_a_bad_keep_is_reported(settings, value):
    settings.JOBS_HISTORY_KEEP_DAYS = value
    errors = checks.check_numeric_limits(None)
    assert any("JOBS_HISTORY_KEEP_DAYS" in e.msg for e in errors)


@pytest.mark.django_db(transaction=True)
def test_two_rounds_at_once_write_each_bucket_once(now, monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers: PostgreSQL (SQLite has one writer at a time)")
    tasks = mixed(now, count=40)
    both_read = threading.Barrier(2)
    read = figures.minute_figures

    def read_then_wait(start, end):
        rows = read(start, end)
        both_read.wait(20)  # both have read the same chunk: both will try to write it
        return rows

    monkeypatch.setattr(rollups, "minute_figures", read_then_wait)
    written, errors = [], []

    def round_():
        try:
            written.append(rollups.roll_minutes(now=now))
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=round_) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert sorted(written)[0] == 0  # the second writer found the mark moved: wrote nothing
    assert sorted(written)[1] > 0
    total = sum(r.succeeded + r.failed + r.cancelled for r in TaskRollup.objects.all())
    assert total == len(tasks)
    assert RollupMark.objects.get(span=60).rolled_until is not None


def test_pruning_in_the_middle_of_a_rollup_deletes_none_of_its_tasks(settings, now, monkeypatch):
    settings.JOBS_PRUNE_AFTER = {"succeeded": 60}
    tasks = [finished(Status.SUCCEEDED, now - timedelta(minutes=30 - i)) for i in range(6)]
    read = figures.minute_figures
    pruned = []

    def read_then_prune(start, end):
        rows = read(start, end)
        # Another worker's bounded pass, between the rollup's read and its write.
        pruned.append(pruning.prune(now=now, max_batches=10).total)
        return rows

    monkeypatch.setattr(rollups, "minute_figures", read_then_prune)
    assert rollups.roll_minutes(now=now) == 6
    assert pruned == [0]
    assert Task.objects.filter(pk__in=[t.pk for t in tasks]).count() == 6
    # Counted now: the next pass deletes them, and the hour still counts them.
    assert pruning.prune(now=now, max_batches=10).total == 6
    assert sum(f.succeeded for f in metrics.history("hour", now=now).total()) == 6


def test_once_caught_up_the_next_try_waits(now):
    # Mid-hour: ten minutes back stays in this hour, so no hour bucket settles in between.
    now = now.replace(minute=30)
    finished(Status.SUCCEEDED, now - timedelta(minutes=10))
    assert rollups.run("w", now=now) == 1
    assert rollups.run("w", now=now + timedelta(seconds=5)) == 0  # nothing left: it rests
    finished(Status.SUCCEEDED, now - timedelta(minutes=5))
    assert rollups.run("w", now=now + timedelta(seconds=10)) == 0
    later = now + timedelta(seconds=5 + rollups.IDLE_SECONDS)
    assert rollups.run("w", now=later) == 1
