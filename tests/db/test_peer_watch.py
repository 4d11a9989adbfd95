"""``liveness.PeerWatch`` over real rows and this host's real /proc: which workers it judges."""

import os
import subprocess
import sys

import pytest

from jobs.models import Worker
from jobs.states import Status
from jobs.worker import liveness
from tests.factories import TaskFactory, WorkerFactory

pytestmark = pytest.mark.django_db


def direct(operation, what, **options):
    return operation()


def dead_pid_and_start():
    """A pid that was a process of ours a moment ago, and its start time."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    stat = liveness.read_stat(process.pid)
    process.kill()
    process.wait()
    assert stat is not None
    return process.pid, stat.start_time


def peer(pid, start, **fields):
    here = liveness.this_host()
    assert here is not None
    values = {"boot_id": here.boot_id, "pid_namespace": here.pid_namespace, **fields}
    return WorkerFactory(pid=pid, process_start=start, **values)


def test_a_dead_worker_of_this_host_is_rescued_and_a_live_one_is_not():
    pid, start = dead_pid_and_start()
    dead = peer(pid, start)
    alive = peer(os.getpid(), liveness.own_start_time())
    task = TaskFactory(running=True, worker_id=dead.pk)
    kept = TaskFactory(running=True, worker_id=alive.pk)
    now = [0.0]
    watch = liveness.PeerWatch("me", retry=direct, clock=lambda: now[0])
    assert watch.check_if_due() == 0  # the first check is CHECK_INTERVAL after the start
    now[0] = liveness.CHECK_INTERVAL
    assert watch.check_if_due() == 1
    task.refresh_from_db()
    kept.refresh_from_db()
    assert task.status == Status.RETRYING
    assert kept.status == Status.RUNNING
    assert list(Worker.objects.values_list("pk", flat=True)) == [alive.pk]
    assert watch.check_if_due() == 0  # not due again before CHECK_INTERVAL


@pytest.mark.parametrize(
    "fields",
    [
        {"boot_id": "another-boot"},
        {"pid_namespace": 1},
        {"process_start": None},
        {"stopped": True},
    ],
)
def test_a_worker_that_cannot_be_judged_here_is_left_to_its_lease(fields):
    pid, start = dead_pid_and_start()
    values = {"process_start": start, **fields}
    dead = peer(pid, values.pop("process_start"), **values)
    task = TaskFactory(running=True, worker_id=dead.pk)
    assert liveness.PeerWatch("me", retry=direct, clock=lambda: 10**9).check_if_due() == 0
    task.refresh_from_db()
    assert task.status == Status.RUNNING
    assert Worker.objects.filter(pk=dead.pk).exists()
