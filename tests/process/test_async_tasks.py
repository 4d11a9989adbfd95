"""Async tasks on a worker child's event loop: together, under their timeouts, cancellable."""

import signal
import time

import pytest

from jobs import transitions
from jobs.models import Task
from jobs.states import Status
from tests.conftest import terminating_worker_connections, wait_for
from tests.process.test_reliability import FAST, status_of, until_started, until_status
from tests.testapp import async_tasks, tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]


def overlap(intervals) -> bool:
    """Whether every interval ``[start, end]`` overlaps every other."""
    return max(start for start, _ in intervals) < min(end for _, end in intervals)


def test_async_tasks_of_both_kinds_run_together_in_one_child(runworker):
    naps = [async_tasks.nap.enqueue(n, 1.0).record for n in range(20)]
    django = [async_tasks.django_nap.enqueue(1.0) for _ in range(5)]
    with_context = async_tasks.django_attempt.enqueue(0.2)
    sync = tasks.add.enqueue(2, 3).record
    started = time.monotonic()
    done = runworker("--burst", "--concurrency", "1")
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 15  # one at a time: 25 s of naps
    results = [Task.objects.get(pk=t.pk) for t in naps]
    assert {t.status for t in results} == {Status.SUCCEEDED}
    # The worker's first claim takes a task per child (it cannot tell what it will find): the
    # first ran alone, then the others together.
    intervals = sorted((t.result[1], t.result[2]) for t in results)
    assert overlap(intervals[1:])
    assert len({t.result[3] for t in results}) == 1  # one child
    for result in django:
        row = Task.objects.get(pk=result.id)
        assert row.status == Status.SUCCEEDED
    assert overlap(sorted(tuple(Task.objects.get(pk=r.id).result[:2]) for r in django)[1:])
    row = Task.objects.get(pk=with_context.id)
    assert (row.status, row.result, row.progress_message) == (Status.SUCCEEDED, 1, "done")
    assert async_tasks.django_nap.get_result(django[0].id).status.name == "SUCCESSFUL"
    assert status_of(sync) == Status.SUCCEEDED


def test_async_tasks_that_raise_fail_alone(runworker):
    failing = async_tasks.raises.enqueue().record
    exiting = async_tasks.exits.enqueue().record
    naps = [async_tasks.nap.enqueue(n, 0.5).record for n in range(5)]
    done = runworker("--burst", "--concurrency", "1")
    assert done.returncode == 0, done.stderr
    failing, exiting = Task.objects.get(pk=failing.pk), Task.objects.get(pk=exiting.pk)
    assert failing.status == Status.FAILED
    assert failing.error_details[-1]["exception"] == "builtins.ValueError"
    assert exiting.status == Status.FAILED
    assert exiting.error_details[-1]["exception"] == "builtins.SystemExit"
    assert {status_of(t) for t in naps} == {Status.SUCCEEDED}
    assert "child exited" not in done.stderr  # retired after its batch, not crashed


def test_an_async_task_past_its_timeout_is_cancelled_its_siblings_finish(runworker):
    async_tasks.nap.enqueue("first", 0.2)  # runs alone: then a batch of the others
    late = async_tasks.overruns.enqueue().record
    naps = [async_tasks.nap.enqueue(n, 1.5).record for n in range(5)]
    done = runworker("--burst", "--concurrency", "1")
    assert done.returncode == 0, done.stderr
    late = Task.objects.get(pk=late.pk)
    assert late.status == Status.FAILED
    assert late.error_details[-1]["exception"] == "jobs.exceptions.TaskTimeout"
    assert "longer than its timeout of 0.5 seconds" in late.last_error
    assert {status_of(t) for t in naps} == {Status.SUCCEEDED}
    assert "child exited" not in done.stderr  # the loop cancelled it: no kill


def test_a_task_blocking_the_loop_is_killed_its_siblings_retried(runworker):
    async_tasks.nap.enqueue("first", 0.2)  # runs alone: then a batch of the others
    blocker = async_tasks.blocks_the_loop.enqueue().record
    naps = [async_tasks.nap.enqueue(n, 3).record for n in range(4)]
    done = runworker("--burst", "--concurrency", "1", env=FAST, timeout=90)
    assert done.returncode == 0, done.stderr
    assert "reason=timeout" in done.stderr
    blocker = Task.objects.get(pk=blocker.pk)
    assert blocker.status == Status.FAILED
    assert blocker.error_details[-1]["exception"] == "jobs.exceptions.TaskTimeout"
    for nap in naps:
        nap = Task.objects.get(pk=nap.pk)
        # Lost with the child, the attempt counted and its error recorded: to run again (a
        # burst worker does not wait for the retry).
        assert (nap.status, nap.attempts) == (Status.RETRYING, 1), nap.error_details
        assert nap.error_details[0]["exception"] == "jobs.exceptions.WorkerCrashed"


def test_cancel_of_an_async_task_that_checks(start_worker):
    task = async_tasks.checks_for_cancel.enqueue().record
    naps = [async_tasks.nap.enqueue(n, 3).record for n in range(3)]
    worker = start_worker("--concurrency", "1", env=FAST)
    until_started(worker, task)
    transitions.cancel(Task.objects.get(pk=task.pk))
    until_status(task, Status.CANCELLED, timeout=10)
    for nap in naps:
        until_status(nap, Status.SUCCEEDED, timeout=15)
    assert "child exited" not in worker.output


def test_cancel_of_an_async_task_awaiting_cancels_its_coroutine_alone(start_worker):
    task = async_tasks.awaits_forever.enqueue().record
    naps = [async_tasks.nap.enqueue(n, 5).record for n in range(3)]
    worker = start_worker("--concurrency", "1", env=FAST)
    until_started(worker, task)
    transitions.cancel(Task.objects.get(pk=task.pk))
    until_status(task, Status.CANCELLED, timeout=10)
    for nap in naps:
        nap = until_status(nap, Status.SUCCEEDED, Status.RETRYING, timeout=15)
        assert (nap.status, nap.attempts) == (Status.SUCCEEDED, 1)
    assert "child exited" not in worker.output


def test_an_awaiting_async_task_is_cancelled_at_the_next_heartbeat_not_after_the_grace(
    start_worker,
):
    """An ``await`` is an async task's checkpoint: no need to wait out the grace."""
    task = async_tasks.awaits_forever.enqueue().record
    worker = start_worker("--concurrency", "1", env={**FAST, "JOBS_CANCEL_GRACE": "60"})
    until_started(worker, task)
    transitions.cancel(Task.objects.get(pk=task.pk))
    until_status(task, Status.CANCELLED, timeout=10)  # the grace is 60 s
    assert "child exited" not in worker.output


def test_an_async_task_swallowing_its_cancellation_is_killed(start_worker):
    async_tasks.nap.enqueue("first", 0.2)  # runs alone: then a batch of the others
    beside = async_tasks.nap.enqueue("beside", 30).record  # started first: its deadline first
    task = async_tasks.swallows_cancel.enqueue().record
    after = tasks.add.enqueue(3, 3).record
    worker = start_worker("--concurrency", "1", env=FAST)
    until_started(worker, task)
    until_started(worker, beside)
    transitions.cancel(Task.objects.get(pk=task.pk))
    until_status(task, Status.CANCELLED, timeout=20)
    until_status(after, Status.SUCCEEDED, timeout=15)
    assert "reason=cancel" in worker.output
    # Killed with it, not cancelled: lost, to run again.
    beside = until_status(beside, Status.RETRYING, Status.RUNNING, timeout=15)
    assert beside.error_details[0]["exception"] == "jobs.exceptions.WorkerCrashed"


def test_sigterm_lets_running_async_tasks_finish_within_grace(start_worker):
    naps = [async_tasks.nap.enqueue(n, 2).record for n in range(10)]
    worker = start_worker("--grace", "20", "--concurrency", "1", env=FAST)
    for nap in naps:
        until_started(worker, nap)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output
    assert {status_of(t) for t in naps} == {Status.SUCCEEDED}
    assert "child exited" not in worker.output


def test_async_tasks_survive_their_childs_connection_being_terminated(start_worker, postgres_only):
    work = [async_tasks.reports_progress.enqueue(15).record for _ in range(40)]
    worker = start_worker("--concurrency", "2", env={"JOBS_LOG_LEVEL": "INFO"})
    with terminating_worker_connections(every=0.5):
        ids = [t.pk for t in work]
        wait_for(
            lambda: Task.objects.filter(pk__in=ids, status=Status.SUCCEEDED).count() == len(ids),
            timeout=60, interval=0.2, message="every async task to succeed",
        )  # fmt: skip
    assert worker.process.poll() is None, worker.output  # still serving
    assert Task.objects.filter(pk__in=ids, progress_message="step 15").count() == len(ids)
    # The child's writes met the terminated connection: retried, or the attempt retried.
    assert "database fault" in worker.output
