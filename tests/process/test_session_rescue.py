"""Issue 16, instant rescue across hosts: a worker's PostgreSQL session (an advisory lock) is its
proof of life (``jobs.worker.session``).

The busy worker plays one on another host: it records another boot id (``JOBS_TEST_BOOT_ID``,
read by the test app), so no worker of this machine can judge it by its pid, and only its
session can prove it dead. Leases are 60 s: a rescue within seconds is the session's.
"""

import itertools
import os
import signal
import time

import pytest
from django.db import connection

from jobs.models import Task, Worker
from jobs.states import Status
from tests.conftest import WorkerProcess, terminating_worker_connections, wait_for
from tests.process.test_instant_rescue import (
    LONG_LEASE,
    assert_restarted_without_overlap,
    children_of,
    runs_by_key,
)
from tests.testapp import tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]

OTHER_HOST = {**LONG_LEASE, "JOBS_TEST_BOOT_ID": "another-host-boot-id"}
TASK_SECONDS = 20


@pytest.fixture(autouse=True)
def _postgres(postgres_only):
    pass


@pytest.fixture
def start_in_group(worker_env, tmp_path):
    """Start runworker processes each leading a process group of its own (to kill whole)."""
    started = []

    def start(*args, env=None):
        worker = WorkerProcess(
            args,
            # On for every worker here, the watchers too (off by default).
            {**worker_env, "JOBS_SESSION_RESCUE": "1", **(env or {})},
            tmp_path / f"worker-{len(started)}.log",
            start_new_session=True,
        )
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


def holds_its_key(pid: int) -> bool:
    row = Worker.objects.filter(pid=pid, stopped_at__isnull=True).first()
    if row is None or row.session_key is None:
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 "
            "AND ((classid::bigint << 32) | objid::bigint) = %s AND granted",
            [row.session_key],
        )
        return cursor.fetchone()[0] == 1


def start_pair(start, path, keys, *, seconds=TASK_SECONDS):
    """A busy worker "on another host" running every task of ``keys``, and an idle one here."""
    records = [tasks.ticks_to_file.enqueue(str(path), key, seconds).record for key in keys]
    busy = start("--concurrency", str(len(keys)), env=OTHER_HOST)
    wait_for(
        lambda: all(len(runs_by_key(path)[key]) == 1 for key in keys),
        timeout=60,
        message="every task running on the first worker",
    )
    wait_for(lambda: holds_its_key(busy.process.pid), timeout=30, message="its session lock")
    row = Worker.objects.get(pid=busy.process.pid)
    assert row.boot_id == OTHER_HOST["JOBS_TEST_BOOT_ID"]
    assert len(row.children) == len(keys)
    idle = start("--concurrency", str(len(keys)), env=LONG_LEASE)
    wait_for(lambda: holds_its_key(idle.process.pid), timeout=60, message="the second worker up")
    time.sleep(1.0)  # past its first looks: it watches the busy one now
    return busy, idle, records


def test_a_worker_killed_on_another_host_has_its_tasks_started_again_within_2_s(
    start_in_group, tmp_path
):
    path, keys = tmp_path / "runs.txt", ["a", "b"]
    busy, idle, records = start_pair(start_in_group, path, keys)
    assert "session_rescue=True" in busy.output
    children = children_of(busy.process.pid)
    killed_at = time.time()
    os.killpg(busy.process.pid, signal.SIGKILL)  # the supervisor's group: itself
    for child in children:  # and each child's group (its own, as every child leads one)
        os.killpg(child, signal.SIGKILL)
    busy.wait()
    restarts = assert_restarted_without_overlap(path, keys, set(children), killed_at)
    print(f"session rescue, kill to restart: median {sorted(restarts)[len(restarts) // 2]:.3f}s")
    for record in records:
        record.refresh_from_db()
        assert record.status == Status.RUNNING
        assert record.attempts == 2
        assert record.worker_id.split(":")[1] == str(idle.process.pid)
        assert "its database session ended" in record.error_details[-1]["message"]
    assert "by=session" in idle.output


def test_a_supervisor_killed_alone_on_another_host_never_overlaps_its_children(
    start_in_group, tmp_path
):
    path, keys = tmp_path / "runs.txt", ["a", "b"]
    busy, _idle, _records = start_pair(start_in_group, path, keys)
    children = children_of(busy.process.pid)
    killed_at = time.time()
    busy.signal(signal.SIGKILL)  # its children see it go (pidfd) and kill their groups
    busy.wait()
    assert_restarted_without_overlap(path, keys, set(children), killed_at)


def test_connections_ended_by_the_server_never_give_two_runs_of_one_task_at_once(
    start_in_group, tmp_path
):
    """pg_terminate_backend on every worker connection, three times: each worker takes a new
    key at once (or stops its children); no task ever runs twice at the same time, and all end."""
    path, keys = tmp_path / "runs.txt", ["a", "b", "c"]
    busy, _idle, records = start_pair(start_in_group, path, keys, seconds=4)
    with terminating_worker_connections(times=3, every=0.7):
        time.sleep(2.5)
    wait_for(
        lambda: all(
            r.status == Status.SUCCEEDED
            for r in Task.objects.filter(pk__in=[r.pk for r in records])
        ),
        timeout=90,
        message="every task succeeded",
    )
    for key in keys:
        spans = sorted((lines[0][1], lines[-1][1]) for lines in runs_by_key(path)[key].values())
        for (_, first_end), (second_start, _) in itertools.pairwise(spans):
            assert first_end < second_start, f"two runs of task {key} at once: {spans}"
    assert "session lock lost" in busy.output


def test_a_stopped_worker_on_another_host_keeps_its_tasks(start_in_group, tmp_path):
    """SIGSTOP for 4 s, then SIGCONT: its session lives on, its key stays held: no rescue."""
    path, keys = tmp_path / "runs.txt", ["a", "b"]
    busy, idle, records = start_pair(start_in_group, path, keys)
    group = [busy.process.pid, *children_of(busy.process.pid)]
    for pid in group:
        os.kill(pid, signal.SIGSTOP)
    time.sleep(4)
    assert holds_its_key(busy.process.pid)
    for pid in group:
        os.kill(pid, signal.SIGCONT)
    time.sleep(2.0)  # a late rescue, or a fence on waking, would show by now
    for key in keys:
        assert len(runs_by_key(path)[key]) == 1, "a live worker's task was started again"
    for record in records:
        record.refresh_from_db()
        assert record.status == Status.RUNNING
        assert record.attempts == 1
    assert "session lock lost" not in busy.output
    assert "workers found dead" not in idle.output
