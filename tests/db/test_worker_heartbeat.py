"""The supervisor's heartbeat, called directly (no processes): leases, lost claims, workers."""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Task
from jobs.models import Worker as WorkerRecord
from jobs.states import Status
from jobs.worker.child import Child
from jobs.worker.lifecycle import Worker
from jobs.worker.wire import Slot
from tests import helpers
from tests.factories import TaskFactory
from tests.helpers import claimed_from_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def worker():
    worker = Worker(concurrency=1)
    worker._register()
    return worker


class FakeProcess:
    pid = 0


def test_heartbeat_renews_only_the_leases_of_tasks_it_holds(worker):
    TaskFactory.create_batch(3)
    running, waiting, lost = helpers.claim(worker.worker_id, 3, lease_seconds=1)
    child = Child(process=FakeProcess(), conn=None, slot=Slot())
    child.batch = {0: claimed_from_task(running)}  # in a child's batch
    worker.children = [child]
    worker._ready.append(claimed_from_task(waiting))  # claimed, waiting for a child

    worker._heartbeat()

    for task in (running, waiting, lost):
        task.refresh_from_db()
    for task in (running, waiting):
        assert task.status == Status.RUNNING
        assert task.lease_expires_at > timezone.now() + timedelta(seconds=30)
    # Claimed by this worker, but it does not hold it (the claim's reply was lost): handed back.
    assert lost.status == Status.PENDING
    assert lost.attempts == 0
    record = WorkerRecord.objects.get(pk=worker.worker_id)
    assert record.in_flight == 2
    child.slot.close()


def test_heartbeat_leaves_other_workers_tasks_alone(worker):
    other = TaskFactory(running=True, worker_id="another-worker")
    worker._heartbeat()
    other.refresh_from_db()
    assert other.status == Status.RUNNING
    assert Task.objects.running().count() == 1


def test_with_debug_on_each_round_of_the_loop_forgets_the_query_log(worker):
    """DEBUG logs every query of a connection; the supervisor, serving no request, empties the
    log every round of its loop, as Django does per request."""
    from django.db import connection
    from django.test import override_settings

    try:
        with override_settings(DEBUG=True):
            for _ in range(20):
                Task.objects.count()
            assert len(connection.queries) >= 20
            worker._wait(0)  # one round's wait
            assert len(connection.queries) == 0
    finally:
        worker.listener.close()


class ExitedProcess:
    """A child process that has exited (a real one, reaped): what ``_lost`` is called for."""

    def __init__(self):
        import subprocess

        process = subprocess.Popen(["true"])
        process.wait()
        self.pid, self.exitcode = process.pid, 1

    def join(self, timeout=None):
        pass


def test_a_lost_child_has_its_unread_replies_taken_first(worker):
    """A child that reported finished tasks and then died (or was killed): those tasks are
    recorded as it reported them, not handed back to run again."""
    import json
    import time
    from multiprocessing import Pipe

    TaskFactory.create_batch(3)
    finished, running, unstarted = helpers.claim(worker.worker_id, 3, lease_seconds=60)
    ours, theirs = Pipe()
    reply = {"batch": 1, "results": [[0, "deferred", 3, time.time()]], "busy": 0.1, "final": False}
    theirs.send_bytes(json.dumps(reply).encode())
    theirs.close()
    child = Child(process=ExitedProcess(), conn=ours, slot=Slot())
    child.batch = dict(enumerate(claimed_from_task(t) for t in (finished, running, unstarted)))
    child.batch_number, child.timeouts = 1, {0: 10.0, 1: 10.0, 2: 10.0}
    child.slot.start(1, 1, time.monotonic())  # running the second task when it died
    worker.children, worker._stop_requested = [child], 1  # no new child for this test

    worker._lost(child)

    assert [success.task_id for success in worker._successes] == [finished.pk]
    for task in (finished, running, unstarted):
        task.refresh_from_db()
    assert (finished.status, finished.attempts) == (Status.RUNNING, 1)  # its success is queued
    assert running.status == Status.RETRYING  # recorded lost: crashed, transient
    assert (unstarted.status, unstarted.attempts) == (Status.PENDING, 0)  # handed back
    child.slot.close()
