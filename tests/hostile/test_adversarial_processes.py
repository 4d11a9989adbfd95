"""Tasks that start processes, fork, hang or hoard memory, run by real workers.

A task may use processes as any Python code does; a process it forks never speaks for it; what
it started dies with its child when the child is killed; the worker keeps serving throughout.
"""

import pytest

from jobs.models import Task
from jobs.states import Status
from tests.conftest import wait_for
from tests.hostile.adversarial import (
    assert_succeeded_once,
    enqueue_bystanders,
    is_alive,
    started_pid,
)
from tests.testapp import hostile_tasks, tasks
from tests.testapp.models import SideEffect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]


def run_burst(runworker, *args):
    done = runworker("--burst", "--concurrency", "1", *args)
    assert done.returncode == 0, done.stderr
    return done


def assert_succeeded(task, result):
    task.refresh_from_db()
    assert (task.status, task.attempts, task.error_details) == (Status.SUCCEEDED, 1, []), task
    assert task.result == result


@pytest.mark.parametrize(
    "definition",
    [hostile_tasks.uses_multiprocessing_pool, hostile_tasks.uses_process_pool_executor],
)
def test_a_task_may_use_a_pool_of_processes(runworker, definition):
    task = definition.enqueue([1, 2, 3]).record
    bystanders = enqueue_bystanders("after-pool")
    run_burst(runworker)
    assert_succeeded(task, [1, 4, 9])
    assert_succeeded_once(bystanders)


def test_a_task_may_run_a_program(runworker):
    task = hostile_tasks.uses_subprocess.enqueue().record
    bystanders = enqueue_bystanders("after-subprocess")
    run_burst(runworker)
    assert_succeeded(task, 42)
    assert_succeeded_once(bystanders)


def test_a_process_a_task_starts_may_use_the_database_without_breaking_the_tasks(runworker):
    task = hostile_tasks.uses_the_database_in_a_process.enqueue("from-a-process").record
    bystanders = enqueue_bystanders("after-database-process")
    run_burst(runworker)
    # The process wrote through a connection of its own; the child's own still works.
    assert_succeeded(task, [0, 1])
    assert_succeeded_once(bystanders)


@pytest.mark.parametrize("fail_in_copy", [False, True])
def test_a_forked_copy_returning_from_the_task_never_speaks_for_it(runworker, fail_in_copy):
    task = hostile_tasks.forks_and_returns_in_both.enqueue(fail_in_copy).record
    bystanders = enqueue_bystanders("after-fork")

    done = run_burst(runworker)

    # The child's own return is the result; the copy exited quietly (0 when it returned, 1 when
    # it raised) without recording or reporting anything.
    assert_succeeded(task, {"returned_by": "the child", "copy_exit_code": int(fail_in_copy)})
    assert "forked process returned from task, exiting" in done.stderr
    assert_succeeded_once(bystanders)
    assert "reply for another batch" not in done.stderr


def test_a_timed_out_task_takes_the_processes_it_started_with_it(runworker):
    task = hostile_tasks.hangs_with_a_subprocess.enqueue("hung").record
    bystanders = enqueue_bystanders("after-hung")

    run_burst(runworker)

    task.refresh_from_db()
    assert (task.status, task.attempts) == (Status.FAILED, 1)
    assert task.error_details[-1]["exception"] == "jobs.exceptions.TaskTimeout"
    sleeper = started_pid("hung")
    wait_for(lambda: not is_alive(sleeper), timeout=5, message="the task's process killed")
    assert_succeeded_once(bystanders)


def test_a_hung_task_is_stopped_and_the_worker_keeps_serving(runworker):
    task = tasks.hang.enqueue().record
    bystanders = enqueue_bystanders("after-hang")
    run_burst(runworker)
    task.refresh_from_db()
    assert (task.status, task.attempts) == (Status.FAILED, 1)
    assert task.error_details[-1]["exception"] == "jobs.exceptions.TaskTimeout"
    assert_succeeded_once(bystanders)


def test_a_memory_hog_is_stopped_and_the_worker_keeps_serving(runworker):
    task = tasks.grow_memory.enqueue().record
    bystanders = enqueue_bystanders("after-hog")
    run_burst(runworker, "--max-memory-per-child", "200")
    task.refresh_from_db()
    assert (task.status, task.attempts) == (Status.FAILED, 1)
    assert task.error_details[-1]["exception"] == "jobs.exceptions.MemoryLimitExceeded"
    assert_succeeded_once(bystanders)
    assert not Task.objects.running().exists()
    assert not SideEffect.objects.exclude(key__startswith="after-hog").exists()
