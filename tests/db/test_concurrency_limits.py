"""Concurrency keys: at most N tasks of a key run at once, decided by the claim."""

import threading

import pytest
from django.db import connections
from django.utils import timezone

from jobs.exceptions import PayloadError
from jobs.models import Task, TaskPause
from jobs.states import Status
from jobs.tasks.definition import TaskOptionError
from jobs.tasks.django_api import InvalidTask
from tests.factories import TaskFactory
from tests.helpers import claim
from tests.testapp import django_tasks, tasks

pytestmark = pytest.mark.django_db


def keyed(key, limit, count, **fields):
    return [
        TaskFactory(concurrency_key=key, concurrency_limit=limit, **fields) for _ in range(count)
    ]


def running_of(key):
    return Task.objects.filter(concurrency_key=key, status=Status.RUNNING).count()


def test_a_claim_takes_no_more_of_a_key_than_its_limit_and_the_rest_as_usual():
    keyed("account:1", 1, 4)
    keyed("account:2", 2, 4)
    plain = TaskFactory.create_batch(3)
    claimed = claim("w", 100, lease_seconds=30)
    by_key = {}
    for task in claimed:
        by_key[task.concurrency_key] = by_key.get(task.concurrency_key, 0) + 1
    assert by_key == {"account:1": 1, "account:2": 2, None: 3}
    assert {task.pk for task in plain} <= {task.pk for task in claimed}
    # Nothing more while they run; the waiting ones used no attempt.
    assert claim("w", 100, lease_seconds=30) == []
    assert set(Task.objects.filter(status=Status.PENDING).values_list("attempts", flat=True)) == {0}


def test_a_finished_task_makes_room_for_the_next_of_its_key_in_claim_order():
    low = TaskFactory(concurrency_key="k", concurrency_limit=1, priority=0)
    high = TaskFactory(concurrency_key="k", concurrency_limit=1, priority=5)
    (first,) = claim("w", 10, lease_seconds=30)
    assert first.pk == high.pk
    Task.objects.filter(pk=first.pk).update(status=Status.SUCCEEDED, finished_at=timezone.now())
    (second,) = claim("w", 10, lease_seconds=30)
    assert second.pk == low.pk


def test_a_key_with_room_for_several_takes_its_best_due_rows_in_claim_order():
    # The claim walks a key's due rows from its next one (SQLite: one probe per row, the row
    # after the previous in claim order), past rows not due or expired.
    now = timezone.now()
    earlier, later = now - timezone.timedelta(minutes=5), now + timezone.timedelta(hours=1)
    keyed("k", 4, 1, running=True)  # room for 3: one runs
    same = {"concurrency_key": "k", "concurrency_limit": 4}
    best = TaskFactory(priority=9, run_after=now, **same)
    TaskFactory(priority=8, run_after=later, **same)  # not due
    TaskFactory(priority=8, run_after=earlier, expires_at=earlier, **same)  # expired
    ties = [TaskFactory(priority=2, run_after=earlier, **same) for _ in range(3)]
    TaskFactory(priority=0, run_after=earlier, **same)
    order = sorted(ties, key=lambda task: (task.created_at, task.pk.hex))
    claimed = claim("w", 10, lease_seconds=30, now=now)
    assert [task.pk for task in claimed] == [best.pk, order[0].pk, order[1].pk]


def test_the_tasks_of_other_keys_and_without_one_are_not_held_behind_a_full_key():
    keyed("busy", 1, 1, running=True)  # the key is full
    keyed("busy", 1, 50)
    free = keyed("free", 1, 1)
    plain = TaskFactory()
    claimed = {task.pk for task in claim("w", 5, lease_seconds=30)}
    assert claimed == {free[0].pk, plain.pk}


def test_a_task_not_due_yet_does_not_count_and_is_not_claimed():
    later = timezone.now() + timezone.timedelta(hours=1)
    TaskFactory(concurrency_key="k", concurrency_limit=1, run_after=later)
    now_task = TaskFactory(concurrency_key="k", concurrency_limit=1)
    assert [task.pk for task in claim("w", 10, lease_seconds=30)] == [now_task.pk]


def test_a_key_whose_first_waiting_rows_cannot_start_starts_its_next_due_one():
    # The key's first waiting rows in claim order are not due for this claim: on PostgreSQL
    # the claim's walk of the keys then looks again for the key's next due row.
    now = timezone.now()
    earlier, later = now - timezone.timedelta(minutes=5), now + timezone.timedelta(hours=1)
    same = {"concurrency_key": "k", "concurrency_limit": 1, "queue": "q"}
    TaskFactory(priority=9, run_after=later, **same)  # not due yet
    TaskFactory(priority=8, run_after=earlier, expires_at=earlier, **same)  # expired
    TaskFactory(priority=7, run_after=earlier, **{**same, "queue": "other"})  # another queue
    TaskFactory(priority=6, run_after=earlier, name="tests.testapp.tasks.paused", **same)
    TaskPause.objects.create(name="tests.testapp.tasks.paused")  # a paused task type
    due = TaskFactory(priority=1, run_after=earlier, **same)
    TaskFactory(priority=0, run_after=earlier, **same)  # due too, but the key is full
    only_first = TaskFactory(concurrency_key="m", concurrency_limit=1, queue="q", run_after=earlier)
    claimed = claim("w", 10, queues=["q"], lease_seconds=30, now=now)
    assert {task.pk for task in claimed} == {due.pk, only_first.pk}


def test_options_from_either_declaration_and_from_using():
    one = tasks.add.using(concurrency_key="account:7").enqueue(1, 2).record
    assert (one.concurrency_key, one.concurrency_limit) == ("account:7", 1)  # a key alone: 1
    two = tasks.add.using(concurrency_limit=3).enqueue(1, 2).record
    # A limit alone limits the task itself, across the fleet.
    assert (two.concurrency_key, two.concurrency_limit) == ("tests.testapp.tasks.add", 3)
    three = django_tasks.multiply.using(concurrency_key="a", concurrency_limit=2).enqueue(2, 3)
    assert (three.record.concurrency_key, three.record.concurrency_limit) == ("a", 2)
    ids = tasks.add.using(concurrency_key="bulk").enqueue_many([(1, 2), (3, 4)])
    assert set(Task.objects.filter(pk__in=ids).values_list("concurrency_key", flat=True)) == {
        "bulk"
    }
    plain = tasks.add.enqueue(1, 2).record
    assert (plain.concurrency_key, plain.concurrency_limit) == (None, None)


@pytest.mark.parametrize(
    "options",
    [
        {"concurrency_key": ""},
        {"concurrency_key": "a\x00b"},
        {"concurrency_key": "k" * 201},
        {"concurrency_key": 42},
        {"concurrency_key": "\ud800"},
        {"concurrency_limit": 0},
        {"concurrency_limit": -1},
        {"concurrency_limit": True},
        {"concurrency_limit": 2**31},
        {"concurrency_limit": 1.5},
    ],
)
def test_bad_keys_and_limits_are_refused_before_anything_is_written(options):
    with pytest.raises(TaskOptionError) as refused:
        tasks.add.using(**options).enqueue(1, 2)
    assert isinstance(refused.value, InvalidTask)
    assert isinstance(refused.value, PayloadError)
    assert not Task.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_never_exceed_a_limit():
    """Claims racing on several connections (threads): the database decides, not luck."""
    keyed("shared", 3, 40)
    keyed("single", 1, 40)
    barrier = threading.Barrier(6)
    errors = []

    def claimer(number):
        try:
            barrier.wait()
            for _ in range(5):
                claim(f"w{number}", 4, lease_seconds=30)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=claimer, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert (running_of("shared"), running_of("single")) == (3, 1)


@pytest.mark.django_db(transaction=True)
def test_a_key_another_claim_is_deciding_is_skipped_not_waited_for(postgres_only):
    """While a claim holds a key (its transaction's lock of it), other claims skip the key."""
    keyed("k", 5, 3)
    plain = TaskFactory()
    holder = connections.create_connection("default")
    try:
        holder.set_autocommit(False)
        with holder.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(1785689426, hashtext('k'))")
        assert [task.pk for task in claim("w", 10, lease_seconds=30)] == [plain.pk]
        holder.rollback()  # the lock goes with the transaction
        assert len(claim("w", 10, lease_seconds=30)) == 3
    finally:
        holder.close()
