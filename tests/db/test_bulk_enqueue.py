"""Bulk enqueue: jobs.enqueue_many and TaskDefinition.enqueue_many."""

from datetime import timedelta

import pytest
from django.db import transaction

import jobs
from jobs import signals
from jobs.exceptions import PayloadError
from jobs.models import Task
from jobs.states import Status
from tests.factories import UserFactory
from tests.testapp.tasks import add

pytestmark = pytest.mark.django_db


def test_enqueue_many_records_one_pending_task_per_call():
    ids = add.enqueue_many([(1, 2), (3, 4), ([5], {"b": 6})])
    tasks = {task.pk: task for task in Task.objects.filter(pk__in=ids)}
    assert [tasks[pk].payload for pk in ids] == [
        {"args": [1, 2], "kwargs": {}},
        {"args": [3, 4], "kwargs": {}},
        {"args": [5], "kwargs": {"b": 6}},
    ]
    for task in tasks.values():
        assert task.status == Status.PENDING
        assert task.name == "tests.testapp.tasks.add"
        assert task.attempts == 0
        assert task.result_public is False


def test_enqueue_many_takes_the_options_of_using_and_by_name():
    owner = UserFactory()
    ids = add.using(
        queue="bulk", priority=7, owner=owner, summary="s", max_attempts=9
    ).enqueue_many([(1, 1)])
    task = Task.objects.get(pk=ids[0])
    assert (task.queue, task.priority, task.owner, task.summary, task.max_attempts) == (
        "bulk", 7, owner, "s", 9
    )  # fmt: skip
    ids = jobs.enqueue_many("tests.testapp.tasks.add", [(1, 1)], delay=60)
    task = Task.objects.get(pk=ids[0])
    assert task.run_after > task.created_at


def test_one_bad_payload_refuses_them_all():
    with pytest.raises(PayloadError, match=r"calls\[1\] args"):
        add.enqueue_many([(1, 2), (object(), 2)])
    with pytest.raises(PayloadError):
        add.enqueue_many([(1, 2), (float("nan"), 2)])
    assert not Task.objects.exists()


def test_enqueue_many_refuses_what_is_not_a_call_or_a_key():
    with pytest.raises(TypeError, match=r"calls\[0\]"):
        add.enqueue_many([1])
    with pytest.raises(ValueError, match="idempotency_key"):
        add.using(idempotency_key="k").enqueue_many([(1, 2)])


def test_enqueue_many_joins_the_callers_transaction():
    def request():
        with transaction.atomic():
            add.enqueue_many([(1, 2)] * 10)
            raise RuntimeError("the request fails after enqueueing")

    with pytest.raises(RuntimeError):
        request()
    assert not Task.objects.exists()


def test_enqueue_many_writes_in_batches():
    ids = add.enqueue_many([(n, n) for n in range(25)], batch_size=10)
    assert Task.objects.filter(pk__in=ids).count() == 25


def test_enqueue_many_sends_task_enqueued_per_task(django_capture_on_commit_callbacks):
    received = []

    def handler(sender, task, **kwargs):
        received.append(task.pk)

    signals.task_enqueued.connect(handler)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            ids = add.enqueue_many([(1, 2), (3, 4)])
    finally:
        signals.task_enqueued.disconnect(handler)
    assert sorted(received) == sorted(ids)


# Text that SQL quoting, COPY or the driver's placeholders would read specially.
AWKWARD = [
    "back\\slash", "\\N", "\\.", "\\", "tab\there", "new\nline", "cr\rx", "quote'\"", "é ☃ 𝄞",
    "%s %(x)s %%", "{}", "\\t\\n",
]  # fmt: skip


@pytest.mark.parametrize("count", [3, 120])
def test_enqueue_many_stores_every_column_as_enqueue_does(count):
    owner = UserFactory()
    options = {
        "queue": "bulk", "priority": -3, "owner": owner, "summary": "a\\b\t'c' %s \\N",
        "max_attempts": 4, "delay": 60, "expires_in": 3600, "rate_limit": "5/m",
        "rate_key": "r'\\%",
    }  # fmt: skip
    calls = [([text, n], {"k\\": text}) for n in range(count) for text in AWKWARD][:count]
    ids = add.using(**options).enqueue_many(calls)
    one = add.using(**options).enqueue(*calls[0][0], **calls[0][1]).record
    stored = {task.pk: task for task in Task.objects.filter(pk__in=ids)}
    assert [stored[pk].payload for pk in ids] == [
        {"args": args, "kwargs": kwargs} for args, kwargs in calls
    ]
    moments = {"id", "payload", "created_at", "updated_at", "run_after", "expires_at"}
    names = [field.attname for field in Task._meta.concrete_fields if field.name not in moments]
    expected = {name: getattr(Task.objects.get(pk=one.pk), name) for name in names}
    for task in stored.values():
        assert {name: getattr(task, name) for name in names} == expected
        for moment in ("run_after", "expires_at"):  # each call takes its time: a little apart
            later = getattr(task, moment) - task.created_at
            assert abs(later - (getattr(one, moment) - one.created_at)) < timedelta(seconds=1)


def test_depends_on_is_refused_not_dropped():
    # The rows were written pending with no dependency: they ran before the task they waited for.
    waited_for = add.enqueue(1, 1)
    with pytest.raises(ValueError, match="depends_on"):
        add.using(depends_on=[waited_for]).enqueue_many([(1, 2), (3, 4)])
    with pytest.raises(ValueError, match="depends_on"):
        jobs.enqueue_many("tests.testapp.tasks.add", [(1, 2)], depends_on=[waited_for.id])
    assert Task.objects.count() == 1
    dependent = add.using(depends_on=[waited_for]).enqueue(5, 6)  # one at a time: it waits
    assert dependent.record.status == Status.BLOCKED
