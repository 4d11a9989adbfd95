import pytest
from django.utils import timezone

from jobs.execution import executor
from jobs.models import Task
from jobs.states import Status
from jobs.tasks.registry import default_backoff
from jobs.tasks.retry import GENERIC_FAILURE_MESSAGE
from tests import helpers
from tests.factories import TaskFactory
from tests.helpers import run_next
from tests.testapp import tasks
from tests.testapp.models import SideEffect

pytestmark = pytest.mark.django_db


def make_due(task):
    Task.objects.filter(pk=task.pk).update(run_after=timezone.now())


def test_success_records_the_json_result():
    tasks.add.enqueue(2, 3)
    task = run_next()
    assert task.status == Status.SUCCEEDED
    assert task.result == 5
    assert task.finished_at >= task.started_at
    assert task.lease_expires_at is None


def test_connection_errors_retry_with_growing_delays_then_succeed():
    task = tasks.fail_until_attempt.enqueue("flaky", succeed_on=3).record
    delays = []
    for _ in range(2):
        task = run_next()
        assert task.status == Status.RETRYING
        delays.append((task.run_after - task.updated_at).total_seconds())
        make_due(task)
    task = run_next()
    assert task.status == Status.SUCCEEDED
    assert task.attempts == 3
    assert delays[1] > delays[0] > 0
    assert [e["exception"] for e in task.error_details] == ["builtins.ConnectionRefusedError"] * 2
    assert SideEffect.objects.filter(key="flaky").count() == 3


def test_transient_errors_fail_once_attempts_are_used_up():
    task = tasks.always_transient.using(max_attempts=2).enqueue().record
    task = run_next()
    assert task.status == Status.RETRYING
    make_due(task)
    task = run_next()
    assert task.status == Status.FAILED
    assert task.last_error == "The mail server is unavailable; we will retry."
    assert [e["attempt"] for e in task.error_details] == [1, 2]


def test_a_transient_error_past_attempt_1024_is_retried_with_the_capped_backoff():
    # The default backoff doubles: 2.0 ** 1100 overflowed, and the task, with attempts left,
    # failed with the generic message of a bug.
    task = TaskFactory(
        name="tests.testapp.tasks.always_transient",
        payload={"args": [], "kwargs": {}},
        max_attempts=5000,
        attempts=1100,
    )
    before = timezone.now()
    task = run_next()
    assert (task.status, task.attempts) == (Status.RETRYING, 1101)
    assert task.last_error == "The mail server is unavailable; we will retry."
    backoff = default_backoff()
    waited = (task.run_after - before).total_seconds()
    assert backoff.maximum * (1 - backoff.jitter) - 1 < waited < backoff.maximum + 5  # the cap


def test_permanent_error_fails_at_once_with_the_user_message_kept_apart():
    tasks.bad_file.enqueue()
    task = run_next()
    assert task.status == Status.FAILED
    assert task.attempts == 1
    assert task.last_error == "Unsupported file format: please upload a CSV"
    (entry,) = task.error_details
    assert entry["exception"] == "jobs.exceptions.PermanentError"
    assert entry["message"] == "got image/png"
    assert "Traceback" in entry["traceback"]
    assert entry["transient"] is False
    assert entry["permanent"] is True  # the owner is not offered a retry of the same input


def test_a_payload_error_in_the_task_body_fails_at_once_recorded_as_itself():
    tasks.enqueues_a_bad_value.enqueue()
    task = run_next()
    assert (task.status, task.attempts) == (Status.FAILED, 1)
    assert task.last_error.startswith("args[0] is datetime.date datetime.date(2026, 1, 1)")
    (entry,) = task.error_details
    # The class the operator reads is what was raised, where it was raised; and not retried.
    assert entry["exception"] == "jobs.exceptions.PayloadError"
    assert entry["message"] == task.last_error
    assert "add.enqueue(datetime.date(2026, 1, 1), 1)" in entry["traceback"]
    assert entry["permanent"] is True
    assert Task.objects.count() == 1  # nothing was enqueued by it


def test_unexpected_errors_fail_at_once_with_a_generic_message_and_full_detail():
    tasks.buggy.enqueue()
    task = run_next()
    assert task.status == Status.FAILED
    assert task.attempts == 1
    assert task.last_error == GENERIC_FAILURE_MESSAGE
    assert "missing" not in task.last_error
    assert task.error_details[0]["exception"] == "builtins.KeyError"
    assert task.error_details[0]["permanent"] is False  # a bug: the owner may retry
    assert 'return {}["missing"]' in task.error_details[0]["traceback"]


def test_declared_transient_types_are_retried():
    tasks.declared_transient.enqueue()
    assert run_next().status == Status.RETRYING


def test_a_result_that_is_not_json_fails_the_task_clearly():
    tasks.returns_not_json.enqueue()
    task = run_next()
    assert task.status == Status.FAILED
    assert "return value is object" in task.last_error


def test_unregistered_task_name_fails_with_a_clear_error():
    TaskFactory(name="tests.testapp.tasks.renamed_long_ago")
    task = run_next()
    assert task.status == Status.FAILED
    assert task.attempts == 1
    assert "No task is registered as 'tests.testapp.tasks.renamed_long_ago'" in task.last_error


def test_outcome_is_not_recorded_over_a_task_taken_over_by_another_worker():
    tasks.add.enqueue(1, 1)
    (task,) = helpers.claim("old-worker", 1, lease_seconds=30)
    Task.objects.filter(pk=task.pk).update(attempts=2, worker_id="new-worker")
    executor.run(task)
    task.refresh_from_db()
    assert task.status == Status.RUNNING
    assert task.worker_id == "new-worker"


def test_start_and_finish_are_logged_with_name_id_attempt_duration_outcome(caplog):
    caplog.set_level("DEBUG", logger="jobs")
    task = tasks.add.enqueue(1, 1).record
    run_next()
    records = [r for r in caplog.records if r.name == "jobs.execution.executor"]
    messages = [r.getMessage() for r in records]
    assert messages[0].startswith(f"task started name=tests.testapp.tasks.add id={task.pk}")
    assert "attempt=1/3" in messages[0]
    assert f"id={task.pk}" in messages[1]
    assert "duration=" in messages[1]
    assert "outcome=succeeded" in messages[1]
    # One line per task at INFO (the finish, with the outcome): the start is DEBUG.
    assert [r.levelname for r in records] == ["DEBUG", "INFO"]


def test_with_debug_on_the_query_log_does_not_grow_with_the_tasks_run():
    """DEBUG logs every query of a connection; a worker, serving no request, forgets them per
    task as Django does per request (else a child grew by megabytes per thousand tasks)."""
    from django.db import connection
    from django.test import override_settings

    for number in range(40):
        tasks.record_effect.enqueue(f"debug-{number}")
    with override_settings(DEBUG=True):
        (first,) = helpers.claim("test-worker", 1, lease_seconds=30, now=timezone.now())
        executor.run(first)
        one_task = len(connection.queries)
        assert one_task > 0  # DEBUG does log them
        for task in helpers.claim("test-worker", 39, lease_seconds=30, now=timezone.now()):
            executor.run(task)
        assert len(connection.queries) <= one_task
    assert SideEffect.objects.filter(key__startswith="debug-").count() == 40
