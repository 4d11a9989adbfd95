"""An idle worker looks for due tasks once per poll interval, not at every wake of its loop (its
heartbeat, its looks at the peers every 0.5 s): counted from the claim thread's log of a real
worker."""

import re
import time

import pytest

from jobs.models import Task
from jobs.states import Status
from tests.conftest import wait_for
from tests.testapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)

CLAIM = re.compile(r"claimed count=(\d+) wanted=")


def claims(worker) -> int:
    return len(CLAIM.findall(worker.output))


def test_an_idle_worker_claims_once_per_poll_interval(start_worker):
    worker = start_worker("--poll-interval", "2", env={"JOBS_LOG_LEVEL": "DEBUG"})
    wait_for(lambda: "worker started" in worker.output, timeout=60, message="the worker")
    wait_for(lambda: claims(worker) >= 1, timeout=30, message="its first claim")
    time.sleep(1.0)
    before = claims(worker)
    time.sleep(6.0)
    polls = claims(worker) - before
    # 3 polls in 6 s (one more at an edge); a look at the peers taken for a poll made 12.
    assert 2 <= polls <= 4, worker.output[-3000:]
    # And the worker still answers: a task enqueued now is done.
    task = tasks.add.enqueue(2, 3).record
    wait_for(lambda: Task.objects.get(pk=task.pk).status == Status.SUCCEEDED, timeout=20)
