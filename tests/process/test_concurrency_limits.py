"""Concurrency keys with real workers: sampled, never more than the limit at once, kills too."""

import signal
import threading
import time

import pytest
from django.db import connections

from jobs.models import Task
from jobs.states import Status
from tests.conftest import wait_for
from tests.testapp import tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]

# A killed worker's tasks come back after its lease: a short one keeps the test short.
FAST = {"JOBS_LEASE_SECONDS": "1", "JOBS_MAINTENANCE_INTERVAL": "0.5"}


class Sampler:
    """Counts, every few milliseconds, the running tasks of each key; keeps the largest."""

    def __init__(self, keys):
        self.keys, self.most = keys, dict.fromkeys(keys, 0)
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self):
        try:
            while not self._stop.is_set():
                for key in self.keys:
                    count = Task.objects.filter(concurrency_key=key, status=Status.RUNNING).count()
                    self.most[key] = max(self.most[key], count)
                self.samples += 1
                time.sleep(0.005)
        finally:
            connections.close_all()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(10)


def test_workers_never_run_more_of_a_key_than_its_limit_even_while_killed(start_worker):
    for _ in range(30):
        tasks.pause.using(concurrency_key="account:1", concurrency_limit=1).enqueue(0.05)
        tasks.pause.using(concurrency_key="account:2", concurrency_limit=3).enqueue(0.05)
    free = [tasks.pause.enqueue(0.05).record for _ in range(10)]
    workers = [start_worker("--concurrency", "2", env=FAST) for _ in range(3)]
    with Sampler(["account:1", "account:2"]) as sampler:
        wait_for(
            lambda: Task.objects.filter(status=Status.SUCCEEDED).count() >= 20, timeout=60,
            message="the first tasks to finish",
        )  # fmt: skip
        workers[0].signal(signal.SIGKILL)  # its running tasks stay running until the lease ends
        workers[0].wait()
        workers.append(start_worker("--concurrency", "2", env=FAST))
        wait_for(
            lambda: Task.objects.filter(status=Status.SUCCEEDED).count() == 70, timeout=120,
            message="every task to succeed",
        )  # fmt: skip
    assert sampler.samples > 50
    assert sampler.most == {"account:1": 1, "account:2": 3}
    # The tasks without a key ran beside them.
    assert Task.objects.filter(pk__in=[task.pk for task in free], status="succeeded").count() == 10
