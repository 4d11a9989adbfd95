"""TaskContext: throttled progress, recorded steps that a retry skips, cancellation."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs import task
from jobs.exceptions import PayloadError, TaskCancelled
from jobs.execution.context import TaskContext
from jobs.models import Task
from jobs.states import Status
from tests.factories import TaskFactory
from tests.helpers import run_next
from tests.testapp.models import SideEffect

pytestmark = pytest.mark.django_db

SAVEPOINT_COUNT = re.compile(r"_x\d+")


@task(takes_context=True, max_attempts=3)
def stepwise(context, key, fail_times=0, cancel_after_first=False):
    """Two recorded steps; the second fails transiently its first ``fail_times`` times."""

    def first():
        SideEffect.objects.create(key=f"{key}:first")
        return {"value": 21}

    def second(value):
        SideEffect.objects.create(key=f"{key}:second")
        if SideEffect.objects.filter(key=f"{key}:second").count() <= fail_times:
            raise ConnectionResetError("the service hung up")
        return value * 2

    value = context.step("first", first)["value"]
    if cancel_after_first:  # as if the owner pressed Cancel while the first step ran
        Task.objects.filter(pk=context.task.pk).update(cancel_requested_at=timezone.now())
    return context.step("second", second, value)


class FakeClock:
    """A monotonic clock that moves only when told, so the throttle is tested without sleeping."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def progress_updates(queries):
    return [
        q["sql"]
        for q in queries
        if q["sql"].startswith("UPDATE") and "progress_current" in q["sql"]
    ]


def test_a_tight_loop_of_reports_costs_at_most_four_writes_a_second():
    task = TaskFactory(running=True)
    clock = FakeClock()
    context = TaskContext(task, clock=clock)
    with CaptureQueriesContext(connection) as captured:
        # 10,000 reports over 10 simulated seconds, one every millisecond.
        for i in range(10_000):
            context.progress(i, 10_000, f"Row {i}")
            clock.now += 0.001
    writes = progress_updates(captured.captured_queries)
    assert 35 <= len(writes) <= 41  # 4 a second, plus the first
    task.refresh_from_db()
    assert task.progress_current >= 9_750  # the last throttled write, not the first


def test_the_report_that_completes_the_work_always_lands():
    task = TaskFactory(running=True)
    context = TaskContext(task, clock=FakeClock())
    context.progress(1, 10)
    with CaptureQueriesContext(connection) as captured:
        context.progress(5, 10, "halfway")  # throttled: same instant
        context.progress(10, 10, "Imported 10 of 10 rows")
    assert len(progress_updates(captured.captured_queries)) == 1
    task.refresh_from_db()
    assert (task.progress_current, task.progress_total) == (10, 10)
    assert task.progress_message == "Imported 10 of 10 rows"
    assert task.progress_percent == 100


def test_progress_of_an_attempt_taken_over_by_another_worker_is_not_written():
    task = TaskFactory(running=True)
    context = TaskContext(task, clock=FakeClock())
    Task.objects.filter(pk=task.pk).update(attempts=2)
    context.progress(7, 10, "stale")
    task.refresh_from_db()
    assert task.progress_current == 0


def test_a_progress_write_is_a_cancellation_checkpoint():
    task = TaskFactory(running=True, cancel_requested_at=timezone.now())
    context = TaskContext(task, clock=FakeClock())
    with pytest.raises(TaskCancelled):
        context.progress(1, 10)


def test_a_running_task_cancelled_stops_at_its_next_checkpoint_and_ends_cancelled():
    task = stepwise.enqueue("cancel-me", cancel_after_first=True).record
    task = run_next()
    assert task.status == Status.CANCELLED
    # The first step ran and was recorded; the second never started.
    assert list(task.steps) == ["first"]
    assert SideEffect.objects.filter(key="cancel-me:second").count() == 0


def test_steps_are_recorded_and_a_retry_skips_them_and_reuses_their_results():
    task = stepwise.enqueue("resume", fail_times=1).record
    task = run_next()
    assert task.status == Status.RETRYING
    assert task.steps == {"first": {"value": 21}}
    Task.objects.filter(pk=task.pk).update(run_after=timezone.now())

    task = run_next()
    assert task.status == Status.SUCCEEDED
    assert task.attempts == 2
    assert task.result == 42  # the second step used the first's recorded result
    assert task.steps == {"first": {"value": 21}, "second": 42}
    # The first step's work happened once; the second step ran in both attempts.
    assert SideEffect.objects.filter(key="resume:first").count() == 1
    assert SideEffect.objects.filter(key="resume:second").count() == 2


def test_a_step_whose_result_is_not_json_fails_the_task_plainly():
    task = TaskFactory(running=True)
    context = TaskContext(task)
    with pytest.raises(PayloadError, match="the result of step 'bad'"):
        context.step("bad", object)
    task.refresh_from_db()
    assert task.steps == {}


def test_a_task_can_mark_its_result_public():
    task = TaskFactory(running=True)
    TaskContext(task).mark_result_public()
    task.refresh_from_db()
    assert task.result_public is True


def test_completed_steps_are_read_back_from_the_record_by_a_new_attempt():
    task = TaskFactory(running=True, steps={"validate": {"rows": 3}})
    context = TaskContext(Task.objects.get(pk=task.pk))
    assert context.completed_steps == {"validate": {"rows": 3}}
    assert context.step("validate", pytest.fail, "a recorded step must not run again") == {
        "rows": 3
    }


def test_recording_a_step_costs_the_same_whatever_the_number_before_it():
    """Each step writes its own row: the statements of the 500th step are those of the 1st."""
    task = TaskFactory(running=True)
    context = TaskContext(task)

    def statements_of_step(number):
        with CaptureQueriesContext(connection) as queries:
            context.step(f"step:{number:05d}", lambda: {"rows": number % 10})
        # Savepoint names count on over the whole session ("s<thread>_x<n>"): from 999 to 1000
        # a name grows by a digit, whichever earlier tests ran. Compare them without the count.
        return [SAVEPOINT_COUNT.sub("_x", query["sql"]) for query in queries.captured_queries]

    first = statements_of_step(1)
    for number in range(2, 500):
        context.step(f"step:{number:05d}", lambda: {"rows": 1})
    last = statements_of_step(500)
    assert len(last) == len(first)
    assert [len(sql) for sql in last] == [len(sql) for sql in first]
    assert len(task.steps) == 500
