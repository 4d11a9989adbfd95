"""Uniqueness with a scope: one task per key while waiting, while active, or for a period."""

import math
import threading
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from jobs import transitions
from jobs.error_records import ErrorRecord
from jobs.exceptions import PayloadError
from jobs.maintenance import periodic
from jobs.maintenance.pruning import prune
from jobs.models import Task, UniqueHold
from jobs.states import Status
from jobs.tasks import uniqueness
from jobs.tasks.definition import TaskOptionError
from jobs.tasks.django_api import InvalidTask
from jobs.tasks.registry import task as jobs_task
from tests.helpers import claim
from tests.testapp import django_tasks, tasks

pytestmark = pytest.mark.django_db

ERROR = ErrorRecord(user_message="It broke.", exception="ValueError", message="broke")


def enqueue(key="k", *args, **options):
    return tasks.add.using(unique_key=key, **options).enqueue(*(args or (1, 2))).record


def start(task):
    (claimed,) = claim("w", 1, lease_seconds=30)
    assert claimed.pk == task.pk
    return claimed


# Unique while waiting --------------------------------------------------------------------------


def test_while_waiting_a_duplicate_gets_the_waiting_task_and_once_it_runs_a_new_one_is_made():
    first = enqueue(unique_while="waiting")
    again = enqueue("k", 5, 6, unique_while="waiting")
    assert (again.pk, first.created, again.created, again.replaced) == (
        first.pk,
        True,
        False,
        False,
    )
    assert again.args == [1, 2]  # returned as it is
    running = start(first)
    second = enqueue(unique_while="waiting")
    assert second.created
    assert second.pk != running.pk
    assert enqueue(unique_while="waiting").pk == second.pk
    assert Task.objects.count() == 2


def test_a_key_alone_is_held_while_waiting_and_a_scope_alone_keys_the_task_itself():
    first = enqueue()
    assert (first.unique_key, first.unique_while) == ("k", "waiting")
    assert enqueue().pk == first.pk
    assert enqueue("other").created  # another key
    assert tasks.record_effect.using(unique_key="k").enqueue("x").record.created  # another task
    alone = tasks.add.using(unique_while="active").enqueue(1, 2).record
    assert (alone.unique_key, alone.unique_while) == ("tests.testapp.tasks.add", "active")
    plain = tasks.add.enqueue(1, 2).record
    assert (plain.unique_key, plain.unique_while) == (None, None)


def test_a_waiting_task_that_ran_once_holds_its_key_no_more_and_its_retry_breaks_nothing():
    first = enqueue(unique_while="waiting")
    running = start(first)
    second = enqueue(unique_while="waiting")
    # Back to waiting beside the new one: no unique violation in the worker's bookkeeping.
    assert transitions.retry_later(running, ERROR, timezone.now())
    assert Task.objects.get(pk=first.pk).status == Status.RETRYING
    assert enqueue(unique_while="waiting").pk == second.pk


# Unique while active ---------------------------------------------------------------------------


@pytest.mark.parametrize("outcome", ["succeed", "fail", "cancel_running"])
def test_while_active_a_running_task_holds_its_key_until_it_ends(outcome):
    first = enqueue(unique_while="active")
    running = start(first)
    assert enqueue(unique_while="active").pk == first.pk
    assert enqueue(unique_while="waiting").pk == first.pk  # the key is held, whatever the call
    if outcome == "fail":
        transitions.fail(running, ERROR)
    else:
        getattr(transitions, outcome)(running)
    after = enqueue(unique_while="active")
    assert after.created
    assert after.pk != first.pk


def test_a_cancelled_waiting_task_frees_its_key():
    first = enqueue(unique_while="active")
    transitions.cancel(first)
    assert enqueue(unique_while="active").created


def test_a_requeued_task_gives_up_its_key_instead_of_failing():
    first = enqueue(unique_while="active")
    transitions.fail(start(first), ERROR)
    second = enqueue(unique_while="active")
    assert transitions.requeue(first)  # no IntegrityError: it no longer holds the key
    assert (first.status, first.unique_key, first.unique_while) == ("pending", "k", None)
    assert enqueue(unique_while="active").pk == second.pk


# Unique for a period ---------------------------------------------------------------------------


def test_for_a_period_a_duplicate_gets_the_first_task_whatever_became_of_it():
    first = enqueue(unique_for=300)
    assert (first.unique_key, first.unique_while) == ("k", None)
    hold = UniqueHold.objects.get()
    assert hold.task_id == first.pk
    assert timedelta(seconds=299) < hold.expires_at - first.created_at <= timedelta(seconds=300)
    transitions.succeed(start(first))
    again = enqueue(unique_for=timedelta(minutes=5))
    assert (again.pk, again.created, again.status) == (first.pk, False, "succeeded")
    UniqueHold.objects.update(expires_at=timezone.now() - timedelta(seconds=1))  # time passes
    later = enqueue(unique_for=300)
    assert later.created
    assert UniqueHold.objects.get().task_id == later.pk
    # The period counts from the first enqueue: a duplicate does not extend it.
    expires = UniqueHold.objects.get().expires_at
    enqueue(unique_for=3000)
    assert UniqueHold.objects.get().expires_at == expires


def test_a_hold_whose_task_was_deleted_is_taken_over():
    first = enqueue(unique_for=300)
    Task.objects.filter(pk=first.pk).delete()
    second = enqueue(unique_for=300)
    assert second.created
    assert UniqueHold.objects.get().task_id == second.pk


def test_pruning_deletes_expired_holds_only():
    enqueue("old", unique_for=60)
    enqueue("new", unique_for=60)
    UniqueHold.objects.filter(key="old").update(expires_at=timezone.now() - timedelta(seconds=1))
    prune()
    assert list(UniqueHold.objects.values_list("key", flat=True)) == ["new"]


# What a duplicate does -------------------------------------------------------------------------


@pytest.mark.parametrize("scope", [{"unique_while": "waiting"}, {"unique_for": 60}])
def test_replace_gives_a_waiting_task_the_duplicates_arguments_and_due_time(scope):
    first = enqueue("k", 1, 1, on_duplicate="replace", delay=10, **scope)
    later = enqueue("k", 2, 2, on_duplicate="replace", delay=60, **scope)
    assert (later.pk, later.created, later.replaced) == (first.pk, False, True)
    stored = Task.objects.get(pk=first.pk)
    assert stored.args == [2, 2] == later.args
    assert stored.run_after == later.run_after > first.run_after + timedelta(seconds=45)
    assert Task.objects.count() == 1


@pytest.mark.parametrize("scope", [{"unique_while": "active"}, {"unique_for": 60}])
def test_replace_never_touches_a_running_task(scope):
    first = enqueue("k", 1, 1, on_duplicate="replace", **scope)
    start(first)
    again = enqueue("k", 2, 2, on_duplicate="replace", **scope)
    assert (again.pk, again.created, again.replaced) == (first.pk, False, False)
    assert Task.objects.get(pk=first.pk).args == [1, 1]


def test_replace_declared_on_the_task_applies_to_the_keys_of_calls():
    # The same function declared again: the registry keeps the testapp's declaration.
    debounced = jobs_task(on_duplicate="replace", unique_while="waiting")(tasks.add.func)
    first = debounced.using(unique_key="r").enqueue(1, 1).record
    assert debounced.using(unique_key="r").enqueue(3, 3).record.replaced
    assert Task.objects.get(pk=first.pk).args == [3, 3]


def test_django_tasks_take_the_same_options():
    first = django_tasks.multiply.using(unique_key="m", unique_while="active").enqueue(2, 3)
    again = django_tasks.multiply.using(unique_key="m", unique_while="active").enqueue(4, 5)
    assert again.id == first.id
    assert not again.record.created


def test_a_duplicate_does_not_break_the_callers_transaction():
    with transaction.atomic():
        enqueue(unique_while="waiting")
        enqueue(unique_while="waiting")
        enqueue("p", unique_for=60)
        enqueue("p", unique_for=60, on_duplicate="replace")
        tasks.add.enqueue(3, 4)  # the transaction is still usable
    assert Task.objects.count() == 3


# Options ---------------------------------------------------------------------------------------


def test_a_scope_passed_to_using_replaces_the_other():
    declared = tasks.add.using(unique_for=60)
    assert declared.using(unique_while="active").unique_for is None
    assert declared.using(unique_while="active").using(unique_for=5).unique_while is None


@pytest.mark.parametrize(
    "options",
    [
        {"unique_key": ""},
        {"unique_key": "a\x00b"},
        {"unique_key": "k" * 256},
        {"unique_key": 42},
        {"unique_key": "\ud800"},
        {"unique_while": "running"},
        {"unique_while": "WAITING"},
        {"unique_while": ""},
        {"unique_while": 1},
        {"on_duplicate": "ignore"},
        {"on_duplicate": True},
        {"unique_for": 0},
        {"unique_for": -1},
        {"unique_for": math.nan},
        {"unique_for": math.inf},
        {"unique_for": 1e300},
        {"unique_for": 366 * 86400 + 1},
        {"unique_for": True},
        {"unique_for": "60"},
        {"unique_for": timedelta(0)},
        {"unique_for": timedelta(days=-1)},
        {"unique_for": timedelta(days=367)},
        {"unique_while": "waiting", "unique_for": 60},
        {"unique_while": "active", "unique_for": timedelta(seconds=60)},
    ],
)
def test_bad_values_and_combinations_are_refused_before_anything_is_written(options):
    with pytest.raises(TaskOptionError) as refused:
        tasks.add.using(**options).enqueue(1, 2)
    assert isinstance(refused.value, InvalidTask)
    assert isinstance(refused.value, PayloadError)
    with pytest.raises(TaskOptionError):
        jobs_task(**options)(tasks.add.func)
    assert not Task.objects.exists()


@pytest.mark.parametrize(
    "scope", [{"unique_while": "waiting"}, {"unique_while": "active"}, {"unique_for": 60}]
)
def test_with_an_idempotency_key_too_both_keys_hold(scope):
    first = enqueue("k", 1, 1, idempotency_key="i1", on_duplicate="replace", **scope)
    # The same idempotency key: its task, unchanged, even when the scope would replace.
    same = enqueue("k", 2, 2, idempotency_key="i1", on_duplicate="replace", **scope)
    assert (same.pk, same.created, same.replaced, same.args) == (first.pk, False, False, [1, 1])
    # Another idempotency key, the same unique key: the scope decides (here, replace).
    other = enqueue("k", 3, 3, idempotency_key="i2", on_duplicate="replace", **scope)
    assert (other.pk, other.replaced, other.args) == (first.pk, True, [3, 3])
    # Another unique key, the first idempotency key: that key decides, for ever.
    transitions.succeed(start(first))
    again = enqueue("k2", 4, 4, idempotency_key="i1", **scope)
    assert (again.pk, again.created) == (first.pk, False)
    assert Task.objects.count() == 1
    assert UniqueHold.objects.count() == (1 if "unique_for" in scope else 0)


@jobs_task(unique_while="active")
def one_at_a_time(): ...


def test_a_schedule_of_a_task_unique_while_active_skips_slots_while_one_is_active():
    spec = periodic.PeriodicTask("minutely", f"{__name__}.one_at_a_time", every=60)
    slot = timezone.now().replace(microsecond=0)
    first = periodic.enqueue_slot(spec, slot)
    assert first.created
    start(Task.objects.get(pk=first.task_id))
    skipped = periodic.enqueue_slot(spec, slot + timedelta(minutes=1))
    assert (skipped.task_id, skipped.created) == (first.task_id, False)
    transitions.succeed(Task.objects.get(pk=first.task_id))
    assert periodic.enqueue_slot(spec, slot + timedelta(minutes=2)).created
    assert periodic.enqueue_slot(spec, slot + timedelta(minutes=2)).created is False


def test_enqueue_many_refuses_a_unique_key():
    for options in ({"unique_key": "k"}, {"unique_while": "active"}, {"unique_for": 5}):
        with pytest.raises(ValueError, match="names one task"):
            tasks.add.using(**options).enqueue_many([(1, 2)])
    assert not Task.objects.exists()


def test_the_holder_of_a_key_is_read_through_the_keys_index_not_the_task_names_rows():
    Task.objects.bulk_create(
        Task(name="tests.testapp.tasks.add", status=Status.SUCCEEDED, unique_key=f"k{number}")
        for number in range(3000)
    )
    enqueue(unique_while="waiting")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {Task._meta.db_table}")
    plan = uniqueness.holders("tests.testapp.tasks.add", "k", using="default").explain()
    assert "jobs_task_unique_while" in plan, plan
    assert uniqueness.holders("tests.testapp.tasks.add", "k", using="default").count() == 1


# Racing enqueues (threads here; processes: tests/process/test_unique_races.py) -----------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "options",
    [
        {"unique_while": "waiting"},
        {"unique_while": "active", "on_duplicate": "replace"},
        {"unique_for": 60},
        {"unique_for": 60, "on_duplicate": "replace"},
    ],
)
def test_concurrent_enqueues_of_one_key_make_one_task(options):
    barrier = threading.Barrier(6)
    results, errors = [], []

    def enqueuer(number):
        try:
            barrier.wait()
            for round_ in range(5):
                task = enqueue("race", number, round_, **options)
                results.append((task.pk, task.created))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=enqueuer, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert len(results) == 30
    assert Task.objects.count() == 1
    assert [created for _, created in results].count(True) == 1
    assert {pk for pk, _ in results} == {Task.objects.get().pk}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("outcome", ["commit", "roll back"])
@pytest.mark.parametrize("scope", [{"unique_while": "waiting"}, {"unique_for": 60}])
def test_an_enqueue_racing_an_uncommitted_one_waits_for_its_outcome(scope, outcome):
    """The second enqueue waits for the first's transaction: it gets the first's task if that
    commits, and makes its own if it rolls back (the key was never held)."""
    first_inserted = threading.Event()
    results, errors = {}, []

    def first():
        try:
            with transaction.atomic():
                results["first"] = enqueue("u", 1, 1, **scope).pk
                first_inserted.set()
                threading.Event().wait(0.5)  # hold the uncommitted row while the second tries
                if outcome == "roll back":
                    raise LookupError("the request failed")
        except LookupError:
            pass
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            first_inserted.set()
            connection.close()

    def second():
        try:
            first_inserted.wait(10)
            task = enqueue("u", 2, 2, **scope)
            results["second"] = (task.pk, task.created)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    (stored,) = Task.objects.all()
    if outcome == "commit":
        assert results["second"] == (results["first"], False)
        assert stored.args == [1, 1]
    else:
        assert results["second"] == (stored.pk, True)
        assert stored.args == [2, 2]
