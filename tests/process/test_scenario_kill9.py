"""DESIGN scenario 2: workers killed with SIGKILL every few seconds and restarted.

Every task still ends ``succeeded``, and with an idempotency helper every side effect happened
exactly once.
"""

import random
import signal
import time

import pytest

from jobs.models import Task
from jobs.states import Status
from tests.conftest import wait_for
from tests.testapp import tasks
from tests.testapp.models import SideEffect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]

CHAOS = {"JOBS_LEASE_SECONDS": "1", "JOBS_MAINTENANCE_INTERVAL": "0.3"}
TASKS = 300


def test_tasks_survive_workers_killed_again_and_again(start_worker):
    for i in range(TASKS):
        tasks.effect_once.enqueue(str(i))
    workers = [start_worker("--concurrency", "2", env=CHAOS) for _ in range(3)]
    rng = random.Random(2)
    kills = 0
    deadline = time.monotonic() + 120

    def done():
        return Task.objects.filter(status=Status.SUCCEEDED).count() == TASKS

    def running_on(worker):
        # Its id is "host:pid:…": a kill counts only once the victim holds running tasks (on a
        # loaded machine a worker can take longer than a second to claim its first).
        return Task.objects.filter(
            status=Status.RUNNING, worker_id__contains=f":{worker.process.pid}:"
        ).exists()

    while not done() and time.monotonic() < deadline and kills < 8:
        time.sleep(1.0)
        victim = workers[rng.randrange(len(workers))]
        wait_for(lambda v=victim: done() or running_on(v), timeout=60, message="a running task")
        if done():
            break
        victim.signal(signal.SIGKILL)
        victim.wait()
        kills += 1
        workers[workers.index(victim)] = start_worker("--concurrency", "2", env=CHAOS)

    wait_for(done, timeout=120, interval=0.2, message=f"all {TASKS} tasks to succeed")
    assert kills >= 3  # the chaos really happened while tasks were running
    assert not Task.objects.exclude(status=Status.SUCCEEDED).exists()
    assert SideEffect.objects.count() == TASKS
    assert SideEffect.objects.values("key").distinct().count() == TASKS
    # Some tasks were interrupted and ran again: the effects above are once despite that.
    assert Task.objects.filter(attempts__gt=1).exists()
