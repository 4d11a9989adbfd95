"""Promises of DESIGN section 4, proved with real worker processes and real signals."""

import signal
import time

import pytest
from django.db import connection
from django.utils import timezone

from jobs.models import Task
from jobs.states import Status
from tests.conftest import wait_for
from tests.testapp import tasks
from tests.testapp.models import SideEffect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]

FAST = {
    "JOBS_LEASE_SECONDS": "1",
    "JOBS_MAINTENANCE_INTERVAL": "0.3",
    "JOBS_CANCEL_GRACE": "1",
    "JOBS_LOG_LEVEL": "DEBUG",  # "task started" lines, for until_started
}


def status_of(task):
    return Task.objects.values_list("status", flat=True).get(pk=task.pk)


def until_status(task, *statuses, timeout=30):
    wait_for(lambda: status_of(task) in statuses, timeout, message=f"{task.name} in {statuses}")
    return Task.objects.get(pk=task.pk)


def until_started(worker, task, timeout=30):
    """Until a child of ``worker`` has started ``task``: claimed (``running``) is not enough,
    a task claimed but not yet started is handed back at once on SIGTERM."""
    line = f"task started name={task.name} id={task.pk}"
    wait_for(lambda: line in worker.output, timeout, message=f"{task.name} started")


def test_sigkill_mid_task_another_worker_finishes_it_once(start_worker):
    task = tasks.slow_on_first_attempt.enqueue("killed-once", 60).record
    first = start_worker("--concurrency", "1", env=FAST)
    until_started(first, task)
    first.signal(signal.SIGKILL)
    first.wait()

    start_worker("--concurrency", "1", env=FAST)
    task = until_status(task, Status.SUCCEEDED)

    assert task.attempts == 2
    assert task.result == 2
    assert task.error_details[0]["exception"] == "jobs.exceptions.WorkerLost"
    # The killed worker's child did not go on running the task on its own.
    assert SideEffect.objects.filter(key="killed-once").count() == 1


def test_a_long_task_on_a_healthy_worker_is_never_rescued(start_worker):
    """Four seconds on a one-second lease, two workers watching: it runs exactly once."""
    task = tasks.sleep_then_effect.enqueue("long", 4).record
    start_worker("--concurrency", "1", env=FAST)
    start_worker("--concurrency", "1", env=FAST)
    task = until_status(task, Status.SUCCEEDED, Status.FAILED)
    assert task.status == Status.SUCCEEDED
    assert task.attempts == 1
    assert SideEffect.objects.filter(key="long").count() == 1


def test_sigterm_lets_a_running_task_finish_within_grace(start_worker):
    task = tasks.sleep_then_effect.enqueue("graceful", 1).record
    worker = start_worker("--grace", "20", env=FAST)
    until_started(worker, task)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output
    assert status_of(task) == Status.SUCCEEDED
    assert "action=finish_running" in worker.output
    assert not Task.objects.running().exists()


def test_sigterm_hands_back_a_task_that_outlasts_grace_and_another_worker_takes_it(
    start_worker,
):
    task = tasks.slow_on_first_attempt.enqueue("handed-back", 60).record
    worker = start_worker("--grace", "0.5", env=FAST)
    until_started(worker, task)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output
    task.refresh_from_db()
    assert task.status == Status.PENDING
    assert task.attempts == 0  # handing back does not spend an attempt
    assert "task handed back" in worker.output

    # Claimable at once, not after a lease expiry (300 s here): a fresh worker starts it on its
    # first look.
    start_worker(env={"JOBS_LEASE_SECONDS": "300"})
    task = until_status(task, Status.RUNNING, timeout=20)
    assert task.attempts == 1


def test_a_second_signal_stops_at_once_and_still_hands_back(start_worker):
    task = tasks.slow_on_first_attempt.enqueue("twice", 60).record
    worker = start_worker("--grace", "300", env=FAST)
    until_started(worker, task)
    worker.signal(signal.SIGTERM)
    time.sleep(0.3)
    worker.signal(signal.SIGINT)
    assert worker.wait(timeout=15) == 0, worker.output
    assert status_of(task) == Status.PENDING
    assert "action=stop_now" in worker.output


def test_hung_task_is_stopped_at_its_timeout_and_the_worker_keeps_serving(runworker):
    hung = tasks.hang.enqueue().record
    others = [tasks.add.enqueue(i, i).record for i in range(10)]
    done = runworker("--burst", "--concurrency", "2")
    assert done.returncode == 0, done.stderr
    hung.refresh_from_db()
    assert hung.status == Status.FAILED
    assert hung.error_details[-1]["exception"] == "jobs.exceptions.TaskTimeout"
    assert hung.last_error.endswith("longer than its timeout of 1 second.")
    assert set(
        Task.objects.filter(pk__in=[t.pk for t in others]).values_list("status", flat=True)
    ) == {Status.SUCCEEDED}


@pytest.mark.parametrize("task_def", [tasks.exit_hard, tasks.die_by_signal])
def test_a_task_that_kills_its_process_is_recorded_and_the_worker_lives(runworker, task_def):
    crash = task_def.enqueue().record
    after = tasks.add.enqueue(2, 2).record
    done = runworker("--burst", "--concurrency", "1")
    assert done.returncode == 0, done.stderr
    crash.refresh_from_db()
    assert crash.status == Status.FAILED
    assert crash.last_error == "The task stopped unexpectedly."
    assert "exited with code" in crash.error_details[-1]["message"]
    assert status_of(after) == Status.SUCCEEDED


def test_a_task_growing_without_bound_is_stopped_at_the_memory_limit(runworker):
    hog = tasks.grow_memory.enqueue().record
    after = tasks.add.enqueue(1, 1).record
    done = runworker("--burst", "--concurrency", "1", "--max-memory-per-child", "300")
    assert done.returncode == 0, done.stderr
    hog.refresh_from_db()
    assert hog.status == Status.FAILED
    assert hog.error_details[-1]["exception"] == "jobs.exceptions.MemoryLimitExceeded"
    assert status_of(after) == Status.SUCCEEDED


def test_children_are_recycled_after_n_tasks(runworker):
    for _ in range(6):
        tasks.add.enqueue(1, 1)
    done = runworker("--burst", "--concurrency", "1", "--max-tasks-per-child", "2", "-v", "2")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("child recycled") == 3
    assert Task.objects.filter(status=Status.SUCCEEDED).count() == 6


def test_cancel_of_a_running_task_that_checks(start_worker):
    task = tasks.checks_for_cancel.enqueue().record
    worker = start_worker(env=FAST)
    until_started(worker, task)
    from jobs import transitions

    transitions.cancel(Task.objects.get(pk=task.pk))
    task = until_status(task, Status.CANCELLED, timeout=10)
    assert task.finished_at is not None


def test_cancel_of_a_running_task_that_never_checks(start_worker):
    task = tasks.ignores_cancel.enqueue().record
    after = tasks.add.enqueue(3, 3).record
    worker = start_worker("--concurrency", "1", env=FAST)
    until_started(worker, task)
    from jobs import transitions

    transitions.cancel(Task.objects.get(pk=task.pk))
    until_status(task, Status.CANCELLED, timeout=15)
    until_status(after, Status.SUCCEEDED, timeout=15)  # its slot was given a new process


def test_pending_and_retrying_tasks_cancel_at_once_and_never_run(runworker):
    from jobs import transitions

    pending = tasks.record_effect.enqueue("never-pending").record
    retrying = tasks.record_effect.enqueue("never-retrying").record
    Task.objects.filter(pk=retrying.pk).update(status=Status.RETRYING)
    for task in (pending, retrying):
        assert transitions.cancel(Task.objects.get(pk=task.pk)).value == "cancelled"
    assert runworker("--burst").returncode == 0
    assert SideEffect.objects.count() == 0


def test_delayed_task_starts_about_when_due(start_worker):
    # PostgreSQL: the enqueue's NOTIFY tells the idle worker when to look, whatever its poll
    # interval. SQLite: the worker polls every second, its default.
    poll = "10" if connection.vendor == "postgresql" else "1"
    start_worker("--poll-interval", poll)
    time.sleep(1)  # let it start and go idle
    due = timezone.now() + timezone.timedelta(seconds=2)
    task = tasks.add.using(run_after=due).enqueue(1, 1).record
    task = until_status(task, Status.SUCCEEDED, timeout=15)
    assert task.started_at >= due
    assert (task.started_at - due).total_seconds() < 1.5
