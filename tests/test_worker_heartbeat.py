"""The supervisor's heartbeat, called directly (no processes): leases, lost claims, workers."""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs import claiming
from jobs.child import Child
from jobs.models import Task
from jobs.models import Worker as WorkerRecord
from jobs.states import Status
from jobs.worker import Worker
from tests.factories import TaskFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def worker():
    worker = Worker(concurrency=1)
    worker._register()
    return worker


class FakeProcess:
    pid = 0


def test_heartbeat_renews_only_the_leases_of_tasks_its_children_run(worker):
    TaskFactory.create_batch(2)
    running, lost = claiming.claim(worker.worker_id, 2, lease_seconds=1)
    worker.children = [Child(process=FakeProcess(), conn=None, task=running)]

    worker._heartbeat()

    running.refresh_from_db()
    lost.refresh_from_db()
    assert running.status == Status.RUNNING
    assert running.lease_expires_at > timezone.now() + timedelta(seconds=30)
    # Claimed by this worker, but no child has it (the claim's reply was lost): handed back.
    assert lost.status == Status.PENDING
    assert lost.attempts == 0
    record = WorkerRecord.objects.get(pk=worker.worker_id)
    assert record.in_flight == 1


def test_heartbeat_leaves_other_workers_tasks_alone(worker):
    other = TaskFactory(running=True, worker_id="another-worker")
    worker._heartbeat()
    other.refresh_from_db()
    assert other.status == Status.RUNNING
    assert Task.objects.running().count() == 1
