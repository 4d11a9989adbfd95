"""The lease keeper alone, no database: when it stops tasks whose lease may lapse, on a clock."""

import logging
import uuid

import pytest
from django.db import OperationalError

from jobs.worker.leases import LeaseKeeper
from jobs.worker.wire import Claimed

LEASE = 60.0


class Clock:
    def __init__(self):
        self.now = 5000.0

    def __call__(self):
        return self.now


class Database:
    """A ``retry`` standing for the database: silent once told to be (the heartbeat that
    reaches it is a database test, ``tests/db/test_leases.py``)."""

    def __init__(self):
        self.silent, self.calls = False, []

    def __call__(self, operation, what, **options):
        self.calls.append(what)
        if self.silent:
            raise OperationalError("connection refused")


def claimed(name="tests.testapp.tasks.add") -> Claimed:
    return Claimed(uuid.uuid4(), 1, "w", name, "default", b"{}")


class Worker:
    """What the keeper is given by its worker: what it holds, and a way to stop tasks."""

    def __init__(self):
        self.holding, self.running, self.stopped = [], [], []

    def keeper(self, database, clock) -> LeaseKeeper:
        return LeaseKeeper(
            "host:1:abc", [], concurrency=1, lease_seconds=LEASE, retry=database,
            holding=lambda: self.holding, completing=lambda: [], running=lambda: self.running,
            busy=lambda: len(self.running),
            claim_busy=lambda: False, stop=lambda reason, ids: self.stopped.append((reason, ids)),
            clock=clock,
        )  # fmt: skip


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def database():
    return Database()


@pytest.fixture
def worker():
    return Worker()


@pytest.fixture
def keeper(worker, database, clock):
    keeper = worker.keeper(database, clock)
    keeper.register()
    database.calls.clear()
    return keeper


def test_registering_starts_the_leases(keeper, database, clock):
    assert not keeper.may_lapse()
    clock.now += LEASE - keeper.margin() - 0.001
    assert not keeper.may_lapse()
    clock.now += 0.001
    assert keeper.may_lapse()


def test_nothing_is_stopped_while_more_than_a_quarter_of_the_lease_is_left(
    keeper, worker, database, clock
):
    worker.holding = worker.running = [claimed()]
    database.silent = True
    clock.now += LEASE * 0.74
    keeper.stop_unleased()
    assert worker.stopped == []
    assert database.calls == []  # not even a heartbeat out of turn


def test_running_tasks_are_stopped_once_the_lease_may_lapse_and_the_database_is_silent(
    keeper, worker, database, clock, caplog
):
    caplog.set_level(logging.ERROR, logger="jobs.worker.leases")
    task = claimed()
    worker.holding, worker.running = [task, claimed()], [task]
    database.silent = True
    clock.now += LEASE * 0.75
    keeper.stop_unleased()
    assert database.calls == ["heartbeat"]  # one last try first
    assert worker.stopped == [("lease", None)]  # every task it holds
    assert f"task stopped, its lease could not be renewed id={task.id}" in caplog.text
    assert "database_silent_for=45.0s" in caplog.text


def test_a_worker_holding_nothing_stops_nothing(keeper, worker, database, clock):
    database.silent = True
    clock.now += LEASE * 2
    keeper.stop_unleased()
    assert (worker.stopped, database.calls) == ([], [])


def test_an_outage_is_logged_once_and_heartbeats_come_every_second_meanwhile(
    keeper, database, clock, caplog
):
    caplog.set_level(logging.WARNING, logger="jobs.worker.leases")
    database.silent = True
    keeper.heartbeat()
    assert "running_tasks_stopped_in=45.0s" in caplog.text
    assert keeper.next_at() == clock.now + 1.0
    clock.now += 1.0
    keeper.heartbeat()
    assert database.calls == ["heartbeat", "heartbeat"]
    assert caplog.text.count("database unreachable") == 1
