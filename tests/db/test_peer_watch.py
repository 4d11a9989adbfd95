"""``liveness.PeerWatch`` over real rows and this host's real /proc: which workers it judges."""

import os
import subprocess
import sys

import pytest
from django.utils import timezone

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
    assert watch.check_if_due() == 0  # seen dead once: a suspect, never slept for
    assert watch.next_at() == liveness.CHECK_INTERVAL + liveness.DEATH_CONFIRM_SECONDS
    now[0] += liveness.DEATH_CONFIRM_SECONDS / 2
    assert watch.check_if_due() == 0  # not due: the confirmation comes later
    now[0] = watch.next_at()
    assert watch.check_if_due() == 1  # seen dead again, DEATH_CONFIRM_SECONDS later
    task.refresh_from_db()
    kept.refresh_from_db()
    assert task.status == Status.RETRYING
    assert kept.status == Status.RUNNING
    assert list(Worker.objects.values_list("pk", flat=True)) == [alive.pk]
    assert watch.check_if_due() == 0  # not due again before CHECK_INTERVAL


def test_a_suspect_seen_alive_again_is_forgotten(monkeypatch):
    """A reading that looked dead (a /proc read racing an exec, say) needs a second one."""
    pid, start = dead_pid_and_start()
    row = peer(pid, start)
    task = TaskFactory(running=True, worker_id=row.pk)
    now = [liveness.CHECK_INTERVAL]
    watch = liveness.PeerWatch("me", retry=direct, clock=lambda: now[0])
    assert watch.check_if_due() == 0  # suspect
    alive = {"pid": os.getpid(), "process_start": liveness.own_start_time()}
    Worker.objects.filter(pk=row.pk).update(**alive)
    now[0] = watch.next_at()
    assert watch.check_if_due() == 0  # alive at the second look: not confirmed
    assert watch.next_at() == now[0] + liveness.CHECK_INTERVAL  # and no suspect left
    task.refresh_from_db()
    assert task.status == Status.RUNNING


def test_a_dead_supervisor_whose_child_lives_is_not_rescued_until_the_child_dies():
    """Killed alone, a supervisor leaves its children for a moment (their pidfd watch): the
    rescuer waits for every child recorded on the row."""
    pid, start = dead_pid_and_start()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        child_stat = liveness.read_stat(child.pid)
        assert child_stat is not None
        row = peer(pid, start, children=[[child.pid, child_stat.start_time]])
        task = TaskFactory(running=True, worker_id=row.pk)
        now = [liveness.CHECK_INTERVAL]
        watch = liveness.PeerWatch("me", retry=direct, clock=lambda: now[0])
        for _ in range(3):
            assert watch.check_if_due() == 0
            now[0] += 1.0
        task.refresh_from_db()
        assert task.status == Status.RUNNING
    finally:
        child.kill()
        child.wait()
    assert watch.check_if_due() == 0  # the child gone: a suspect now
    now[0] = watch.next_at()
    assert watch.check_if_due() == 1
    task.refresh_from_db()
    assert task.status == Status.RETRYING


@pytest.mark.parametrize("children", [[[0, 5]], [["1", 5]], [[1]], "1,2", {"pid": 1}])
def test_children_that_are_not_pid_pairs_prove_nothing(children):
    pid, start = dead_pid_and_start()
    row = peer(pid, start, children=children)
    TaskFactory(running=True, worker_id=row.pk)
    now = [liveness.CHECK_INTERVAL]
    watch = liveness.PeerWatch("me", retry=direct, clock=lambda: now[0])
    for _ in range(3):
        assert watch.check_if_due() == 0
        now[0] += 1.0
    assert Worker.objects.filter(pk=row.pk).exists()


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


def reads_of_peers(watch, now, at):
    """How many times the workers table was read by the looks at each time of ``at``."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        for moment in at:
            now[0] = moment
            watch.check_if_due()
    return sum(Worker._meta.db_table in query["sql"] for query in queries.captured_queries)


def test_the_rows_are_read_once_per_refresh_while_nobody_looks_dead():
    peer(os.getpid(), liveness.own_start_time())
    now = [0.0]
    watch = liveness.PeerWatch("me", retry=direct, clock=lambda: now[0])
    step = liveness.CHECK_INTERVAL
    within = [step * n for n in range(1, int(liveness.PEERS_REFRESH_SECONDS / step) + 1)]
    assert len(within) >= 5
    assert reads_of_peers(watch, now, within) == 1  # every look read /proc, one the rows
    assert reads_of_peers(watch, now, [within[0] + liveness.PEERS_REFRESH_SECONDS]) == 1


def test_a_worker_registered_after_the_read_is_judged_from_the_next_read():
    now = [0.0]
    watch = liveness.PeerWatch("me", retry=direct, clock=lambda: now[0])
    now[0] = liveness.CHECK_INTERVAL  # the first look is due
    assert watch.check_if_due() == 0  # nobody else yet: the list read is empty
    pid, start = dead_pid_and_start()
    task = TaskFactory(running=True, worker_id=peer(pid, start).pk)
    now[0] += liveness.CHECK_INTERVAL
    assert watch.check_if_due() == 0  # not in the list read yet
    assert not watch._pids
    now[0] = liveness.CHECK_INTERVAL + liveness.PEERS_REFRESH_SECONDS
    assert watch.check_if_due() == 0  # read again: a suspect
    now[0] = watch.next_at()
    assert watch.check_if_due() == 1
    task.refresh_from_db()
    assert task.status == Status.RETRYING


def test_a_worker_that_stopped_since_the_read_is_dropped_not_rescued(caplog):
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    stat = liveness.read_stat(process.pid)
    assert stat is not None
    row = peer(process.pid, stat.start_time)
    now = [0.0]
    watch = liveness.PeerWatch("me", retry=direct, clock=lambda: now[0])
    now[0] = liveness.CHECK_INTERVAL  # the first look is due
    assert watch.check_if_due() == 0  # alive, and the list is kept
    process.kill()
    process.wait()
    Worker.objects.filter(pk=row.pk).update(stopped_at=timezone.now())  # a clean stop
    now[0] += liveness.CHECK_INTERVAL
    assert watch.check_if_due() == 0  # the kept row: its pid is gone, a suspect
    assert watch._pids
    now[0] = watch.next_at()
    with caplog.at_level("WARNING", logger="jobs.worker.liveness"):
        assert watch.check_if_due() == 0  # read afresh to confirm: stopped, so dropped
    assert not watch._pids
    assert "found dead" not in caplog.text
    assert Worker.objects.filter(pk=row.pk).exists()
