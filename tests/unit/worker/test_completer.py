"""The completer alone, no database: when held successes are due, and how a claim carries them."""

import logging
import uuid

import pytest
from django.db import OperationalError

from jobs.transitions import Success
from jobs.worker.completer import Completer


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def success() -> Success:
    return Success(uuid.uuid4(), 1, "w", None, None)


class Writes:
    """A ``retry`` that stands for the database: records each write, or refuses them all."""

    def __init__(self, refuse=False):
        self.refuse, self.calls = refuse, []

    def __call__(self, operation, what, **options):
        self.calls.append((what, options))
        if self.refuse:
            raise OperationalError("server closed the connection unexpectedly")


@pytest.fixture
def clock():
    return Clock()


def test_held_successes_are_due_once_the_oldest_has_waited_the_delay(clock):
    completer = Completer(retry=Writes(), clock=clock)
    assert not completer.due()
    assert completer.flush_at() is None
    completer.add(success())
    clock.now += Completer.DELAY / 2
    completer.add(success())  # a later one does not move the time the first is due
    assert completer.flush_at() == pytest.approx(1000.0 + Completer.DELAY)
    assert not completer.due()
    clock.now = 1000.0 + Completer.DELAY * 1.01
    assert completer.due()


def test_held_successes_are_due_at_once_when_many(clock, monkeypatch):
    monkeypatch.setattr(Completer, "BATCH", 3)
    completer = Completer(retry=Writes(), clock=clock)
    for _ in range(2):
        completer.add(success())
    assert not completer.due()
    completer.add(success())
    assert completer.due()


def test_a_flush_writes_every_held_success_in_one_write(clock):
    writes = Writes()
    completer = Completer(retry=writes, clock=clock)
    held = [success(), success()]
    for each in held:
        completer.add(each)
    completer.flush(deadline_seconds=2.5)
    assert writes.calls == [("record 2 successes", {"deadline_seconds": 2.5})]
    assert completer.task_ids() == []
    assert completer.flush_at() is None
    completer.flush()  # nothing held: nothing written
    assert len(writes.calls) == 1


def test_successes_the_database_refuses_are_kept_and_logged(clock, caplog):
    caplog.set_level(logging.WARNING, logger="jobs.worker.completer")
    completer = Completer(retry=Writes(refuse=True), clock=clock)
    held = success()
    completer.add(held)
    completer.flush()
    assert completer.task_ids() == [held.task_id]
    assert "successes not recorded yet, database unreachable count=1" in caplog.text
    assert str(held.task_id) in caplog.text


def test_successes_a_claim_carries_keep_their_leases_until_it_is_done(clock):
    completer = Completer(retry=Writes(), clock=clock)
    first, second = success(), success()
    completer.add(first)
    assert completer.take() == [first]
    assert not completer.due()  # with the claim, not to write apart
    completer.add(second)
    assert completer.task_ids() == [second.task_id, first.task_id]  # all leases renewed
    completer.claim_done(recorded=True)
    assert completer.task_ids() == [second.task_id]


def test_successes_of_a_failed_claim_are_held_again_first_in_line(clock):
    writes = Writes()
    completer = Completer(retry=writes, clock=clock)
    first, second = success(), success()
    completer.add(first)
    completer.take()
    completer.add(second)
    completer.claim_done(recorded=False)
    assert completer.task_ids() == [first.task_id, second.task_id]
    assert completer.take() == [first, second]
