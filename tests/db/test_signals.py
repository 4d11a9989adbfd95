import pytest
from django.db import transaction
from django.utils import timezone

from jobs import signals, transitions
from jobs.models import Task
from tests.factories import TaskFactory
from tests.helpers import run_next
from tests.testapp import tasks

# Signals are sent on commit: these tests commit for real.
pytestmark = pytest.mark.django_db(transaction=True)

ALL = [
    "task_enqueued",
    "task_started",
    "task_succeeded",
    "task_retried",
    "task_failed",
    "task_cancelled",
    "task_requeued",
    "task_finished",
]


@pytest.fixture
def received():
    seen = []
    handlers = {}
    for name in ALL:

        def handler(sender, task, _name=name, **kwargs):
            seen.append((_name, task.pk, kwargs.get("status")))

        handlers[name] = handler
        getattr(signals, name).connect(handler)
    yield seen
    for name, handler in handlers.items():
        getattr(signals, name).disconnect(handler)


def test_life_of_a_successful_task(received):
    task = tasks.add.enqueue(1, 2).record
    run_next()
    assert received == [
        ("task_enqueued", task.pk, None),
        ("task_started", task.pk, None),
        ("task_succeeded", task.pk, None),
        ("task_finished", task.pk, "succeeded"),
    ]


def test_retry_fail_and_requeue(received):
    task = tasks.always_transient.using(max_attempts=2).enqueue().record
    run_next()
    Task.objects.filter(pk=task.pk).update(run_after=timezone.now())
    run_next()
    transitions.requeue(Task.objects.get(pk=task.pk))
    names = [name for name, _, _ in received]
    assert names == [
        "task_enqueued",
        "task_started",
        "task_retried",
        "task_started",
        "task_failed",
        "task_finished",
        "task_requeued",
    ]


def test_bulk_cancel_sends_one_signal_per_cancelled_task(received):
    pending = TaskFactory.create_batch(3)
    TaskFactory(succeeded=True)
    transitions.cancel_many(Task.objects.all())
    cancelled = {pk for name, pk, _ in received if name == "task_cancelled"}
    assert cancelled == {t.pk for t in pending}


def test_an_idempotent_duplicate_is_not_announced_again(received):
    tasks.add.using(idempotency_key="k").enqueue(1, 2)
    tasks.add.using(idempotency_key="k").enqueue(1, 2)
    assert [name for name, _, _ in received] == ["task_enqueued"]


def test_signals_wait_for_the_commit_and_vanish_on_rollback(received):
    with transaction.atomic():
        tasks.add.enqueue(1, 2)
        assert received == []
    assert len(received) == 1

    def rolled_back():
        with transaction.atomic():
            tasks.add.enqueue(1, 2)
            raise RuntimeError

    with pytest.raises(RuntimeError):
        rolled_back()
    assert len(received) == 1


def test_a_failing_receiver_does_not_break_the_worker(caplog):
    def broken(sender, task, **kwargs):
        raise RuntimeError("receiver bug")

    signals.task_succeeded.connect(broken)
    try:
        tasks.add.enqueue(1, 2)
        task = run_next()
    finally:
        signals.task_succeeded.disconnect(broken)
    task.refresh_from_db()
    assert task.status == "succeeded"
    assert "signal receiver failed" in caplog.text
