"""jobs.execution.effects.once: a side effect at most once per business key, with its own writes."""

import threading

import pytest
from django.db import close_old_connections, transaction

from jobs.exceptions import PayloadError
from jobs.execution import effects
from jobs.execution.context import TaskContext
from jobs.models import Effect
from tests.factories import TaskFactory
from tests.testapp.models import SideEffect


def charge(key):
    SideEffect.objects.create(key=key)
    return {"charged": 5}


@pytest.mark.django_db
def test_the_block_runs_once_per_key_and_later_callers_get_its_result():
    first = effects.once("credits:order-1", charge, "order-1")
    second = effects.once("credits:order-1", charge, "order-1")
    other = effects.once("credits:order-2", charge, "order-2")

    assert (first.ran, first.result) == (True, {"charged": 5})
    assert (second.ran, second.result) == (False, {"charged": 5})
    assert other.ran is True
    assert SideEffect.objects.filter(key="order-1").count() == 1
    assert effects.is_done("credits:order-1")


@pytest.mark.django_db
def test_a_failing_block_leaves_neither_marker_nor_writes_and_can_run_again():
    def charge_then_fail():
        SideEffect.objects.create(key="half-done")
        raise ConnectionError("payment service hung up")

    with pytest.raises(ConnectionError):
        effects.once("credits:order-3", charge_then_fail)
    assert not effects.is_done("credits:order-3")
    assert not SideEffect.objects.filter(key="half-done").exists()

    assert effects.once("credits:order-3", charge, "order-3").ran is True


@pytest.mark.django_db
def test_the_marker_commits_or_rolls_back_with_the_callers_transaction():
    class Abort(Exception):
        pass

    def request_that_rolls_back():
        with transaction.atomic():
            effects.once("invite:1:a@example.com", charge, "a")
            raise Abort

    with pytest.raises(Abort):
        request_that_rolls_back()
    assert not effects.is_done("invite:1:a@example.com")
    assert not SideEffect.objects.exists()


@pytest.mark.django_db
def test_a_duplicate_key_leaves_the_callers_transaction_usable():
    effects.once("k", charge, "k")
    with transaction.atomic():
        assert effects.once("k", charge, "k").ran is False
        SideEffect.objects.create(key="after")  # would raise if the transaction were broken
    assert SideEffect.objects.filter(key="after").exists()


@pytest.mark.django_db
def test_the_context_records_which_task_did_the_effect():
    task = TaskFactory(running=True)
    TaskContext(task).once("report:7", charge, "r")
    assert Effect.objects.get(key="report:7").task == task


@pytest.mark.django_db
def test_keys_must_be_short_non_empty_strings():
    with pytest.raises(ValueError, match="at most 255"):
        effects.once("", charge, "x")
    with pytest.raises(ValueError, match="at most 255"):
        effects.once("k" * 256, charge, "x")
    for key in ("a\x00b", "\ud800"):
        with pytest.raises(PayloadError, match="effect key"):
            effects.once(key, charge, "x")
    assert not Effect.objects.exists()


@pytest.mark.django_db
def test_a_result_no_database_stores_as_given_is_refused_and_nothing_is_recorded():
    with pytest.raises(PayloadError, match="NUL"):
        effects.once("nul-result", lambda: "a\x00b")
    assert not effects.is_done("nul-result")


@pytest.mark.django_db(transaction=True)
def test_two_connections_racing_on_one_key_run_the_block_once(postgres_only):
    """The second waits on the first's uncommitted marker, then finds the key done."""
    inside = threading.Event()
    release = threading.Event()
    outcomes = []

    def slow_charge():
        SideEffect.objects.create(key="race")
        inside.set()
        assert release.wait(30)
        return "first"

    def run(func):
        try:
            outcomes.append(effects.once("credits:race", func))
        finally:
            close_old_connections()

    first = threading.Thread(target=run, args=(slow_charge,))
    first.start()
    assert inside.wait(30)
    second = threading.Thread(target=run, args=(lambda: charge("race"),))
    second.start()
    second.join(0.5)
    assert second.is_alive()  # blocked on the unique index, not running the block
    release.set()
    first.join(30)
    second.join(30)

    assert sorted((o.ran, o.result) for o in outcomes) == [(False, "first"), (True, "first")]
    assert SideEffect.objects.filter(key="race").count() == 1
