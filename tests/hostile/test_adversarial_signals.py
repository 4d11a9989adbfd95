"""Signals the way deployments send them, to real workers leading their own process group.

systemd (``KillMode=control-group``), Ctrl-C in a terminal, ``timeout`` and container runtimes
signal every process of the worker, not the supervisor alone. The shutdown must be the same:
running tasks finish within the grace period, the rest are handed back, no attempt is spent.
"""

import os
import signal
import time

import pytest

from jobs.models import Task
from jobs.states import Status
from tests.conftest import wait_for
from tests.hostile.adversarial import (
    FAST,
    GroupWorker,
    is_alive,
    session_members,
    started_pid,
    until_started,
)
from tests.testapp import hostile_tasks, tasks
from tests.testapp.models import SideEffect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]


def assert_finished_once(task, key):
    task.refresh_from_db()
    assert (task.status, task.attempts, task.error_details) == (Status.SUCCEEDED, 1, []), task
    assert SideEffect.objects.filter(key=key).count() == 1


def assert_handed_back(task):
    task.refresh_from_db()
    assert (task.status, task.attempts, task.error_details) == (Status.PENDING, 0, []), task


@pytest.fixture
def start_group_worker(worker_env, tmp_path):
    """Start ``runworker`` processes in process groups of their own; killed at the end."""
    started = []

    def start(*args, env=None):
        worker = GroupWorker(
            args, {**worker_env, **(env or {})}, tmp_path / f"group-worker-{len(started)}.log"
        )
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_process_group_lets_running_tasks_finish(start_group_worker, signum):
    sleeper = tasks.sleep_then_effect.enqueue("sleeper", 2).record
    # Its own program (sleep) must not get the worker's signal either.
    program = hostile_tasks.runs_a_subprocess_then_effect.enqueue("program", 2).record
    waiting = [tasks.sleep_then_effect.enqueue(f"waiting-{n}", 0).record for n in range(3)]
    worker = start_group_worker("--concurrency", "2", "--grace", "30", env=FAST)
    until_started(worker, sleeper)
    until_started(worker, program)

    worker.signal_group(signum)

    assert worker.wait() == 0, worker.output
    assert "action=finish_running" in worker.output
    assert_finished_once(sleeper, "sleeper")
    assert_finished_once(program, "program")
    for task in waiting:
        assert_handed_back(task)
    assert not Task.objects.running().exists()
    assert session_members(worker.process.pid) == []  # nothing of the worker is left behind


def test_a_signal_to_every_process_of_the_worker_lets_running_tasks_finish(start_group_worker):
    """As systemd's default ``KillMode=control-group`` does: SIGTERM to each process."""
    sleeper = tasks.sleep_then_effect.enqueue("every-process", 2).record
    worker = start_group_worker("--concurrency", "2", "--grace", "30", env=FAST)
    until_started(worker, sleeper)

    for pid in session_members(worker.process.pid):
        os.kill(pid, signal.SIGTERM)

    assert worker.wait() == 0, worker.output
    assert_finished_once(sleeper, "every-process")
    assert not Task.objects.running().exists()


def test_past_the_grace_period_tasks_are_handed_back_with_their_processes_stopped(
    start_group_worker,
):
    task = hostile_tasks.holds_a_subprocess_on_first_attempt.enqueue("outlasts-grace", 60).record
    worker = start_group_worker("--grace", "0.5", env=FAST)
    until_started(worker, task)
    program = started_pid("outlasts-grace")

    worker.signal_group(signal.SIGTERM)

    assert worker.wait() == 0, worker.output
    assert "grace period over" in worker.output
    assert_handed_back(task)
    wait_for(lambda: not is_alive(program), timeout=5, message="the task's program stopped")


def test_a_second_signal_to_the_group_stops_at_once_and_still_hands_back(start_group_worker):
    task = hostile_tasks.holds_a_subprocess_on_first_attempt.enqueue("second-signal", 60).record
    worker = start_group_worker("--grace", "300", env=FAST)
    until_started(worker, task)
    program = started_pid("second-signal")

    worker.signal_group(signal.SIGTERM)
    wait_for(lambda: "action=finish_running" in worker.output, message="the first signal")
    worker.signal_group(signal.SIGINT)

    assert worker.wait(timeout=15) == 0, worker.output
    assert "action=stop_now" in worker.output
    assert_handed_back(task)
    wait_for(lambda: not is_alive(program), timeout=5, message="the task's program stopped")


def test_sigkill_after_sigterm_leaves_nothing_running_and_the_task_is_rescued(
    start_group_worker,
):
    """Kubernetes: SIGTERM, then SIGKILL to the group when its grace period is over."""
    task = hostile_tasks.holds_a_subprocess_on_first_attempt.enqueue("killed", 60).record
    bystander = tasks.record_effect.enqueue("killed-bystander").record
    worker = start_group_worker("--grace", "300", env=FAST)
    until_started(worker, task)
    program = started_pid("killed")

    worker.signal_group(signal.SIGTERM)
    time.sleep(0.5)
    worker.signal_group(signal.SIGKILL)
    worker.wait()

    # Its child, in a process group of its own, sees its supervisor gone and takes its task's
    # program with it: nothing runs on, orphaned, while another worker runs the task again.
    wait_for(lambda: session_members(worker.process.pid) == [], timeout=5, message="all gone")
    assert not is_alive(program)
    start_group_worker(env=FAST)
    task = Task.objects.get(pk=task.pk)
    wait_for(
        lambda: Task.objects.get(pk=task.pk).status == Status.SUCCEEDED,
        message="the task rescued and run again",
    )
    task.refresh_from_db()
    assert task.attempts == 2
    assert task.error_details[0]["exception"] == "jobs.exceptions.WorkerLost"
    wait_for(
        lambda: Task.objects.get(pk=bystander.pk).status == Status.SUCCEEDED,
        message="the bystander run",
    )
    assert SideEffect.objects.filter(key="killed-bystander").count() == 1
