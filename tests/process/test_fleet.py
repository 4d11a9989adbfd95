"""A fleet of real worker processes on one database: one maintenance leader that moves when its
worker dies, and children that share a capped number of database connections."""

import signal
import time

import pytest
from django.db import connection

from jobs.models import MaintenanceLock, Task
from jobs.states import Status
from tests.conftest import ROOT, WORKER_APP_NAME, wait_for
from tests.testapp import tasks
from tests.testapp.models import SideEffect

pytestmark = pytest.mark.django_db(transaction=True)

FAST = {"JOBS_MAINTENANCE_INTERVAL": "0.2", "JOBS_LEADER_LEASE_SECONDS": "1"}


def leader() -> str | None:
    lock = MaintenanceLock.objects.filter(name="leader").first()
    return lock.holder if lock else None


def pid_of(worker_id: str) -> int:
    return int(worker_id.split(":")[1])  # host:pid:random (jobs.worker.lifecycle)


def test_the_leader_moves_when_its_worker_is_killed(start_worker):
    workers = [start_worker("--concurrency", "1", env=FAST) for _ in range(2)]
    first = wait_for(leader, timeout=30, message="a maintenance leader")
    [killed] = [w for w in workers if w.process.pid == pid_of(first)]
    [survivor] = [w for w in workers if w is not killed]
    killed.signal(signal.SIGKILL)
    killed.wait()
    started = time.monotonic()
    wait_for(lambda: leader() not in (None, first), timeout=10, message="a new leader")
    took = time.monotonic() - started
    assert pid_of(leader()) == survivor.process.pid
    assert took < 1 + 1.5  # the lease, a round and the machine's load
    wait_for(lambda: "maintenance leader now" in survivor.output, message="the survivor's log")


def test_a_stopped_leader_hands_over_at_once(start_worker):
    env = {**FAST, "JOBS_LEADER_LEASE_SECONDS": "30"}
    workers = [start_worker("--concurrency", "1", env=env) for _ in range(2)]
    first = wait_for(leader, timeout=30, message="a maintenance leader")
    [stopped] = [w for w in workers if w.process.pid == pid_of(first)]
    stopped.signal(signal.SIGTERM)
    assert stopped.wait() == 0
    # Not 30 s: the lease was given back.
    wait_for(lambda: leader() not in (None, first), timeout=5, message="a new leader")


def test_one_worker_of_three_runs_the_periodic_duty(worker_env, tmp_path, start_worker):
    (tmp_path / "fleet_settings.py").write_text(
        "from tests.settings import *  # noqa: F403\n"
        "JOBS_SCHEDULES = {'often': {'task': 'tests.testapp.tasks.add', 'every': 1, "
        "'args': [1, 2]}}\n"
    )
    env = {**FAST, "DJANGO_SETTINGS_MODULE": "fleet_settings", "PYTHONPATH": f"{tmp_path}:{ROOT}"}
    workers = [start_worker("--concurrency", "1", env=env) for _ in range(3)]
    wait_for(lambda: Task.objects.filter(status=Status.SUCCEEDED).count() >= 4, timeout=40)
    logs = [w.output for w in workers]
    scheduling = [log for log in logs if "scheduled=1" in log]
    assert len(scheduling) == 1, logs  # every slot enqueued by the same worker: the leader
    assert sum(log.count("maintenance leader now") for log in logs) == 1


def worker_connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            # This database's: the server also serves other checkouts' test workers.
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
            " AND datname = current_database()",
            [WORKER_APP_NAME],
        )
        return cursor.fetchone()[0]


@pytest.mark.parametrize("cap", [1, 2])
def test_children_share_the_connections_the_cap_allows(start_worker, cap):
    """Four children, tasks that each hold a connection for 0.3 s: at most ``cap`` at once."""
    postgres = connection.vendor == "postgresql"
    records = [tasks.effect_then_sleep.enqueue(f"k{i}", 0.3).record for i in range(12)]
    worker = start_worker("--concurrency", "4", env={"JOBS_CHILD_CONNECTIONS": str(cap)})
    most = 0
    while Task.objects.filter(pk__in=[r.pk for r in records], status=Status.SUCCEEDED).count() < 12:
        assert worker.process.poll() is None, worker.output
        if postgres:
            most = max(most, worker_connections())
        time.sleep(0.02)
    assert SideEffect.objects.count() == 12
    if postgres:
        # The supervisor, its claim thread, its listener, and ``cap`` children (no session lock:
        # JOBS_SESSION_RESCUE is off by default; it adds one).
        assert 3 < most <= 3 + cap, most


def test_a_child_killed_holding_a_slot_gives_it_back(start_worker):
    """The one slot's holder is killed by its task's timeout; the next task still connects."""
    hung = tasks.effect_then_hang.enqueue("hung").record
    worker = start_worker("--concurrency", "2", env={"JOBS_CHILD_CONNECTIONS": "1"})
    wait_for(lambda: SideEffect.objects.filter(key="hung").exists())
    after = tasks.record_effect.enqueue("after").record
    wait_for(lambda: Task.objects.get(pk=after.pk).status == Status.SUCCEEDED, timeout=20)
    assert Task.objects.get(pk=hung.pk).status == Status.FAILED
    assert worker.process.poll() is None
