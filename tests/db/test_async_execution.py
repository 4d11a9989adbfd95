"""Async tasks: awaited alone by the executor, or together on one loop (``jobs.execution.aio``),
their bookkeeping and their context's database calls made on the loop's thread."""

import asyncio
import time

import pytest
from django.utils import timezone

from jobs.execution import aio, executor
from jobs.models import Task
from jobs.states import Status
from tests.helpers import claim, run_next
from tests.testapp import async_tasks, tasks

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_async_task_run_alone_is_awaited():
    async_tasks.nap.enqueue("alone", 0.01)
    task = run_next()
    assert task.status == Status.SUCCEEDED
    assert task.result[0] == "alone"


def test_a_django_async_task_run_alone_is_awaited():
    result = async_tasks.django_attempt.enqueue(0.01)
    task = run_next()
    assert (str(task.pk), task.status, task.result) == (result.id, Status.SUCCEEDED, 1)
    assert task.progress_message == "done"  # its context wrote from the loop's thread


def test_runnables_say_whether_they_are_async():
    assert executor.resolve(Task(name=async_tasks.nap.module_path)).is_async
    assert executor.is_async_task(async_tasks.nap.module_path)
    assert executor.is_async_task(async_tasks.django_nap.module_path, "default")
    assert not executor.is_async_task(tasks.add.module_path)


def run_together(*timeouts, cancel=()):
    """Claim the due tasks and run them together on one loop; their outcomes, in order.
    ``cancel``: indices whose coroutine is cancelled after 0.1 s, as a cancel request does."""
    claimed = claim("test-worker", 100, lease_seconds=30, now=timezone.now())
    claimed.sort(key=lambda task: task.created_at)

    async def main():
        cancellations = [aio.Cancellation() for _ in claimed]
        runs = []
        for n, task in enumerate(claimed):
            timeout = timeouts[n] if n < len(timeouts) else None
            run = aio.run_async(
                task, executor.resolve(task), timeout=timeout, cancellation=cancellations[n]
            )
            runs.append(asyncio.ensure_future(run))
        await asyncio.sleep(0.1)
        for n in cancel:
            cancellations[n].requested = True
            runs[n].cancel()
        return await asyncio.gather(*runs)

    outcomes = asyncio.run(main())
    return outcomes, [Task.objects.get(pk=task.pk) for task in claimed]


def test_async_tasks_run_together_and_record_their_outcomes():
    for n in range(10):
        async_tasks.nap.enqueue(n, 0.3)
    async_tasks.raises.enqueue()
    async_tasks.checks_for_cancel.enqueue()  # writes progress from the loop
    loop_started = time.time()
    Task.objects.filter(name=async_tasks.checks_for_cancel.module_path).update(
        cancel_requested_at=timezone.now()
    )
    outcomes, rows = run_together()
    kinds = [outcome.kind for outcome in outcomes]
    assert kinds == [Status.SUCCEEDED] * 10 + [Status.FAILED, Status.CANCELLED]
    assert [row.status for row in rows] == kinds
    starts = [row.result[1] for row in rows[:10]]
    assert max(starts) - min(starts) < 0.25  # together, not one after the other
    assert min(starts) >= loop_started
    assert rows[10].error_details[-1]["exception"] == "builtins.ValueError"


def test_a_task_past_its_timeout_records_a_timeout_its_siblings_succeed():
    async_tasks.overruns.enqueue()
    async_tasks.nap.enqueue("sibling", 0.3)
    _outcomes, (late, sibling) = run_together(0.2)
    assert late.status == Status.FAILED
    assert late.error_details[-1]["exception"] == "jobs.exceptions.TaskTimeout"
    assert late.last_error == "The task ran longer than its timeout of 0.2 seconds."
    assert sibling.status == Status.SUCCEEDED


def test_a_timeout_error_the_task_raises_is_its_own():
    async_tasks.raises_timeout_error.enqueue()
    _outcomes, (row,) = run_together(30)
    assert row.error_details[-1]["exception"] == "builtins.TimeoutError"


def test_a_cancelled_coroutine_records_a_cancellation():
    async_tasks.awaits_forever.enqueue()
    async_tasks.nap.enqueue("sibling", 0.3)
    _outcomes, (cancelled, sibling) = run_together(cancel=[0])
    assert cancelled.status == Status.CANCELLED
    assert sibling.status == Status.SUCCEEDED


def test_a_cancellation_nobody_asked_for_propagates():
    async_tasks.awaits_forever.enqueue()
    (task,) = claim("test-worker", 1, lease_seconds=30, now=timezone.now())

    async def main():
        cancellation = aio.Cancellation()
        run = asyncio.ensure_future(
            aio.run_async(task, executor.resolve(task), timeout=None, cancellation=cancellation)
        )
        await asyncio.sleep(0.05)
        run.cancel()
        await run

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(main())
    assert Task.objects.get(pk=task.pk).status == Status.RUNNING  # the lease decides


def test_system_exit_from_an_async_task_ends_it_not_the_loop():
    async_tasks.exits.enqueue()
    async_tasks.nap.enqueue("sibling", 0.3)
    outcomes, (exited, sibling) = run_together()
    assert exited.status == Status.FAILED
    assert outcomes[0].unsettled == "the task raised builtins.SystemExit"
    assert sibling.status == Status.SUCCEEDED


@pytest.mark.parametrize(
    ("timeout", "text"),
    [
        (1, "1 second"),
        (1.0, "1 second"),
        (0.5, "0.5 seconds"),
        (2, "2 seconds"),
        (600, "600 seconds"),
    ],
)
def test_the_timeout_message_counts_its_seconds_in_words(timeout, text):
    assert str(aio.timeout_error(timeout)) == f"The task ran longer than its timeout of {text}."
