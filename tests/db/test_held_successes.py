"""Successes a receiver waits for, held by the child and recorded together
(jobs.execution.finishing.record_held).

Django Tasks' ``task_finished`` (Django's own logging receiver at least) waits for every success
of a task declared with Django's ``@task``: the child records those successes in one statement
before its next reply, then sends the signal, once per task, with the row final.
"""

import json
import logging

import django
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.backends import TaskResultStatus, load_task, task_finished, task_started
from jobs.execution import finishing
from jobs.models import Task
from jobs.states import Status
from jobs.worker import batches as child
from jobs.worker.wire import encode_task
from tests.factories import TaskFactory

pytestmark = pytest.mark.django_db

# Django's own receivers log there (django.tasks on Django 6, the backport on 5.2).
DJANGO_LOGGER = "django.tasks" if django.VERSION >= (6,) else "django_tasks"


def running_multiply(a, b):
    task = TaskFactory(
        running=True,
        name="tests.testapp.django_tasks.multiply",
        backend="default",
        payload={"args": [a, b], "kwargs": {}},
    )
    return Task.objects.get(pk=task.pk)


@pytest.fixture
def finished():
    """What each task_finished receiver saw: the TaskResult's status, and the row's then."""
    seen = []

    def receiver(sender, task_result, **kwargs):
        row = Task.objects.get(pk=task_result.id)
        value = (
            task_result.return_value if task_result.status == TaskResultStatus.SUCCESSFUL else None
        )
        seen.append((task_result.id, task_result.status, row.status, value))

    task_finished.connect(receiver)
    yield seen
    task_finished.disconnect(receiver)


def run_held(tasks):
    held = []
    replies = [
        child._run_one(n, json.loads(encode_task(task)), held=held) for n, task in enumerate(tasks)
    ]
    return replies, held


def test_successes_are_held_then_recorded_together_and_finished_once(finished):
    tasks = [running_multiply(n, 10) for n in range(3)]
    replies, held = run_held(tasks)
    assert replies == [None, None, None]
    assert [index for index, _, _ in held] == [0, 1, 2]
    assert finished == []  # nothing is sent before the row is final
    assert set(Task.objects.values_list("status", flat=True)) == {Status.RUNNING}
    with CaptureQueriesContext(connection) as queries:
        finishing.record_held([(task, outcome) for _, task, outcome in held])
    statements = [q["sql"].split(None, 1)[0].upper() for q in queries.captured_queries]
    writes = [word for word in statements if word not in ("SELECT", "SAVEPOINT", "RELEASE")]
    assert len(writes) == 1  # one statement for the three
    assert finished == [
        (str(task.pk), TaskResultStatus.SUCCESSFUL, Status.SUCCEEDED, n * 10)
        for n, task in enumerate(tasks)
    ]
    assert [row.result for row in Task.objects.order_by("payload__args__0")] == [0, 10, 20]


def test_djangos_own_log_lines_are_written(caplog):
    task = running_multiply(6, 7)
    caplog.set_level(logging.INFO, logger=DJANGO_LOGGER)
    _, held = run_held([task])
    started = [r.getMessage() for r in caplog.records if r.name == DJANGO_LOGGER]
    assert started == [f"Task id={task.pk} path={task.name} state={TaskResultStatus.RUNNING}"]
    finishing.record_held([(task, outcome) for _, task, outcome in held])
    lines = [r.getMessage() for r in caplog.records if r.name == DJANGO_LOGGER]
    assert lines[1:] == [f"Task id={task.pk} path={task.name} state={TaskResultStatus.SUCCESSFUL}"]


def test_task_started_is_sent_once_as_the_task_starts():
    task = running_multiply(1, 1)
    seen = []

    def receiver(sender, task_result, **kwargs):
        seen.append((task_result.id, task_result.status))

    task_started.connect(receiver)
    try:
        run_held([task])
    finally:
        task_started.disconnect(receiver)
    assert seen == [(str(task.pk), TaskResultStatus.RUNNING)]


def test_a_success_no_longer_this_workers_is_not_recorded_nor_finished(finished, caplog):
    task = running_multiply(2, 2)
    _, held = run_held([task])
    Task.objects.filter(pk=task.pk).update(worker_id="another-worker")  # rescued meanwhile
    finishing.record_held([(task, outcome) for _, task, outcome in held])
    assert finished == []
    assert Task.objects.get(pk=task.pk).status == Status.RUNNING
    assert "transition refused" in caplog.text


def test_a_failing_receiver_spoils_neither_the_record_nor_the_others(finished, caplog):
    tasks = [running_multiply(1, 2), running_multiply(3, 4)]

    def broken(sender, task_result, **kwargs):
        raise RuntimeError("receiver bug")

    task_finished.connect(broken)
    try:
        _, held = run_held(tasks)
        finishing.record_held([(task, outcome) for _, task, outcome in held])
    finally:
        task_finished.disconnect(broken)
    assert [status for _, status, _, _ in finished] == [TaskResultStatus.SUCCESSFUL] * 2
    assert set(Task.objects.values_list("status", flat=True)) == {Status.SUCCEEDED}
    assert caplog.text.count("task_finished receiver failed") == 2


def test_a_failure_is_recorded_at_once_and_never_held(finished):
    task = TaskFactory(
        running=True, name="tests.testapp.django_tasks.explode", backend="default",
        payload={"args": [], "kwargs": {}}, max_attempts=1,
    )  # fmt: skip
    task = Task.objects.get(pk=task.pk)
    replies, held = run_held([task])
    assert held == []
    assert replies == [[0, Status.FAILED, None, None]]
    assert finished == [(str(task.pk), TaskResultStatus.FAILED, Status.FAILED, None)]


def test_held_nothing_writes_nothing(django_assert_num_queries):
    with django_assert_num_queries(0):
        finishing.record_held([])


def test_a_jobs_task_whose_success_a_receiver_waits_for_is_held_too(
    django_capture_on_commit_callbacks,
):
    from jobs import signals

    task = TaskFactory(running=True, payload={"args": [2, 3], "kwargs": {}})
    task = Task.objects.get(pk=task.pk)
    received = []

    def handler(sender, task, **kwargs):
        received.append((task.pk, Task.objects.get(pk=task.pk).status, task.result))

    signals.task_succeeded.connect(handler)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            replies, held = run_held([task])
            assert received == []
            finishing.record_held([(task, outcome) for _, task, outcome in held])
    finally:
        signals.task_succeeded.disconnect(handler)
    assert replies == [None]
    assert received == [(task.pk, Status.SUCCEEDED, 5)]  # add(2, 3), read back from its row


def test_one_task_result_for_the_attempt_as_djangos_own_backends_send():
    """task_started, the context and task_finished get one object, as from Django's
    ImmediateBackend: built at the start, brought up to the recorded success at the end."""
    from tests.testapp import django_tasks

    django_tasks.kept_contexts.clear()
    django_tasks.kept_statuses.clear()
    task = TaskFactory(
        running=True, name="tests.testapp.django_tasks.keep_context", backend="default",
        payload={"args": [1, "two"], "kwargs": {"three": None}},
    )  # fmt: skip
    task = Task.objects.get(pk=task.pk)
    seen = []

    def receiver(signal, sender, task_result, **kwargs):
        seen.append((signal, task_result, task_result.status, task_result.finished_at))

    task_started.connect(receiver)
    task_finished.connect(receiver)
    try:
        _, held = run_held([task])
        finishing.record_held([(task, outcome) for _, task, outcome in held])
    finally:
        task_started.disconnect(receiver)
        task_finished.disconnect(receiver)
    (_, started, started_status, started_end), (_, ended, ended_status, ended_at) = seen
    assert [signal for signal, *_ in seen] == [task_started, task_finished]
    assert started is ended is django_tasks.kept_contexts[0].task_result
    assert (started_status, started_end) == (TaskResultStatus.RUNNING, None)
    row = Task.objects.get(pk=task.pk)
    assert (ended_status, ended_at, ended.return_value) == (
        TaskResultStatus.SUCCESSFUL, row.finished_at, None,
    )  # fmt: skip
    assert (ended.args, ended.kwargs) == ([1, "two"], {"three": None})
    ran = held[0][1]  # the row the child ran, built from the message
    assert ended.record is ran
    assert ran.status == Status.SUCCEEDED
    assert "_jobs_attempt_result" not in ran.__dict__  # dropped once sent: no cycle left


def test_a_failed_attempt_gets_a_result_built_anew_with_its_error():
    task = TaskFactory(
        running=True, name="tests.testapp.django_tasks.explode", backend="default",
        payload={"args": [], "kwargs": {}}, max_attempts=1,
    )  # fmt: skip
    task = Task.objects.get(pk=task.pk)
    results = []

    def receiver(signal, sender, task_result, **kwargs):
        results.append((task_result, task_result.status))

    task_started.connect(receiver)
    task_finished.connect(receiver)
    try:
        run_held([task])
    finally:
        task_started.disconnect(receiver)
        task_finished.disconnect(receiver)
    (started, started_status), (ended, ended_status) = results
    assert started is not ended  # its errors changed: not the started one brought up
    assert (started_status, started.errors) == (TaskResultStatus.RUNNING, [])
    assert ended_status == TaskResultStatus.FAILED
    assert [error.exception_class_path for error in ended.errors] == ["builtins.ValueError"]


@pytest.mark.parametrize(
    ("args", "kwargs", "normalised"),
    [
        ([1, "a", None, True], {"k": "v"}, ([1, "a", None, True], {"k": "v"})),  # flat: as is
        ([(1, 2), {"x": (3,)}], {"k": [4.5]}, ([[1, 2], {"x": [3]}], {"k": [4.5]})),  # Django's
        ((1, 2), {}, ([1, 2], {})),  # a tuple: Django's normalisation
    ],
)
def test_a_results_arguments_are_normalised_as_djangos_own(args, kwargs, normalised):
    from jobs.backends import JobsTaskResult, TaskResult

    fields = {
        "task": None, "id": "1", "status": TaskResultStatus.READY, "enqueued_at": None,
        "started_at": None, "finished_at": None, "last_attempted_at": None, "args": args,
        "kwargs": kwargs, "backend": "default", "errors": [], "worker_ids": [],
    }  # fmt: skip
    ours, djangos = JobsTaskResult(**fields), TaskResult(**fields)
    assert (ours.args, ours.kwargs) == (djangos.args, djangos.kwargs) == normalised
    assert (type(ours.args), type(ours.kwargs)) == (list, dict)
    assert ours.args is not args  # copies, as Django's are
    assert ours.kwargs is not kwargs


def test_a_result_kept_from_an_earlier_attempt_is_not_reused():
    """A row instance run again (a test helper, say) gets a result of its new attempt."""
    from jobs.backends import attempt_result

    task = running_multiply(1, 1)
    django_task = load_task(task)
    first = attempt_result(task, django_task)
    assert attempt_result(task, django_task) is first  # the same attempt: the same result
    task.attempts += 1  # claimed again, its on_finish never called for the first attempt
    second = attempt_result(task, django_task)
    assert second is not first
    assert attempt_result(task, django_task) is second
