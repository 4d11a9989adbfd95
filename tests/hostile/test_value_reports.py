"""What a task returns and reports is stored and read back identically, or refused plainly.

A refused return value fails that task with a message saying what was wrong; a refused step
result or name writes no step; display text (progress message, user message) is mended as
documented. Through the real database of the run, in a savepoint per example.
"""

import pytest
from django.db import transaction
from django.utils import timezone
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from jobs import transitions
from jobs.exceptions import PayloadError, PermanentError
from jobs.execution import executor
from jobs.execution.context import TaskContext
from jobs.models import Task, TaskStep
from jobs.states import Status
from jobs.tasks.retry import Backoff
from jobs.text import clean_text
from tests.factories import TaskFactory
from tests.hostile.values import hostile_floats, hostile_ints, hostile_text, json_values, same

pytestmark = pytest.mark.django_db

PROPERTY = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def running_task():
    Task.objects.all().delete()
    return TaskFactory(running=True)


def returning(value) -> executor.Runnable:
    return executor.Runnable(call=lambda task: value, backoff=Backoff())


@PROPERTY
@given(value=json_values, batched=st.booleans())
@example(value="a\x00b", batched=True)
@example(value={"\ud800": 1}, batched=True)
@example(value=2**64, batched=False)
@example(value=1e16, batched=True)
def test_a_result_is_stored_identically_or_fails_its_task_plainly(value, batched):
    task = running_task()
    outcome = executor.execute(task, returning(value))
    with transaction.atomic():
        if outcome.kind == executor.SUCCEEDED and batched:  # as a worker's supervisor does
            success = transitions.Success(
                task.pk, task.attempts, task.worker_id, outcome.result, timezone.now()
            )
            assert transitions.succeed_many([success]) == {task.pk}
        else:
            assert executor.record(task, outcome)
    read = Task.objects.get(pk=task.pk)
    if outcome.kind == executor.SUCCEEDED:
        assert read.status == Status.SUCCEEDED
        assert same(read.result, value)
    else:
        assert read.status == Status.FAILED
        assert read.result is None
        assert read.last_error.startswith("the task's return value")
        # What Django Tasks record (tests/db/test_django_contract.py), and permanent.
        assert read.error_details[-1]["exception"] == "builtins.TypeError"
        assert read.error_details[-1]["permanent"] is True


@PROPERTY
@given(name=hostile_text | st.integers(190, 210).map(lambda n: "s" * n), value=json_values)
@example(name="a\x00", value=1)
@example(name="ok", value="a\x00b")
@example(name="s" * 201, value=1)
def test_a_step_is_recorded_identically_or_refused_before_it_is_written(name, value):
    task = running_task()
    try:
        with transaction.atomic():
            result = TaskContext(task).step(name, lambda: value)
    except PayloadError:
        assert not TaskStep.objects.exists()
        return
    assert same(result, value)
    again = TaskContext(Task.objects.get(pk=task.pk))
    assert same(again.completed_steps[name], value)
    assert same(again.step(name, pytest.fail, "a recorded step runs again"), value)


@PROPERTY
@given(
    message=hostile_text,
    current=st.one_of(hostile_ints, hostile_floats),
    total=st.none() | hostile_ints | hostile_floats,
)
@example(message="a\x00b", current=3_000_000_000, total=6_000_000_000)
@example(message="x" * 300, current=float("nan"), total=None)
def test_progress_is_stored_mended_or_refused(message, current, total):
    task = running_task()
    try:
        with transaction.atomic():
            TaskContext(task).progress(current, total, message, force=True)
    except PayloadError:
        read = Task.objects.get(pk=task.pk)
        assert (read.progress_current, read.progress_message) == (0, "")
        return
    read = Task.objects.get(pk=task.pk)
    assert read.progress_message == clean_text(message, 255)
    assert 0 <= read.progress_current <= 2**31 - 1
    if total is not None and 0 < total < 2**31 and 0 <= current < 2**31:
        assert (read.progress_current, read.progress_total) == (int(current), int(total))


@PROPERTY
@given(message=hostile_text)
@example(message="Bad row\x00 \ud800")
def test_a_user_message_is_stored_mended(message):
    task = running_task()
    outcome = executor.execute(task, executor.Runnable(call=_raiser(message), backoff=Backoff()))
    with transaction.atomic():
        assert executor.record(task, outcome)
    read = Task.objects.get(pk=task.pk)
    assert read.status == Status.FAILED
    assert read.last_error == clean_text(message)


def _raiser(message):
    def call(task):
        raise PermanentError(message)

    return call


@pytest.mark.parametrize("message", [5, 1.5, None, b"bytes", ["a"], {"a": 1}], ids=repr)
def test_a_progress_message_that_is_not_text_is_refused_and_nothing_is_written(message):
    task = running_task()
    with pytest.raises(PayloadError, match="A progress message must be a str, not "):
        TaskContext(task).progress(1, 2, message, force=True)
    read = Task.objects.get(pk=task.pk)
    assert (read.progress_current, read.progress_total, read.progress_message) == (0, None, "")


def test_progress_past_the_column_keeps_its_ratio():
    task = running_task()
    TaskContext(task).progress(3_000_000_000, 6_000_000_000, "bytes", force=True)
    read = Task.objects.get(pk=task.pk)
    assert read.progress_total == 2**31 - 1
    assert read.progress_percent == 50
