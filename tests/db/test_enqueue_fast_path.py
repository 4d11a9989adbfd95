"""The lean enqueue path: the row it writes, what it returns, and the NOTIFY of new tasks."""

import pytest
from django.db import connection, transaction

from jobs import signals
from jobs.exceptions import PayloadError
from jobs.models import Task
from tests.db.conftest import received
from tests.factories import TaskFactory, UserFactory
from tests.testapp import tasks

pytestmark = pytest.mark.django_db


def test_the_returned_task_is_the_row_as_read_back():
    owner = UserFactory()
    task = tasks.add.using(owner=owner, summary="s", priority=3).enqueue(1, b=[2, 3]).record
    stored = Task.objects.get(pk=task.pk)
    for field in Task._meta.concrete_fields:
        assert getattr(task, field.attname) == getattr(stored, field.attname), field.name
    assert task._state.adding is False
    assert task.owner == owner  # cached: no query


def test_one_statement_per_enqueue_and_no_savepoint_for_a_key(django_assert_num_queries):
    with django_assert_num_queries(1):
        tasks.add.enqueue(1, 2)
    existing = TaskFactory(name=tasks.add.module_path, idempotency_key="k")
    with django_assert_num_queries(2) as captured:  # the INSERT that makes nothing, the read
        again = tasks.add.using(idempotency_key="k").enqueue(1, 2).record
    assert (again.pk, again.created) == (existing.pk, False)
    assert not any("SAVEPOINT" in query["sql"] for query in captured.captured_queries)


def test_the_callers_values_are_copied_not_shared():
    args, kwargs = [1, [2]], {"x": {"y": 1}}
    task = tasks.add.enqueue(*args, **kwargs).record
    args[1].append(3)
    kwargs["x"]["y"] = 2
    assert task.payload == {"args": [1, [2]], "kwargs": {"x": {"y": 1}}}
    flat = {"b": 2}
    task = tasks.add.enqueue(1, **flat).record
    flat["b"] = 5
    assert task.payload == {"args": [1], "kwargs": {"b": 2}}


def test_no_on_commit_callback_without_receivers(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        tasks.add.enqueue(1, 2)
    assert callbacks == []
    received = []
    signals.task_enqueued.connect(handler := lambda sender, task, **kw: received.append(task.pk))
    try:
        with django_capture_on_commit_callbacks(execute=True):
            task = tasks.add.enqueue(1, 2).record
    finally:
        signals.task_enqueued.disconnect(handler)
    assert received == [task.pk]


def test_a_bulk_payload_over_the_limit_names_its_call(settings):
    settings.JOBS_MAX_PAYLOAD_BYTES = 100
    with pytest.raises(PayloadError, match=r"payload of calls\[1\] is .* over the limit of 100"):
        tasks.add.enqueue_many([(1, 2), ("x" * 200, 1)])
    assert not Task.objects.exists()


def test_bulk_ids_are_version_4_and_distinct():
    ids = tasks.add.enqueue_many([(n, n) for n in range(50)])
    assert len(set(ids)) == 50
    assert {task_id.version for task_id in ids} == {4}


# NOTIFY (PostgreSQL) -----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_bulk_insert_notifies_once_per_queue(listener):
    tasks.add.using(queue="a").enqueue_many([(n, n) for n in range(300)])
    tasks.add.using(queue="b").enqueue(1, 2)
    with connection.cursor() as cursor:  # raw SQL too, and two queues in one statement
        cursor.execute(
            "INSERT INTO jobs_task SELECT * FROM jobs_task WHERE queue = 'b' LIMIT 0"
        )  # no row: no notify
    TaskFactory.create_batch(2, queue="c")
    assert sorted(received(listener)) == ["a", "b", "c", "c"]


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_enqueue_notifies_nobody(listener):
    def failing_request():
        with transaction.atomic():
            tasks.add.using(queue="gone").enqueue(1, 2)
            tasks.add.using(queue="gone").enqueue_many([(1, 2)] * 3)
            raise RuntimeError("the request failed")

    with pytest.raises(RuntimeError):
        failing_request()
    assert received(listener) == []
