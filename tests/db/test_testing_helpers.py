"""jobs.testing: draining due tasks inline, immediate mode, assertions, the pytest fixtures."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

import jobs
from jobs import signals
from jobs.backends import TaskResultStatus
from jobs.models import Task
from jobs.states import Status
from jobs.testing import (
    DrainError,
    assert_enqueued,
    assert_not_enqueued,
    drain,
    enqueued,
    immediately,
)
from jobs.testing.pytest_plugin import InlineWorker
from tests.factories import TaskFactory, UserFactory
from tests.testapp import chain_tasks, django_tasks, hostile_tasks, tasks
from tests.testapp import workflow_tasks as wt
from tests.testapp.models import SideEffect

pytestmark = pytest.mark.django_db


# drain ----------------------------------------------------------------------------------------


def test_drain_runs_the_due_tasks_and_counts_their_outcomes():
    tasks.add.enqueue(1, 2)
    tasks.buggy.enqueue()
    drained = drain()
    assert drained.counts == {"succeeded": 1, "failed": 1, "retrying": 0, "cancelled": 0}
    assert drained.total == 2
    assert drained.rounds == 1
    by_name = {task.name: task for task in drained.tasks}
    assert by_name["tests.testapp.tasks.add"].status == Status.SUCCEEDED
    assert by_name["tests.testapp.tasks.add"].result == 3
    assert by_name["tests.testapp.tasks.add"].worker_id == "jobs.testing"
    assert by_name["tests.testapp.tasks.buggy"].status == Status.FAILED


def test_drain_with_nothing_due_does_nothing():
    assert drain().counts == {"succeeded": 0, "failed": 0, "retrying": 0, "cancelled": 0}


def test_a_retry_is_not_run_until_due_and_with_scheduled_drives_it_to_success():
    task = tasks.fail_until_attempt.enqueue("mail", 3).record
    # Claims as at a fixed time: the suite's backoff (0.2 s) may end while a slow round runs.
    at = timezone.now()
    first = drain(now=at)
    assert first.counts["retrying"] == 1
    assert first.total == 1
    task.refresh_from_db()
    assert (task.status, task.attempts) == (Status.RETRYING, 1)
    assert task.run_after > at
    rest = drain(with_scheduled=True)
    assert (rest.retrying, rest.succeeded) == (1, 1)
    task.refresh_from_db()
    assert (task.status, task.attempts, task.result) == (Status.SUCCEEDED, 3, "ok")
    assert SideEffect.objects.filter(key="mail").count() == 3


def test_with_scheduled_drives_retries_to_exhaustion():
    task = tasks.always_transient.enqueue().record
    drained = drain(with_scheduled=True)
    assert (drained.retrying, drained.failed) == (4, 1)
    task.refresh_from_db()
    assert (task.status, task.attempts) == (Status.FAILED, 5)
    assert len(task.error_details) == 5


def test_a_delayed_task_waits_unless_scheduled_tasks_are_asked_for():
    task = tasks.add.using(delay=timedelta(hours=1)).enqueue(1, 1).record
    assert drain().total == 0
    assert drain(now=timezone.now() + timedelta(hours=2)).succeeded == 1
    task.refresh_from_db()
    assert task.status == Status.SUCCEEDED
    later = tasks.add.using(delay=timedelta(days=3)).enqueue(2, 2).record
    assert drain(with_scheduled=True).succeeded == 1
    later.refresh_from_db()
    assert later.result == 4


def test_drain_takes_only_the_queues_asked_for():
    tasks.on_priority_queue.enqueue("p")
    tasks.add.enqueue(1, 1)
    assert [task.name for task in drain("priority").tasks] == [
        "tests.testapp.tasks.on_priority_queue"
    ]
    assert enqueued(tasks.add, status=Status.PENDING)
    assert drain(["default", "nowhere"]).succeeded == 1


@pytest.mark.parametrize("queues", [[], "", [""], ["default", ""]])
def test_an_empty_list_of_queues_or_an_empty_name_is_refused_rather_than_running_nothing(queues):
    tasks.add.enqueue(1, 1)
    with pytest.raises(ValueError, match="names no queue"):
        drain(queues)
    assert_enqueued(tasks.add, status=Status.PENDING, count=1)


def test_tasks_enqueued_by_tasks_run_in_later_rounds_until_none_is_due():
    chain_tasks.count_down.enqueue(3)
    drained = drain()
    assert (drained.succeeded, drained.rounds) == (4, 4)
    assert sorted(task.result for task in drained.tasks) == [0, 1, 2, 3]


def test_until_empty_false_runs_one_round():
    chain_tasks.count_down.enqueue(3)
    assert drain(until_empty=False).succeeded == 1
    assert_enqueued(chain_tasks.count_down, args=[2], status=Status.PENDING)


def test_tasks_enqueued_with_enqueue_many_by_a_task_run_too():
    chain_tasks.fan_out.enqueue(5)
    assert drain().succeeded == 6


def test_an_endless_chain_stops_at_max_rounds_with_a_clear_error():
    chain_tasks.enqueue_forever.enqueue()
    with pytest.raises(DrainError, match=r"still due after 5 rounds.*enqueue_forever"):
        drain(max_rounds=5)
    # Every attempt run was recorded; nothing is left running.
    assert Task.objects.filter(status=Status.SUCCEEDED).count() == 5
    assert not Task.objects.filter(status=Status.RUNNING).exists()
    assert Task.objects.filter(status=Status.PENDING).count() == 1


def test_with_scheduled_an_endless_chain_of_delayed_tasks_stops_at_max_rounds_too():
    chain_tasks.enqueue_forever.using(delay=timedelta(hours=1)).enqueue()
    with pytest.raises(DrainError, match="still due after 3 rounds"):
        drain(with_scheduled=True, max_rounds=3)
    assert Task.objects.filter(status=Status.SUCCEEDED).count() == 3
    assert not Task.objects.filter(status=Status.RUNNING).exists()


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3", None])
def test_max_rounds_must_be_a_whole_number_of_at_least_one(bad):
    with pytest.raises(ValueError, match="max_rounds"):
        drain(max_rounds=bad)


@pytest.mark.parametrize("bad", ["2026-01-01", 1767225600, timezone.now().replace(tzinfo=None)])
def test_now_must_be_an_aware_datetime(bad):
    tasks.add.enqueue(1, 2)
    with pytest.raises(ValueError, match="now must be an aware datetime"):
        drain(now=bad)
    assert Task.objects.get().status == Status.PENDING  # nothing ran


@pytest.mark.parametrize("bad", [5, [b"default"], ["default", None]])
def test_queues_must_be_names(bad):
    with pytest.raises(TypeError, match="queues must be a queue name"):
        drain(queues=bad)


def test_queues_may_be_any_iterable_of_names():
    tasks.add.enqueue(1, 2)
    assert drain(queues=(name for name in ["default"])).succeeded == 1


def test_a_task_raising_system_exit_fails_and_the_test_carries_on():
    task = hostile_tasks.raises_system_exit.enqueue(3).record
    other = tasks.add.enqueue(2, 2).record
    drained = drain()
    assert (drained.failed, drained.succeeded) == (1, 1)
    task.refresh_from_db()
    other.refresh_from_db()
    assert task.status == Status.FAILED
    assert task.error_details[-1]["exception"] == "builtins.SystemExit"
    assert other.result == 4


def test_a_task_whose_function_is_gone_fails_with_a_plain_message():
    task = TaskFactory(name="tests.testapp.tasks.no_such_function")
    assert drain().failed == 1
    task.refresh_from_db()
    assert task.status == Status.FAILED
    assert "No task is registered as 'tests.testapp.tasks.no_such_function'" in task.last_error


def test_django_tasks_run_too_and_one_of_a_removed_alias_fails_alone():
    result = django_tasks.multiply.enqueue(6, 7)
    orphan = TaskFactory(
        name="tests.testapp.django_tasks.multiply",
        backend="removed-alias",
        payload={"args": [2, 3], "kwargs": {}},
    )
    drained = drain()
    assert (drained.succeeded, drained.failed) == (1, 1)
    result.refresh()
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 42)
    orphan.refresh_from_db()
    assert orphan.status == Status.FAILED
    assert "removed-alias" in orphan.error_details[-1]["message"]


def test_signals_of_an_attempt_are_sent_inside_the_tests_transaction():
    heard = []

    def finished(sender, task, status, **kwargs):
        heard.append((task.name, status))

    signals.task_finished.connect(finished)
    try:
        tasks.add.enqueue(1, 1)
        with transaction.atomic():
            drain()
    finally:
        signals.task_finished.disconnect(finished)
    assert heard == [("tests.testapp.tasks.add", Status.SUCCEEDED)]


def test_an_enclosing_capture_does_not_send_them_twice(django_capture_on_commit_callbacks):
    heard = []

    def started(sender, task, **kwargs):
        heard.append(task.pk)

    signals.task_started.connect(started)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            task = tasks.add.enqueue(1, 1).record
            drain()
    finally:
        signals.task_started.disconnect(started)
    assert heard == [task.pk]


@pytest.mark.django_db(transaction=True)
def test_drain_and_immediate_mode_in_autocommit():
    chain_tasks.count_down.enqueue(2)
    assert drain().succeeded == 3
    with immediately():
        assert tasks.add.enqueue(3, 4).record.result == 7


# immediate mode -------------------------------------------------------------------------------


def test_immediately_runs_a_task_when_it_is_enqueued():
    with immediately():
        task = tasks.add.enqueue(2, 3).record
        assert (task.status, task.result) == (Status.SUCCEEDED, 5)
    assert tasks.add.enqueue(1, 1).record.status == Status.PENDING  # off again


def test_immediately_runs_django_tasks_too():
    with immediately():
        result = django_tasks.multiply.enqueue(6, 7)
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 42)


def test_immediately_is_a_decorator_too_and_runs_enqueue_many():
    @immediately()
    def enqueue_two():
        return tasks.add.enqueue_many([(1, 1), (2, 2)])

    ids = enqueue_two()
    assert sorted(Task.objects.filter(pk__in=ids).values_list("result", flat=True)) == [2, 4]


def test_in_immediate_mode_a_failure_is_recorded_not_raised_and_a_retry_waits():
    with immediately():
        failed = tasks.buggy.enqueue().record
        retried = tasks.fail_until_attempt.enqueue("sms", 2).record
        delayed = tasks.add.using(delay=timedelta(hours=1)).enqueue(1, 1).record
    assert failed.status == Status.FAILED
    assert retried.status == Status.RETRYING
    assert delayed.status == Status.PENDING
    assert drain(with_scheduled=True).succeeded == 2


def test_in_immediate_mode_tasks_enqueued_by_tasks_run_nested():
    with immediately():
        task = chain_tasks.count_down.enqueue(3).record
    assert task.status == Status.SUCCEEDED
    assert Task.objects.filter(status=Status.SUCCEEDED).count() == 4


def test_in_immediate_mode_an_endless_chain_fails_its_deepest_task_plainly():
    with immediately():
        chain_tasks.enqueue_forever.enqueue()
    (deepest,) = Task.objects.filter(status=Status.FAILED)
    assert "immediate mode" in deepest.error_details[-1]["message"]
    assert Task.objects.filter(status=Status.SUCCEEDED).count() == 19
    # The enqueue refused to run is recorded, for drain() to run (and stop) if the test asks.
    assert Task.objects.filter(status=Status.PENDING).count() == 1


def test_immediate_mode_runs_inside_the_callers_transaction():
    with immediately(), transaction.atomic():
        task = tasks.record_effect.enqueue("inside").record
        assert task.status == Status.SUCCEEDED
        transaction.set_rollback(True)
    assert not Task.objects.filter(pk=task.pk).exists()
    assert not SideEffect.objects.filter(key="inside").exists()


# assertions -----------------------------------------------------------------------------------


def test_assert_enqueued_matches_arguments_owner_queue_and_count():
    owner = UserFactory()
    tasks.add.using(owner=owner).enqueue(1, 2)
    tasks.add.enqueue(1, 2)
    tasks.add.enqueue(a=5, b=6)
    assert len(assert_enqueued(tasks.add, args=(1, 2), count=2)) == 2
    assert_enqueued(tasks.add, args=[1, 2], owner=owner, count=1)
    assert_enqueued(tasks.add, args=[1, 2], owner=owner.pk, count=1)
    assert_enqueued(tasks.add, owner=None, count=2)
    assert_enqueued(tasks.add, kwargs={"a": 5, "b": 6}, queue="default")
    assert_enqueued("tests.testapp.tasks.add", count=3)
    assert_not_enqueued(tasks.add, args=[2, 1])
    assert_not_enqueued(tasks.buggy)
    assert enqueued(tasks.add, queue="elsewhere") == []


def test_an_assertion_that_fails_lists_what_was_enqueued():
    tasks.add.enqueue(1, 2)
    with pytest.raises(AssertionError) as failure:
        assert_enqueued(tasks.add, args=[9, 9])
    message = str(failure.value)
    assert "Expected at least one task matching task='tests.testapp.tasks.add', args=[9, 9]" in (
        message
    )
    assert "found 0" in message
    assert "tests.testapp.tasks.add args=[1, 2] kwargs={} queue='default'" in message
    with pytest.raises(AssertionError, match=r"Expected 2 tasks .* found 1"):
        assert_enqueued(tasks.add, count=2)
    with pytest.raises(AssertionError, match=r"Expected no task .* found 1"):
        assert_not_enqueued(tasks.add)
    with pytest.raises(AssertionError, match="Nothing was enqueued of that task"):
        assert_enqueued(tasks.buggy)


def test_assertions_know_django_tasks_and_statuses():
    django_tasks.multiply.enqueue(6, 7)
    assert_enqueued(django_tasks.multiply, args=[6, 7], status=Status.PENDING)
    drain()
    assert_not_enqueued(django_tasks.multiply, status=[Status.PENDING, Status.RETRYING])
    assert_enqueued(django_tasks.multiply, args=[6, 7], count=1)  # run, still enqueued


def test_assertions_refuse_what_is_not_a_task_or_bad_arguments():
    with pytest.raises(TypeError, match="Pass a task"):
        enqueued(42)
    with pytest.raises(ValueError, match="args"):
        enqueued(tasks.add, args="12")


@pytest.mark.parametrize("bad", ["1", -1, 1.0, True])
def test_a_count_must_be_a_whole_number_from_zero(bad):
    tasks.add.enqueue(1, 2)
    # "1" read "Expected 1 tasks ..., found 1." and failed; -1 could never pass.
    with pytest.raises(ValueError, match="count must be a whole number from 0"):
        assert_enqueued(tasks.add, count=bad)


def test_an_unknown_status_is_refused_rather_than_matching_nothing():
    tasks.add.enqueue(1, 2)
    with pytest.raises(ValueError, match="'done' is not a task status: one of pending, "):
        assert_not_enqueued(tasks.add, status="done")  # would pass whatever was enqueued
    with pytest.raises(ValueError, match="is not a task status"):
        enqueued(tasks.add, status=[Status.PENDING, "succeded"])


# the pytest fixtures ----------------------------------------------------------------------------


def test_the_jobs_worker_fixture_drains(jobs_worker):
    assert isinstance(jobs_worker, InlineWorker)
    tasks.add.enqueue(1, 1)
    assert jobs_worker.drain().succeeded == 1
    with jobs_worker.immediately():
        assert tasks.add.enqueue(2, 2).record.result == 4


def test_the_jobs_immediate_fixture_runs_tasks_at_enqueue(jobs_immediate):
    assert tasks.add.enqueue(3, 3).record.result == 6


def test_immediately_runs_a_dependent_whose_dependencies_have_finished():
    # Stored blocked, then released at the enqueue: the hook saw it blocked and ran nothing, so
    # it, and every chain link after the first, stayed pending.
    with immediately():
        first = wt.double.enqueue(2)
        after = wt.add_one.using(depends_on=[first]).enqueue(7)
        workflow = jobs.chain(wt.double.s(3), wt.add_one.s(), wt.double.s())
    assert (first.record.status, after.record.status) == (Status.SUCCEEDED, Status.SUCCEEDED)
    assert after.return_value == 8
    workflow.refresh_from_db()
    links = Task.objects.filter(workflow=workflow).order_by("created_at", "pk")
    assert [(link.status, link.result) for link in links] == [
        (Status.SUCCEEDED, 6), (Status.SUCCEEDED, 7), (Status.SUCCEEDED, 14)
    ]  # fmt: skip
    assert workflow.status == "succeeded"


def test_immediately_runs_a_batch_callback_its_members_released():
    # Released by the last member's outcome, not by an enqueue: it stayed pending.
    with immediately():
        workflow = jobs.batch(
            [wt.double.s(1), wt.fail_now.s()],
            on_success=wt.callback.s("success"),
            on_failure=wt.callback.s("failure"),
            on_finish=wt.callback.s("finish"),
        )
    workflow.refresh_from_db()
    roles = dict(Task.objects.filter(workflow=workflow).values_list("workflow_role", "status"))
    assert (workflow.status, roles["on_failure"], roles["on_finish"]) == (
        "failed", Status.SUCCEEDED, Status.SUCCEEDED
    )  # fmt: skip
    assert roles["on_success"] == Status.CANCELLED
    assert sorted(SideEffect.objects.values_list("key", flat=True)) == ["failure", "finish"]
    assert drain().total == 0
