"""The lease keeper against the database, built alone: leases renewed, lost claims handed back,
the worker's row, tasks that ignore their cancellation (no processes)."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.db import retry_on_database_error
from jobs.models import Task
from jobs.models import Worker as WorkerRecord
from jobs.states import Status
from jobs.worker.leases import LeaseKeeper
from tests import helpers
from tests.factories import TaskFactory
from tests.helpers import claimed_from_task

pytestmark = pytest.mark.django_db

WORKER_ID = "host:123:abcdef"


def retry(operation, what, **options):
    return retry_on_database_error(operation, what=what, model=Task, **options)


class Holder:
    """What a worker gives its lease keeper: what it holds, and how to stop tasks."""

    def __init__(self):
        self.holding, self.completing, self.running = [], [], []
        self.recording = []  # of ``completing``: the successes the claim in flight records
        self.claim_busy, self.stopped = False, []
        self.drained: list[bool] = []

    def keeper(self, clock=time.monotonic, lease_seconds=60) -> LeaseKeeper:
        return LeaseKeeper(
            WORKER_ID, ["a"], concurrency=2, lease_seconds=lease_seconds, retry=retry,
            holding=lambda: self.holding, completing=lambda: self.completing,
            recording=lambda: self.recording,
            running=lambda: self.running, busy=lambda: len(self.running),
            claim_busy=lambda: self.claim_busy,
            stop=lambda reason, ids: self.stopped.append((reason, ids)),
            drain=lambda: self.drained.append(True), clock=clock,
        )  # fmt: skip


@pytest.fixture
def holder():
    return Holder()


@pytest.fixture
def keeper(holder):
    keeper = holder.keeper()
    keeper.register()
    return keeper


def test_register_and_unregister_write_the_workers_row(keeper):
    record = WorkerRecord.objects.get(pk=WORKER_ID)
    assert (record.hostname, record.pid, record.queues, record.concurrency) == (
        "host", 123, ["a"], 2,
    )  # fmt: skip
    assert record.stopped_at is None
    keeper.unregister()
    record.refresh_from_db()
    assert record.stopped_at is not None
    assert (record.in_flight, record.busy_processes, record.running_tasks) == (0, 0, 0)


def test_heartbeat_renews_only_the_leases_of_tasks_it_holds(keeper, holder):
    TaskFactory.create_batch(4)
    running, waiting, reported, lost = helpers.claim(WORKER_ID, 4, lease_seconds=1)
    holder.holding = [claimed_from_task(running), claimed_from_task(waiting)]
    holder.completing = [reported.pk]  # its success not written yet
    holder.running = [holder.holding[0]]  # in a child; the other is claimed ahead

    keeper.heartbeat()

    for task in (running, waiting, reported, lost):
        task.refresh_from_db()
    for task in (running, waiting, reported):
        assert task.status == Status.RUNNING
        assert task.lease_expires_at > timezone.now() + timedelta(seconds=30)
    # Claimed by this worker, but it does not hold it (the claim's reply was lost): handed back.
    assert lost.status == Status.PENDING
    assert lost.attempts == 0
    record = WorkerRecord.objects.get(pk=WORKER_ID)
    # Held: 3 (one running, one claimed ahead, one finishing); running in a child: 1.
    assert (record.in_flight, record.busy_processes, record.running_tasks) == (3, 1, 1)
    assert record.last_heartbeat_at > timezone.now() - timedelta(seconds=5)


def test_the_claim_in_flight_records_its_successes_their_fresh_leases_are_left_alone(
    keeper, holder
):
    """The claim's transaction writes them (``claim_and_record``): renewing them would wait for
    its row locks, or make it wait. Only a lease run low (a claim stuck) is renewed."""
    TaskFactory.create_batch(3)
    fresh, low, held = helpers.claim(WORKER_ID, 3, lease_seconds=60)
    Task.objects.filter(pk=low.pk).update(lease_expires_at=timezone.now() + timedelta(seconds=20))
    holder.completing = [fresh.pk, low.pk, held.pk]
    holder.recording = [fresh.pk, low.pk]  # ``held`` waits for the next claim

    before = {task.pk: task.lease_expires_at for task in (fresh, low, held)}
    keeper.heartbeat()

    after = dict(Task.objects.values_list("pk", "lease_expires_at"))
    assert after[fresh.pk] == before[fresh.pk]  # not written at all
    assert after[low.pk] > timezone.now() + timedelta(seconds=50)
    assert after[held.pk] > before[held.pk]
    # Not lost claims either: still running, held by this worker.
    assert Task.objects.filter(status=Status.RUNNING, worker_id=WORKER_ID).count() == 3
    assert WorkerRecord.objects.get(pk=WORKER_ID).in_flight == 3


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_does_not_wait_for_the_rows_a_claim_holds(postgres_only, holder):
    """A success the claim in flight records, its lease run low, its row locked by the claim's
    transaction: skipped (the claim writes it, or hands it back), without waiting; the other
    leases are renewed."""
    keeper = holder.keeper()
    keeper.register()
    TaskFactory.create_batch(2)
    locked_row, running = helpers.claim(WORKER_ID, 2, lease_seconds=60)
    low = timezone.now() + timedelta(seconds=20)
    Task.objects.filter(pk=locked_row.pk).update(lease_expires_at=low)
    holder.holding = [claimed_from_task(running)]
    holder.completing = holder.recording = [locked_row.pk]
    # Another transaction holds the row as the claim's succeed_many does.
    lock_row = Task.objects.select_for_update().filter(pk=locked_row.pk).exists
    with helpers.in_another_transaction(lock_row) as locked:
        assert locked
        started = time.monotonic()
        keeper.heartbeat()
        took = time.monotonic() - started
    assert took < 5
    leases = dict(Task.objects.values_list("pk", "lease_expires_at"))
    assert leases[locked_row.pk] == low
    assert leases[running.pk] > timezone.now() + timedelta(seconds=50)


def test_heartbeat_leaves_other_workers_tasks_alone(keeper):
    other = TaskFactory(running=True, worker_id="another-worker")
    keeper.heartbeat()
    other.refresh_from_db()
    assert other.status == Status.RUNNING
    assert Task.objects.running().count() == 1


def test_while_a_claim_runs_its_rows_are_not_taken_for_lost(keeper, holder):
    TaskFactory()
    (taken,) = helpers.claim(WORKER_ID, 1, lease_seconds=60)
    holder.claim_busy = True  # its reply not collected yet: not in hand, but not lost
    keeper.heartbeat()
    taken.refresh_from_db()
    assert (taken.status, taken.worker_id) == (Status.RUNNING, WORKER_ID)


def test_a_task_that_ignores_its_cancellation_is_stopped(keeper, holder, settings):
    settings.JOBS_CANCEL_GRACE = 10
    TaskFactory.create_batch(2)
    stubborn, fresh = helpers.claim(WORKER_ID, 2, lease_seconds=60)
    Task.objects.filter(pk=stubborn.pk).update(
        cancel_requested_at=timezone.now() - timedelta(seconds=11)
    )
    Task.objects.filter(pk=fresh.pk).update(cancel_requested_at=timezone.now())
    holder.holding = holder.running = [claimed_from_task(stubborn), claimed_from_task(fresh)]
    keeper.heartbeat()
    assert holder.stopped == [("cancel", {stubborn.pk})]


class Clock:
    def __init__(self):
        self.now = 5000.0

    def __call__(self):
        return self.now


def test_a_late_heartbeat_the_database_answers_renews_rather_than_stops(holder):
    clock = Clock()
    keeper = holder.keeper(clock=clock)
    keeper.register()
    TaskFactory()
    (running,) = helpers.claim(WORKER_ID, 1, lease_seconds=60)
    holder.holding = holder.running = [claimed_from_task(running)]
    clock.now += 60 * 0.75  # a quarter of the lease left: stopped unless renewed now
    assert keeper.may_lapse()
    keeper.stop_unleased()
    assert holder.stopped == []
    assert not keeper.may_lapse()


def test_heartbeats_come_every_third_of_a_lease(
    keeper, holder, settings, django_assert_num_queries
):
    settings.JOBS_CANCEL_GRACE = 3600
    clock = Clock()
    keeper = holder.keeper(clock=clock, lease_seconds=30)
    keeper.heartbeat()
    assert keeper.next_at() == 5010.0
    clock.now += 9.0
    with django_assert_num_queries(0):
        keeper.heartbeat()  # not due
    assert keeper.next_at() == 5010.0
    keeper.beat_soon()  # after a claim's fault, say
    keeper.heartbeat()
    assert keeper.next_at() == 5019.0


def test_a_heartbeat_that_finds_an_operators_stop_request_drains_the_worker(keeper, holder):
    keeper.heartbeat()
    assert holder.drained == []
    WorkerRecord.objects.filter(pk=WORKER_ID).update(stop_requested_at=timezone.now())
    TaskFactory()
    (running,) = helpers.claim(WORKER_ID, 1, lease_seconds=1)
    holder.holding = holder.running = [claimed_from_task(running)]
    keeper.beat_soon()
    keeper.heartbeat()
    assert holder.drained == [True]
    running.refresh_from_db()  # its lease still renewed: it runs to its end
    assert running.lease_expires_at > timezone.now() + timedelta(seconds=30)
