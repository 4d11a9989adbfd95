"""The Worker holding its parts, called directly (no child processes): what they hold together
is renewed, claims carry the completer's successes, the wait loop."""

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.db import OperationalError, connection
from django.test import override_settings
from django.utils import timezone

from jobs.models import Task
from jobs.models import Worker as WorkerRecord
from jobs.states import Status
from jobs.transitions import Success
from jobs.worker import claiming
from jobs.worker.child import Child
from jobs.worker.lifecycle import Worker
from jobs.worker.wire import Slot
from tests import helpers
from tests.factories import TaskFactory
from tests.helpers import claimed_from_task


class FakeProcess:
    pid = 0


@pytest.fixture
def worker():
    worker = Worker(concurrency=1)
    worker.leases.register()
    yield worker
    worker.listener.close()
    worker.claimer.close()


@pytest.fixture
def child():
    child = Child(process=FakeProcess(), conn=None, slot=Slot())
    yield child
    child.slot.close()


def reported(task) -> Success:
    return Success(task.pk, task.attempts, task.worker_id, None, datetime.now(UTC))


@pytest.mark.django_db
def test_the_heartbeat_renews_what_the_pool_and_the_completer_hold(worker, child):
    TaskFactory.create_batch(4)
    running, waiting, finished, lost = helpers.claim(worker.worker_id, 4, lease_seconds=1)
    child.batch = {0: claimed_from_task(running)}  # in a child's batch
    worker.pool.children = [child]
    worker.pool.ready.append(claimed_from_task(waiting))  # claimed, waiting for a child
    worker.completer.add(reported(finished))  # reported, not written yet

    worker.leases.heartbeat()

    for task in (running, waiting, finished, lost):
        task.refresh_from_db()
    for task in (running, waiting, finished):
        assert task.status == Status.RUNNING
        assert task.lease_expires_at > timezone.now() + timedelta(seconds=30)
    assert (lost.status, lost.attempts) == (Status.PENDING, 0)  # not held: handed back
    assert WorkerRecord.objects.get(pk=worker.worker_id).in_flight == 3


@pytest.mark.django_db
def test_with_debug_on_each_round_of_the_loop_forgets_the_query_log(worker):
    """DEBUG logs every query of a connection; the supervisor, serving no request, empties the
    log every round of its loop, as Django does per request."""
    with override_settings(DEBUG=True):
        for _ in range(20):
            Task.objects.count()
        assert len(connection.queries) >= 20
        worker._wait(0)  # one round's wait
        assert len(connection.queries) == 0


@pytest.mark.django_db(transaction=True)  # the claim thread has a connection of its own
def test_a_claim_carries_the_successes_the_completer_holds(worker, child):
    TaskFactory()
    (finished,) = helpers.claim(worker.worker_id, 1, lease_seconds=60)
    due = TaskFactory()
    worker.pool.children = [child]  # idle: tasks are wanted
    worker.completer.add(reported(finished))

    worker._claim()
    claimed = worker._collect_claim(wait=True)

    assert [c.id for c in claimed] == [due.pk]
    assert list(worker.pool.ready) == claimed
    assert worker.completer.task_ids() == []
    assert Task.objects.get(pk=finished.pk).status == Status.SUCCEEDED


@pytest.mark.django_db(transaction=True)
def test_a_claim_the_database_refuses_leaves_its_successes_held(worker, child, monkeypatch):
    TaskFactory()
    (finished,) = helpers.claim(worker.worker_id, 1, lease_seconds=60)
    worker.pool.children = [child]
    worker.completer.add(reported(finished))

    def refused(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(claiming, "claim_and_record", refused)
    worker.claimer.PAUSE_AFTER_FAULT = 0.2
    with override_settings(JOBS_DATABASE_RETRY_SECONDS=0.0):
        worker._claim()
        assert worker._collect_claim(wait=True) is None

    assert worker.completer.task_ids() == [finished.pk]  # renewed still, written later
    assert not worker.claimer.can_start()  # a pause before the next claim
    assert Task.objects.get(pk=finished.pk).status == Status.RUNNING
    monkeypatch.undo()
    time.sleep(0.2)
    assert worker.claimer.can_start()
    worker._claim()
    worker._collect_claim(wait=True)
    assert Task.objects.get(pk=finished.pk).status == Status.SUCCEEDED


@pytest.mark.django_db(transaction=True)
def test_held_successes_never_wake_the_loop_while_a_claim_runs(worker, child, monkeypatch):
    """A claim longer than ``Completer.DELAY`` (a busy database): the held successes wait for
    the next claim, and the loop sleeps rather than spin (the claim's end wakes it)."""
    if worker.claimer.inline:
        pytest.skip("SQLite claims inline: no claim runs while the loop waits")
    TaskFactory()
    (finished,) = helpers.claim(worker.worker_id, 1, lease_seconds=60)
    worker.pool.children = [child]
    release = threading.Event()
    original = claiming.claim_and_record

    def slow(*args, **kwargs):
        release.wait(30)
        return original(*args, **kwargs)

    monkeypatch.setattr(claiming, "claim_and_record", slow)
    monkeypatch.setattr(worker.completer, "DELAY", 0.0)  # what is held is overdue at once
    worker._claim()
    assert worker.claimer.busy
    worker.completer.add(reported(finished))  # reported while the claim runs
    worker.leases.heartbeat()  # the next one a while away
    try:
        assert worker._wait_timeout() > 0.1
    finally:
        release.set()
        worker._collect_claim(wait=True)
    assert worker._wait_timeout() == 0.0  # now the next claim, or a flush, may carry it
    worker._claim()
    worker._collect_claim(wait=True)
    assert Task.objects.get(pk=finished.pk).status == Status.SUCCEEDED


@pytest.mark.django_db(transaction=True)
def test_held_successes_never_wake_the_loop_while_claims_pause_after_a_fault(
    worker, child, monkeypatch
):
    TaskFactory()
    (finished,) = helpers.claim(worker.worker_id, 1, lease_seconds=60)
    worker.pool.children = [child]

    def refused(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(claiming, "claim_and_record", refused)
    monkeypatch.setattr(worker.completer, "DELAY", 0.0)
    with override_settings(JOBS_DATABASE_RETRY_SECONDS=0.0):
        worker.completer.add(reported(finished))
        worker._claim()
        assert worker._collect_claim(wait=True) is None
    assert not worker.claimer.can_start()  # a pause of PAUSE_AFTER_FAULT
    worker.leases.heartbeat()  # the one the fault asked for, and the next a while away
    assert worker._wait_timeout() > 0.1  # no spin through the pause
    assert worker.completer.task_ids() == [finished.pk]  # held, renewed, written later


class _Forked(Exception):
    """Raised in place of forking: the test has seen what it came for."""


@pytest.mark.django_db(transaction=True)  # the listener and the claim thread connect apart
def test_the_first_heartbeat_and_maintenance_round_run_before_the_children_fork(monkeypatch):
    # Done after the fork they copied 2 to 3 MiB of the pages the children share
    # (docs/performance.md, 4 December); the worker's row exists before either.
    worker = Worker(concurrency=1, burst=True)
    seen = {}

    def look_instead_of_forking():
        seen["row"] = WorkerRecord.objects.filter(pk=worker.worker_id).exists()
        seen["heartbeat_due_at"] = worker.leases.next_at()
        seen["leading"] = worker.maintenance.leading
        seen["listening"] = worker.listener.connected
        raise _Forked

    monkeypatch.setattr(worker.pool, "start", look_instead_of_forking)
    with pytest.raises(_Forked):
        worker.run()
    assert seen["row"] is True
    assert seen["heartbeat_due_at"] > 0.0  # beat once: the next one is scheduled
    assert seen["leading"] is True  # the maintenance round ran (the only worker leads)
    assert seen["listening"] is worker.listener.supported  # PostgreSQL: LISTEN is up
    assert WorkerRecord.objects.get(pk=worker.worker_id).stopped_at is not None
