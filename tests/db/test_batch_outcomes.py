"""Successes recorded many per statement (transitions.succeed_many) and the child protocol."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs import signals, transitions
from jobs.execution.executor import SUCCEEDED
from jobs.models import Task
from jobs.states import Status
from jobs.worker.wire import encode_task, task_from_values
from tests.factories import TaskFactory

pytestmark = pytest.mark.django_db


def success(task, result=None, **changes):
    values = {
        "task_id": task.pk,
        "attempts": task.attempts,
        "worker_id": task.worker_id,
        "result": result,
        "finished_at": timezone.now() - timedelta(seconds=1),
        **changes,
    }
    return transitions.Success(**values)


def test_succeed_many_records_each_result_and_finish_time():
    tasks = [TaskFactory(status=Status.RUNNING, attempts=1, worker_id="w") for _ in range(3)]
    results = [{"n": 1}, [1, "two"], None]
    batch = [success(task, result) for task, result in zip(tasks, results, strict=True)]
    applied = transitions.succeed_many(batch)
    assert applied == {task.pk for task in tasks}
    for task, result, done in zip(tasks, results, batch, strict=True):
        task.refresh_from_db()
        assert task.status == Status.SUCCEEDED
        assert task.result == result
        assert task.finished_at == done.finished_at
        assert task.lease_expires_at is None


@pytest.mark.parametrize("status", [s for s in Status if s != Status.RUNNING])
def test_succeed_many_applies_only_to_running_tasks(status):
    task = TaskFactory(status=status, attempts=1, worker_id="w")
    assert transitions.succeed_many([success(task)]) == set()
    task.refresh_from_db()
    assert task.status == status


def test_succeed_many_is_guarded_by_attempt_and_worker(caplog):
    """A worker whose task was rescued and claimed again never records over the new attempt."""
    mine = TaskFactory(status=Status.RUNNING, attempts=2, worker_id="w")
    rescued = TaskFactory(status=Status.RUNNING, attempts=2, worker_id="other")
    newer = TaskFactory(status=Status.RUNNING, attempts=3, worker_id="w")
    batch = [
        success(mine),
        success(rescued, worker_id="w"),
        success(newer, attempts=2),
    ]
    assert transitions.succeed_many(batch) == {mine.pk}
    assert Task.objects.get(pk=rescued.pk).status == Status.RUNNING
    assert Task.objects.get(pk=newer.pk).status == Status.RUNNING
    assert caplog.text.count("transition refused") == 2


def test_succeed_many_sends_the_signals_of_each_task(django_capture_on_commit_callbacks):
    received = []

    def handler(sender, task, **kwargs):
        received.append((task.pk, kwargs.get("status")))

    tasks = [TaskFactory(status=Status.RUNNING, attempts=1, worker_id="w") for _ in range(2)]
    signals.task_finished.connect(handler)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            transitions.succeed_many([success(task) for task in tasks])
    finally:
        signals.task_finished.disconnect(handler)
    assert sorted(received) == sorted((task.pk, "succeeded") for task in tasks)


def test_succeed_many_of_nothing_writes_nothing(django_assert_num_queries):
    with django_assert_num_queries(0):
        assert transitions.succeed_many([]) == set()


def test_a_task_travels_to_a_child_unchanged():
    task = TaskFactory(status=Status.RUNNING, attempts=1, worker_id="w", payload={"args": [1.5]})
    task = Task.objects.get(pk=task.pk)
    copy = task_from_values(json.loads(encode_task(task)))
    assert not copy._state.adding
    for field in Task._meta.concrete_fields:
        assert getattr(copy, field.attname) == getattr(task, field.attname), field.name


def running_add(a, b):
    task = TaskFactory(
        name="tests.testapp.tasks.add", payload={"args": [a, b], "kwargs": {}}, status="running",
        attempts=1, worker_id="w",
    )  # fmt: skip
    return Task.objects.get(pk=task.pk)


def test_a_child_leaves_a_plain_success_to_the_supervisor(no_success_receivers):
    from jobs.worker import batches as child

    task = running_add(2, 3)
    index, outcome, result, finished_at = child._run_one(7, json.loads(encode_task(task)))
    assert (index, outcome, result) == (7, "deferred", 5)
    assert finished_at > 0
    assert Task.objects.get(pk=task.pk).status == Status.RUNNING  # not recorded yet


def test_a_child_records_a_success_a_receiver_waits_for(django_capture_on_commit_callbacks):
    """Receivers run where the outcome is recorded: in the child, under the task's timeout."""
    from jobs.worker import batches as child

    task = running_add(2, 3)
    received = []

    def handler(sender, task, **kwargs):
        received.append(task.pk)

    signals.task_succeeded.connect(handler)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            reply = child._run_one(0, json.loads(encode_task(task)))
    finally:
        signals.task_succeeded.disconnect(handler)
    assert reply == [0, SUCCEEDED, None, None]
    assert Task.objects.get(pk=task.pk).status == Status.SUCCEEDED
    assert received == [task.pk]
