import pytest
from django.utils import timezone

from jobs.backends import STATUS_MAP, TaskResultDoesNotExist, TaskResultStatus
from jobs.models import Task
from jobs.states import Status
from tests import helpers
from tests.helpers import run_next
from tests.testapp import django_tasks

pytestmark = pytest.mark.django_db


def test_django_task_is_stored_in_the_jobs_table():
    result = django_tasks.multiply.using(priority=5).enqueue(6, 7)
    row = Task.objects.get(pk=result.id)
    assert row.name == "tests.testapp.django_tasks.multiply"
    assert row.backend == "default"
    assert row.priority == 5
    assert row.payload == {"args": [6, 7], "kwargs": {}}
    assert result.status == TaskResultStatus.READY


def test_worker_runs_it_and_get_result_reports_success():
    result = django_tasks.multiply.enqueue(6, 7)
    run_next()
    fetched = django_tasks.multiply.get_result(result.id)
    assert fetched.status == TaskResultStatus.SUCCESSFUL
    assert fetched.return_value == 42
    assert fetched.attempts == 1
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL


def test_context_is_passed_to_tasks_that_take_it():
    result = django_tasks.which_attempt.enqueue()
    run_next()
    assert django_tasks.which_attempt.get_result(result.id).return_value == 1


def test_failure_is_reported_with_the_exception():
    result = django_tasks.explode.enqueue()
    run_next()
    fetched = django_tasks.explode.get_result(result.id)
    assert fetched.status == TaskResultStatus.FAILED
    assert fetched.errors[0].exception_class is ValueError
    assert "boom" in fetched.errors[0].traceback


def test_run_after_is_honoured():
    later = timezone.now() + timezone.timedelta(hours=1)
    result = django_tasks.multiply.using(run_after=later).enqueue(1, 1)
    assert Task.objects.get(pk=result.id).run_after == later
    assert helpers.claim("w", 1, lease_seconds=30) == []


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (Status.PENDING, "READY"),
        (Status.RETRYING, "READY"),
        (Status.RUNNING, "RUNNING"),
        (Status.SUCCEEDED, "SUCCESSFUL"),
        (Status.FAILED, "FAILED"),
        (Status.CANCELLED, "FAILED"),
    ],
)
def test_status_mapping(status, expected):
    result = django_tasks.multiply.enqueue(1, 1)
    Task.objects.filter(pk=result.id).update(status=status)
    fetched = django_tasks.multiply.get_result(result.id)
    assert fetched.status == TaskResultStatus[expected] == STATUS_MAP[status]
    if status == Status.CANCELLED:
        assert fetched.errors[-1].exception_class_path == "jobs.exceptions.TaskCancelled"


@pytest.mark.parametrize("bad_id", ["not-a-uuid", "00000000-0000-0000-0000-000000000000"])
def test_unknown_or_malformed_ids(bad_id):
    with pytest.raises(TaskResultDoesNotExist):
        django_tasks.multiply.get_result(bad_id)


def test_signals_are_sent(django_capture_on_commit_callbacks):
    from jobs.backends import task_enqueued, task_finished, task_started

    seen = []

    def receiver(signal_name):
        return lambda sender, task_result, **kw: seen.append((signal_name, task_result.status))

    handlers = {
        "enqueued": receiver("enqueued"),
        "started": receiver("started"),
        "finished": receiver("finished"),
    }
    task_enqueued.connect(handlers["enqueued"])
    task_started.connect(handlers["started"])
    task_finished.connect(handlers["finished"])
    try:
        django_tasks.multiply.enqueue(2, 2)
        run_next()
    finally:
        task_enqueued.disconnect(handlers["enqueued"])
        task_started.disconnect(handlers["started"])
        task_finished.disconnect(handlers["finished"])
    assert [name for name, _ in seen] == ["enqueued", "started", "finished"]
    assert seen[-1][1] == TaskResultStatus.SUCCESSFUL


def test_the_result_of_an_enqueue_has_the_task_as_get_result_builds_it():
    """An enqueue as declared hands back the declared task itself (no copy made); one with
    another priority or queue, or deferred, a copy with the row's values. Either way equal to
    the task of ``get_result``, as Django's contract wants."""
    declared = django_tasks.multiply
    plain = declared.enqueue(2, 3)
    assert plain.task is declared
    assert plain.task == declared.get_result(plain.id).task
    later = timezone.now() + timezone.timedelta(hours=1)
    for task in (
        declared.using(priority=7),
        declared.using(queue_name="default", priority=-3),
        declared.using(run_after=later),
    ):
        result = task.enqueue(1, 1)
        assert result.task is not declared
        assert result.task == declared.get_result(result.id).task
        assert result.task.priority == task.priority
        assert result.task.run_after == task.run_after
