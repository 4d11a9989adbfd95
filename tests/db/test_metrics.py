"""Dashboard numbers against a factory-built data set whose answers are worked out by hand."""

from datetime import UTC, datetime, timedelta

import pytest

from jobs import metrics
from jobs.maintenance import pausing
from jobs.metrics import Outcomes, Percentiles, Retries
from jobs.states import Status
from tests.factories import TaskFactory, WorkerFactory

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)


def ago(seconds):
    return NOW - timedelta(seconds=seconds)


def done(status, *, finished, run_time, wait, queue="default", name="app.add", **extra):
    """A task that finished ``finished`` seconds before NOW after running ``run_time`` seconds."""
    finished_at = ago(finished)
    started_at = finished_at - timedelta(seconds=run_time)
    run_after = started_at - timedelta(seconds=wait)
    return TaskFactory(
        status=status,
        queue=queue,
        name=name,
        attempts=extra.pop("attempts", 1),
        created_at=run_after,
        run_after=run_after,
        started_at=started_at,
        finished_at=finished_at,
        **extra,
    )


def error(exception, message="boom"):
    return [{"attempt": 1, "exception": exception, "message": message, "traceback": ""}]


@pytest.fixture
def data():
    """Two queues; the docstring of each test says which rows its answer comes from."""
    # default: waiting (due 120 s and 10 s ago), one not due yet, one running for 1000 s.
    TaskFactory(queue="default", run_after=ago(120), created_at=ago(120))
    TaskFactory(queue="default", run_after=ago(30), created_at=ago(30))
    TaskFactory(queue="default", run_after=NOW + timedelta(minutes=1))
    TaskFactory(queue="default", retrying=True, run_after=ago(10))
    TaskFactory(queue="default", running=True, started_at=ago(1000), worker_id="w1")
    # default, finished in the last hour: run times 1, 2, 3, 4 (succeeded) and 10 (failed);
    # waits 0, 1, 2, 10 and 5.
    done(Status.SUCCEEDED, finished=35, run_time=1, wait=0)  # minute 11:59
    done(Status.SUCCEEDED, finished=300, run_time=2, wait=1)  # minute 11:55
    done(Status.SUCCEEDED, finished=300, run_time=3, wait=2, attempts=3)  # 11:55, 2 retries
    done(Status.SUCCEEDED, finished=3630, run_time=4, wait=10)  # minute 11:00 (window edge)
    done(
        Status.FAILED,
        finished=1800,
        run_time=10,
        wait=5,
        error_details=error("builtins.ValueError", "bad value"),
    )  # minute 11:30
    TaskFactory(queue="default", cancelled=True, finished_at=ago(20))  # 12:00, never started
    done(Status.SUCCEEDED, finished=7200, run_time=100, wait=100)  # two hours ago: out
    # emails: waiting 400 s; three failures in the last hour.
    TaskFactory(queue="emails", name="app.send", run_after=ago(400), created_at=ago(400))
    for seconds, exception in ((60, "ConnectionError"), (100, "ConnectionError"), (50, "KeyError")):
        done(
            Status.FAILED,
            queue="emails",
            name="app.send",
            finished=seconds,
            run_time=1,
            wait=1,
            error_details=[*error("builtins.OSError"), *error(f"builtins.{exception}", "nope")],
        )


def test_status_counts_per_queue(data):
    counts = metrics.status_counts()
    assert counts["default"] == {
        "pending": 3,
        "running": 1,
        "succeeded": 5,
        "failed": 1,
        "retrying": 1,
        "cancelled": 1,
        "blocked": 0,  # waiting on dependencies, counted apart from pending
    }
    assert counts["emails"] == dict.fromkeys(metrics.STATUSES, 0) | {"pending": 1, "failed": 3}


def test_oldest_waiting_counts_only_due_tasks(data):
    assert metrics.oldest_waiting(now=NOW) == {"default": 120.0, "emails": 400.0}


@pytest.mark.parametrize(
    ("seconds", "level"),
    [(None, "ok"), (59.9, "ok"), (60, "warning"), (299, "warning"), (300, "critical")],
)
def test_waiting_level_uses_the_thresholds(seconds, level):
    assert metrics.waiting_level(seconds) == level


def test_waiting_level_follows_settings(settings):
    settings.JOBS_WAITING_WARNING_SECONDS = 5
    settings.JOBS_WAITING_CRITICAL_SECONDS = 10
    assert metrics.waiting_level(7) == "warning"
    assert metrics.waiting_level(12) == "critical"


def test_throughput_counts_the_last_hour_up_to_now(data):
    flow = metrics.throughput(now=NOW)
    assert len(flow.minutes) == 60
    # 59 whole minutes and the current one (12:00), counted up to NOW (12:00:30).
    assert flow.minutes[0] == datetime(2026, 1, 1, 11, 1, tzinfo=UTC)
    assert flow.minutes[-1] == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    default = flow.per_queue["default"]
    # The cancelled task finished in the current minute (12:00:10): counted; the 11:00:00 one
    # is before the first minute.
    assert {i: n for i, n in enumerate(default) if n} == {29: 1, 54: 2, 58: 1, 59: 1}
    emails = flow.per_queue["emails"]
    assert {i: n for i, n in enumerate(emails) if n} == {57: 1, 58: 2}
    assert flow.total()[58] == 3
    assert flow.seconds == 59.5 * 60
    assert flow.per_minute("default") == pytest.approx(5 / 59.5)
    assert flow.per_minute() == pytest.approx(8 / 59.5)
    # The 60 seconds before NOW: 35 and 20 s ago in default, 50 s ago in emails (60 s is out).
    assert flow.last_minute == {"default": 2, "emails": 1}
    assert (flow.in_last_minute("default"), flow.in_last_minute()) == (2, 3)


def test_throughput_of_a_burst_in_the_current_minute_is_its_own_rate():
    # 3,500 finished in the last 40 s: the dashboard said "5.5 a minute" when it averaged whole
    # minutes over the hour and left the current one out.
    for seconds in range(35):
        done(Status.SUCCEEDED, finished=seconds, run_time=0.1, wait=0)
    flow = metrics.throughput(now=NOW)
    assert flow.in_last_minute() == 35
    assert flow.total()[-1] == 31  # 12:00:00 to 12:00:30; the other 4 in 11:59
    assert metrics.snapshot(now=NOW).queues[0].finished_last_minute == 35


def test_outcomes_and_failure_rate_over_the_window(data):
    found = metrics.outcomes(now=NOW)
    # The 11:00 task finished 3630 s ago: outside a one-hour window.
    assert found["default"] == Outcomes(succeeded=3, failed=1, cancelled=1)
    assert found["default"].failure_rate == pytest.approx(0.25)
    assert found["emails"].failure_rate == 1.0
    assert Outcomes(cancelled=2).failure_rate is None
    wider = metrics.outcomes(now=NOW, window=timedelta(hours=3))
    assert wider["default"].succeeded == 5


def test_retries(data):
    assert metrics.retries(now=NOW) == {
        "default": Retries(waiting=1, retried=1, extra_attempts=2),
    }


def test_run_and_wait_time_percentiles(data):
    window = timedelta(hours=1, minutes=1)  # takes in the 11:00 task too
    run = metrics.run_time_percentiles(now=NOW, window=window)
    # Run times 1, 2, 3, 4, 10: the median is 3; p95 sits at rank 3.8, between 4 and 10.
    assert run["default"] == Percentiles(p50=pytest.approx(3), p95=pytest.approx(8.8), count=5)
    assert run["emails"] == Percentiles(p50=pytest.approx(1), p95=pytest.approx(1), count=3)
    wait = metrics.wait_time_percentiles(now=NOW, window=window)
    # Waits 0, 1, 2, 5, 10.
    assert wait["default"] == Percentiles(p50=pytest.approx(2), p95=pytest.approx(9), count=5)


def test_percentiles_count_only_attempts_that_ran_to_their_end():
    # Requeued after it failed (keeping its earlier start), then cancelled while it waited: not
    # a 104 s run with a -92 s wait, which is what its times would say.
    started = ago(110)
    TaskFactory(
        status=Status.CANCELLED,
        run_after=ago(18),
        started_at=started,
        finished_at=ago(6),
        created_at=ago(120),
    )
    done(Status.SUCCEEDED, finished=10, run_time=2, wait=1)
    done(Status.FAILED, finished=10, run_time=4, wait=3)
    done(Status.CANCELLED, finished=10, run_time=50, wait=0)  # cancelled while it ran
    run = metrics.run_time_percentiles(now=NOW)["default"]
    wait = metrics.wait_time_percentiles(now=NOW)["default"]
    assert (run.count, run.p50) == (2, pytest.approx(3))
    assert (wait.count, wait.p50) == (2, pytest.approx(2))
    histograms = metrics.duration_histograms("run_after", "started_at", [0, 10], now=NOW)
    assert histograms["default"] == ([0, 2], pytest.approx(4), 2)


def test_percentiles_of_an_even_count_interpolate():
    for run_time in (1, 2, 3, 4):
        done(Status.SUCCEEDED, finished=10, run_time=run_time, wait=0)
    found = metrics.run_time_percentiles(now=NOW)["default"]
    assert found.p50 == pytest.approx(2.5)
    assert found.p95 == pytest.approx(3.85)


def test_live_workers_with_tasks_in_flight(data):
    WorkerFactory(id="w1", last_heartbeat_at=ago(5), in_flight=1, queues=["default"])
    WorkerFactory(id="w2", last_heartbeat_at=ago(5), stopped_at=ago(1))
    WorkerFactory(id="w3", last_heartbeat_at=ago(600))
    (worker,) = metrics.live_workers(now=NOW)
    assert worker.id == "w1"
    assert worker.running == 1
    assert worker.in_flight == 1
    assert (worker.busy_processes, worker.running_tasks) == (0, 0)
    assert worker.queues == ["default"]
    assert worker.heartbeat_age == 5.0


def test_recent_failures_grouped_by_name_and_last_exception(data):
    groups = metrics.recent_failures(now=NOW)
    assert [(g.name, g.exception, g.count) for g in groups] == [
        ("app.send", "builtins.ConnectionError", 2),
        ("app.send", "builtins.KeyError", 1),
        ("app.add", "builtins.ValueError", 1),
    ]
    assert groups[0].last_failed_at == ago(60)
    assert groups[0].last_message == "nope"
    assert groups[2].last_message == "bad value"
    assert metrics.recent_failures(now=NOW, limit=1)[0].count == 2


def test_tasks_waiting_or_running_too_long(data):
    waiting = metrics.waiting_too_long(now=NOW)
    assert [(t.queue, t.seconds) for t in waiting] == [("emails", 400.0), ("default", 120.0)]
    assert [t.queue for t in metrics.waiting_too_long(now=NOW, threshold=300)] == ["emails"]
    (running,) = metrics.running_too_long(now=NOW)
    assert (running.status, running.seconds) == (Status.RUNNING, 1000.0)
    assert metrics.running_too_long(now=NOW, threshold=1001) == []


def test_distinct_queue_and_task_names(data):
    assert metrics.queue_names() == ["default", "emails"]
    assert metrics.task_names() == ["app.add", "app.send", "tests.testapp.tasks.add"]


def test_distinct_names_of_an_empty_table():
    assert metrics.queue_names() == []


def test_snapshot_puts_it_together_per_queue(data):
    pausing.pause("reports")
    snap = metrics.snapshot(now=NOW)
    assert [q.queue for q in snap.queues] == ["default", "emails", "reports"]
    default, emails, reports = snap.queues
    assert default.oldest_waiting == 120.0
    assert default.oldest_waiting_level == "warning"
    assert emails.oldest_waiting_level == "critical"
    assert default.counts["succeeded"] == 5
    assert default.outcomes.failure_rate == pytest.approx(0.25)
    assert default.run_time.p50 == pytest.approx(2.5)  # 1, 2, 3 and 10 in the one-hour window
    assert default.retries.extra_attempts == 2
    assert default.throughput_per_minute == pytest.approx(5 / 59.5)
    assert (default.finished_last_minute, emails.finished_last_minute) == (2, 1)
    assert reports.paused
    assert not default.paused
    assert reports.counts == dict.fromkeys(metrics.STATUSES, 0)
    assert reports.oldest_waiting is None
    assert len(snap.failures) == 3
    assert len(snap.waiting_too_long) == 2
    assert len(snap.running_too_long) == 1
