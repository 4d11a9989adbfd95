"""What Django's own test suite for task backends expects, asked of jobs' DatabaseBackend.

Each test adapts the backend-agnostic part of a test in Django's tests/tasks/ (test_tasks.py,
test_immediate_backend.py) or of the django-tasks backport's tests/tests/test_database_backend.py,
named in its docstring; they run on Django 6 (django.tasks) and Django 5.2 (the backport). The
tests with a worker's real children are in tests/process/test_django_contract.py.
"""

import dataclasses
import logging
from datetime import datetime, timedelta

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from jobs.backends import TaskResultDoesNotExist, TaskResultStatus, task_finished
from jobs.exceptions import PayloadError
from jobs.models import Task
from jobs.states import Status
from jobs.tasks.enqueueing import enqueue_many
from tests import helpers
from tests.helpers import run_next
from tests.testapp import django_tasks as test_tasks
from tests.testapp.tasks import add

try:  # Django >= 6.0
    from django.tasks import default_task_backend, task_backends
    from django.tasks.exceptions import TaskResultMismatch

    DJANGO_TASKS_LOGGER = "django.tasks"
except ImportError:  # Django 5.2 with the django-tasks backport
    from django_tasks import default_task_backend, task_backends  # type: ignore[no-redef]
    from django_tasks.exceptions import TaskResultMismatch  # type: ignore[no-redef]

    DJANGO_TASKS_LOGGER = "django_tasks"

pytestmark = pytest.mark.django_db

TWO_BACKENDS = {
    "default": {"BACKEND": "jobs.backends.DatabaseBackend"},
    "other": {"BACKEND": "jobs.backends.DatabaseBackend"},
}


@pytest.fixture
def finished_results():
    """The results Django's task_finished is sent with, in this process."""
    seen = []

    def receiver(sender, task_result, **kwargs):
        seen.append(task_result)

    task_finished.connect(receiver)
    yield seen
    task_finished.disconnect(receiver)


# Enqueue ----------------------------------------------------------------------------------------


def test_enqueue_with_invalid_argument():
    """test_tasks.TaskTestCase.test_enqueue_with_invalid_argument: a TypeError (jobs' own
    PayloadError, a ValueError too), and nothing stored."""
    with pytest.raises(TypeError, match="is not JSON") as raised:
        test_tasks.noop_task.enqueue(datetime.now())
    assert isinstance(raised.value, PayloadError | ValueError)
    with pytest.raises(TypeError):
        test_tasks.noop_task.enqueue(when={"at": object()})
    assert not Task.objects.exists()


def test_aenqueue_with_invalid_argument():
    """test_tasks.TaskTestCase.test_aenqueue_with_invalid_argument."""
    with pytest.raises(TypeError, match="is not JSON"):
        async_to_sync(test_tasks.noop_task.aenqueue)(datetime.now())
    assert not Task.objects.exists()


def test_enqueue_task():
    """test_tasks.TaskTestCase.test_enqueue_task and test_enqueue_task_async."""
    for task in (test_tasks.noop_task, test_tasks.noop_task_async):
        result = task.enqueue(1, two=3)
        assert result.status == TaskResultStatus.READY
        assert result.is_finished is False
        assert result.task == task
        assert (result.args, result.kwargs) == ([1], {"two": 3})
        assert result.task.run_after is None  # not deferred


# Running ----------------------------------------------------------------------------------------


def test_enqueue_and_run_task():
    """test_immediate_backend.test_enqueue_task: the outcome once a worker ran it."""
    for task in (test_tasks.noop_task, test_tasks.noop_task_async):
        result = task.enqueue(1, two=3)
        run_next()
        result.refresh()
        assert result.status == TaskResultStatus.SUCCESSFUL
        assert result.is_finished is True
        assert None not in (result.started_at, result.last_attempted_at, result.finished_at)
        assert result.enqueued_at <= result.started_at <= result.finished_at
        assert result.return_value is None
        assert result.task == task
        assert (result.args, result.kwargs, result.attempts) == ([1], {"two": 3}, 1)


def test_result():
    """test_immediate_backend.test_result and test_result_async."""
    result = default_task_backend.enqueue(test_tasks.calculate_meaning_of_life, [], {})
    run_next()
    assert default_task_backend.get_result(result.id).return_value == 42
    fetched = async_to_sync(default_task_backend.aget_result)(result.id)
    assert (fetched.status, fetched.return_value) == (TaskResultStatus.SUCCESSFUL, 42)


@pytest.mark.parametrize(
    ("task", "exception", "message"),
    [
        (test_tasks.failing_task_value_error, ValueError, "This task failed due to ValueError"),
        (test_tasks.failing_task_system_exit, SystemExit, "This task failed due to SystemExit"),
    ],
)
def test_catches_exception(task, exception, message, caplog, finished_results):
    """test_immediate_backend.test_catches_exception: Django's failed-task log line carries the
    exception (task_finished is sent while it is handled), and so does jobs' own line; the error
    is recorded with its traceback, task_finished sent once, FAILED."""
    result = task.enqueue()
    with caplog.at_level(logging.ERROR):
        run_next()
    (django_line,) = [r for r in caplog.records if r.name == DJANGO_TASKS_LOGGER]
    assert django_line.levelno == logging.ERROR
    assert django_line.exc_info
    assert django_line.exc_info[0] is exception
    assert message in caplog.text.split(django_line.getMessage())[1]  # the traceback after it
    (jobs_line,) = [r for r in caplog.records if r.name.startswith("jobs.")]
    assert jobs_line.levelno == logging.ERROR
    assert message in jobs_line.getMessage()
    assert exception.__name__ in jobs_line.getMessage()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018
    assert result.is_finished is True
    assert result.enqueued_at <= result.started_at <= result.finished_at
    assert result.errors[0].exception_class is exception
    assert result.errors[0].traceback.endswith(f"{exception.__name__}: {message}\n")
    assert (result.task, result.args, result.kwargs) == (task, [], {})
    assert [r.status for r in finished_results] == [TaskResultStatus.FAILED]


def test_complex_exception():
    """test_immediate_backend.test_complex_exception."""
    result = test_tasks.complex_exception.using().enqueue()
    Task.objects.filter(pk=result.id).update(max_attempts=1)
    run_next()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result._return_value is None
    assert result.errors[0].exception_class is ValueError
    assert 'ValueError(ValueError("This task failed"))' in result.errors[0].traceback


def test_complex_return_value(finished_results, caplog):
    """test_immediate_backend.test_complex_return_value: a return value that is not JSON fails
    the task with a TypeError, at once (another attempt would return the same); Django's failed
    line carries that TypeError, as for an exception the task raised."""
    result = test_tasks.complex_return_value.enqueue()
    with caplog.at_level(logging.ERROR):
        run_next()
    (django_line,) = [r for r in caplog.records if r.name == DJANGO_TASKS_LOGGER]
    assert django_line.exc_info
    assert django_line.exc_info[0] is TypeError
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.attempts == 1
    assert result._return_value is None
    assert result.errors[0].exception_class is TypeError
    assert "return value is builtin_function_or_method" in result.errors[0].traceback
    row = Task.objects.get(pk=result.id)
    assert row.last_error.startswith("the task's return value")
    assert row.error_details[-1]["permanent"] is True  # no retry from the status page either
    assert [r.status for r in finished_results] == [TaskResultStatus.FAILED]


def test_takes_context():
    """test_immediate_backend.test_takes_context and test_context."""
    result = test_tasks.get_task_id.enqueue()
    run_next()
    result.refresh()
    assert result.return_value == result.id
    checked = test_tasks.check_context.enqueue(1)
    run_next()
    checked.refresh()
    assert checked.status == TaskResultStatus.SUCCESSFUL


# task_finished ------------------------------------------------------------------------------------


def test_task_finished_is_sent_for_finished_results_only(finished_results):
    """The backport's test_signals (test_failed_task_signals): task_finished says the task
    finished; a failed attempt that will be retried is not a finish."""
    result = test_tasks.unavailable.enqueue()
    Task.objects.filter(pk=result.id).update(max_attempts=2)
    run_next()
    assert Task.objects.get(pk=result.id).status == Status.RETRYING
    assert default_task_backend.get_result(result.id).status == TaskResultStatus.READY
    assert finished_results == []
    Task.objects.filter(pk=result.id).update(run_after=timezone.now())
    run_next()
    assert [(r.id, r.status) for r in finished_results] == [(result.id, TaskResultStatus.FAILED)]
    assert finished_results[0].is_finished
    assert len(finished_results[0].errors) == 2


# get_result ---------------------------------------------------------------------------------------


def test_get_result():
    """test_tasks.TaskTestCase.test_get_result and test_get_result_async: what get_result
    returns equals what enqueue returned, deferred or not."""
    later = timezone.now() + timedelta(hours=1)
    for task in (test_tasks.noop_task, test_tasks.noop_task.using(run_after=later)):
        result = default_task_backend.enqueue(task, (), {})
        assert test_tasks.noop_task.get_result(result.id) == result
        assert async_to_sync(test_tasks.noop_task.aget_result)(result.id) == result


def test_get_result_returns_run_after_as_enqueued():
    """The backport's test_database_backend (test_enqueue_task: run_after): None for a task due
    at once, the datetime for a deferred one."""
    later = timezone.now() + timedelta(minutes=5)
    deferred = test_tasks.noop_task.using(run_after=later).enqueue()
    assert deferred.task.run_after == later
    assert default_task_backend.get_result(deferred.id).task.run_after == later
    at_once = test_tasks.noop_task.enqueue()
    assert default_task_backend.get_result(at_once.id).task.run_after is None


def test_refresh_result():
    """test_tasks.TaskTestCase.test_refresh_result."""
    result = test_tasks.noop_task.using(run_after=timezone.now()).enqueue()
    original = dataclasses.asdict(result)
    result.refresh()
    assert dataclasses.asdict(result) == original
    async_to_sync(result.arefresh)()
    assert dataclasses.asdict(result) == original


def test_get_missing_result():
    """test_tasks.TaskTestCase.test_get_missing_result."""
    with pytest.raises(TaskResultDoesNotExist):
        test_tasks.noop_task.get_result("123")
    with pytest.raises(TaskResultDoesNotExist):
        async_to_sync(test_tasks.noop_task.aget_result)("123")


def test_get_incorrect_result():
    """test_tasks.TaskTestCase.test_get_incorrect_result."""
    result = default_task_backend.enqueue(test_tasks.noop_task_async, (), {})
    with pytest.raises(TaskResultMismatch, match="Task does not match"):
        test_tasks.noop_task.get_result(result.id)


def test_get_result_of_a_task_that_no_longer_exists():
    """The backport's test_database_backend.test_invalid_task_path: a row whose function was
    renamed or removed is no result."""
    result = test_tasks.noop_task.enqueue()
    Task.objects.filter(pk=result.id).update(name="tests.testapp.django_tasks.removed")
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(result.id)
    Task.objects.filter(pk=result.id).update(name="subprocess.check_output")  # not a Task
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(result.id)


def test_get_result_from_jobs_own_task_is_no_result():
    """A task of jobs' own registry in the same table is no Django Tasks result."""
    own = add.enqueue(1, 2).record
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(str(own.pk))


def test_get_result_honours_the_backend_alias(settings):
    """The backport's test_database_backend (get_result with another backend's alias): each
    alias returns its own results, not another's."""
    settings.TASKS = TWO_BACKENDS
    result = test_tasks.noop_task.using(backend="other").enqueue()
    assert Task.objects.get(pk=result.id).backend == "other"
    assert task_backends["other"].get_result(result.id) == result
    with pytest.raises(TaskResultDoesNotExist):
        task_backends["default"].get_result(result.id)
    result.refresh()  # through its own backend
    assert result.backend == "other"


# Claim order --------------------------------------------------------------------------------------


def test_equal_priority_and_due_time_run_in_enqueue_order():
    """Adapts test_tasks.test_task_result_comparability_in_priority_queue to a queue in a
    table: higher priority first, then earlier due, then enqueue order, by rule."""
    due = timezone.now() - timedelta(minutes=1)
    same = test_tasks.noop_task.using(run_after=due)
    enqueued = [same.enqueue(n).id for n in range(12)]
    high = test_tasks.noop_task.using(priority=5, run_after=due + timedelta(seconds=1)).enqueue()
    earlier = test_tasks.noop_task.using(run_after=due - timedelta(seconds=1)).enqueue()
    order = [str(t.pk) for t in helpers.claim("w", 20, lease_seconds=30)]
    assert order == [high.id, earlier.id, *enqueued]


def test_one_by_one_claims_follow_enqueue_order_too():
    """The same rule across claims, and for the calls of one enqueue_many (one created_at)."""
    ids = enqueue_many(add, [((n, n), {}) for n in range(30)])
    taken = [str(helpers.claim("w", 1, lease_seconds=30)[0].pk) for _ in range(30)]
    assert taken == [str(task_id) for task_id in ids]
