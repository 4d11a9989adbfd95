"""The context of a Django ``@task(takes_context=True)``: Django's TaskContext and jobs' in one."""

import dataclasses
import math

import pytest
from django.utils import timezone

import jobs
from jobs import transitions
from jobs.backends import TaskContext as DjangoTaskContextBase
from jobs.backends import TaskResultStatus, task_backends
from jobs.exceptions import PayloadError, TaskCancelled
from jobs.execution.context import TaskContext
from jobs.execution.django_context import DjangoTaskContext
from jobs.models import Task
from jobs.states import Status
from tests.factories import TaskFactory
from tests.helpers import run_next
from tests.testapp import django_tasks
from tests.testapp.models import SideEffect

pytestmark = pytest.mark.django_db


@pytest.fixture
def kept():
    django_tasks.kept_contexts.clear()
    django_tasks.kept_statuses.clear()
    yield django_tasks.kept_contexts
    django_tasks.kept_contexts.clear()
    django_tasks.kept_statuses.clear()


def test_the_context_is_djangos_and_jobs_with_the_task_result_intact(kept):
    result = django_tasks.keep_context.using(priority=7, queue_name="default").enqueue(
        2, "x", flag=True
    )
    run_next()
    (context,) = kept
    assert isinstance(context, DjangoTaskContextBase)
    assert isinstance(context, TaskContext)
    assert isinstance(context, jobs.TaskContext)
    task_result = context.task_result
    assert task_result.id == result.id
    assert django_tasks.kept_statuses == [TaskResultStatus.RUNNING]  # as the task ran
    # The attempt's one result, brought up to its success since (Django's ImmediateBackend too).
    assert task_result.status == TaskResultStatus.SUCCESSFUL
    assert task_result.finished_at == context.task.finished_at
    assert (task_result.args, task_result.kwargs) == ([2, "x"], {"flag": True})
    assert task_result.backend == "default"
    assert (task_result.task.priority, task_result.task.queue_name) == (7, "default")
    assert task_result.task.func is django_tasks.keep_context.func
    assert task_result.started_at is not None
    assert task_result.attempts == context.attempt == 1
    assert str(context.task.pk) == result.id
    # Still Django's frozen dataclass: its one field, read-only.
    assert [field.name for field in dataclasses.fields(context)] == ["task_result"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        context.task_result = None  # type: ignore[misc]


def test_progress_reaches_the_record_and_the_status_view():
    result = django_tasks.import_rows.enqueue(4)
    row = run_next()
    assert row.status == Status.SUCCEEDED
    assert (row.progress_current, row.progress_total, row.progress_percent) == (4, 4, 100)
    assert row.progress_message == "Imported 4 of 4 rows"
    assert row.result == {"attempt": 1, "attempts": 1}
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL


def test_an_async_task_reports_through_sync_to_async():
    django_tasks.import_rows_async.enqueue(3)
    row = run_next()
    assert (row.status, row.result) == (Status.SUCCEEDED, 1)
    assert (row.progress_current, row.progress_message) == (3, "Imported 3 of 3 rows")


def test_an_async_task_calls_its_context_directly_within_the_test_transaction():
    from tests.testapp import async_tasks

    async_tasks.django_attempt.enqueue(0.01)
    row = run_next()  # awaited alone: the context's writes on this thread's connection
    assert (row.status, row.result, row.progress_message) == (Status.SUCCEEDED, 1, "done")


def test_steps_are_recorded_and_a_retry_skips_them_counting_its_attempt():
    result = django_tasks.in_two_steps.enqueue("django-resume", fail_times=1)
    row = run_next()
    assert row.status == Status.RETRYING
    assert row.steps == {"first": {"value": 21}}
    Task.objects.filter(pk=row.pk).update(run_after=timezone.now())

    row = run_next()
    assert row.status == Status.SUCCEEDED
    assert row.result == {"result": 42, "attempt": 2}
    assert row.steps == {"first": {"value": 21}, "second": 42}
    assert SideEffect.objects.filter(key="django-resume:first").count() == 1
    result.refresh()
    assert (result.status, result.attempts) == (TaskResultStatus.SUCCESSFUL, 2)


def test_the_attempt_is_jobs_count_also_where_task_result_counts_fewer():
    """A cancelled attempt leaves no error record: Django's count, from them, misses it."""
    result = django_tasks.import_rows.enqueue(1)
    run_next()
    Task.objects.filter(pk=result.id).update(status=Status.CANCELLED)
    assert transitions.requeue(Task.objects.get(pk=result.id))
    row = run_next()
    assert row.result == {"attempt": 2, "attempts": 1}
    assert row.attempts == 2


def test_a_cancel_requested_while_it_runs_stops_it_at_its_next_checkpoint():
    result = django_tasks.in_two_steps.enqueue("django-cancel", cancel_after_first=True)
    row = run_next()
    assert row.status == Status.CANCELLED
    assert list(row.steps) == ["first"]  # the second step never started
    assert not SideEffect.objects.filter(key="django-cancel:second").exists()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[-1].exception_class_path == "jobs.exceptions.TaskCancelled"


# The same behaviour as jobs' context, hostile values included ---------------------------------


def contexts():
    """A Django task's row running, with jobs' context and the Django task's context on it."""
    result = django_tasks.multiply.enqueue(2, 3)
    Task.objects.filter(pk=result.id).update(
        status=Status.RUNNING, attempts=1, worker_id="test-worker", started_at=timezone.now()
    )
    row = Task.objects.get(pk=result.id)
    django_context = DjangoTaskContext(task_backends["default"].get_result(result.id), row)
    return TaskContext(Task.objects.get(pk=result.id)), django_context


def stored_progress(context):
    read = Task.objects.get(pk=context.task.pk)
    return read.progress_current, read.progress_total, read.progress_message


@pytest.mark.parametrize(
    ("current", "total", "message"),
    [
        (math.nan, 10, "nan"),
        (1, math.inf, "inf"),
        (True, 10, "a bool"),
        ("3", 10, "a str"),
        (None, 10, "None"),
        (-5, 10, "negative"),
        (3_000_000_000, 6_000_000_000, "bytes"),
        (1, 2, "a\x00b \ud800"),
        (1, 2, "x" * 300),
    ],
)
def test_hostile_progress_is_refused_or_mended_as_by_jobs_context(current, total, message):
    outcomes = []
    for context in contexts():
        try:
            context.progress(current, total, message, force=True)
        except PayloadError as exc:
            outcomes.append(("refused", str(exc), stored_progress(context)))
        else:
            outcomes.append(("stored", None, stored_progress(context)))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("name", ["", "a\x00b", "x" * 201, 7])
def test_a_hostile_step_name_is_refused_as_by_jobs_context(name):
    errors = []
    for context in contexts():
        with pytest.raises(PayloadError) as raised:
            context.step(name, pytest.fail, "a refused step must not run")
        errors.append(str(raised.value))
    assert errors[0] == errors[1]


def test_a_step_result_that_is_not_json_is_refused_and_nothing_recorded():
    _, context = contexts()
    with pytest.raises(PayloadError, match="the result of step 'bad'"):
        context.step("bad", object)
    assert Task.objects.get(pk=context.task.pk).steps == {}


def test_a_progress_report_after_a_cancel_request_raises_task_cancelled():
    _, context = contexts()
    Task.objects.filter(pk=context.task.pk).update(cancel_requested_at=timezone.now())
    assert context.cancel_requested() is True
    with pytest.raises(TaskCancelled):
        context.progress(1, 10, force=True)


def test_an_attempt_taken_over_by_another_worker_writes_nothing():
    _, context = contexts()
    Task.objects.filter(pk=context.task.pk).update(attempts=2)
    context.progress(7, 10, "stale", force=True)
    context.mark_result_public()
    read = Task.objects.get(pk=context.task.pk)
    assert (read.progress_current, read.result_public) == (0, False)


def test_a_context_of_jobs_own_task_is_not_a_django_one():
    assert not isinstance(TaskContext(TaskFactory(running=True)), DjangoTaskContextBase)
