"""What a running worker reports at its heartbeat: processes busy never exceed its concurrency,
however many tasks it has claimed ahead or runs together on an event loop."""

import pytest

from jobs.models import Task
from jobs.models import Worker as WorkerRecord
from jobs.states import Status
from tests.conftest import wait_for
from tests.process.test_reliability import FAST
from tests.testapp import async_tasks, tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]


def reported(predicate, message):
    """The worker's row once a heartbeat reports what ``predicate`` wants."""
    found = []

    def check():
        rows = list(WorkerRecord.objects.alive())
        found[:] = rows
        return len(rows) == 1 and predicate(rows[0])

    wait_for(check, timeout=30, message=message)
    return found[0]


def test_busy_processes_count_children_not_claimed_rows(start_worker):
    for _ in range(6):
        tasks.pause.enqueue(30)
    worker = start_worker("--concurrency", "2", env=FAST)
    row = reported(lambda w: w.busy_processes == 2, "two busy children reported")
    assert row.concurrency == 2
    assert row.running_tasks == 2
    held = Task.objects.filter(status=Status.RUNNING, worker_id=row.pk).count()
    assert row.in_flight >= row.busy_processes
    assert held >= 2
    worker.stop()


def test_async_tasks_run_several_to_one_busy_process(start_worker):
    async_tasks.nap.enqueue("first", 0.2)  # the first claim takes one task per child
    for n in range(5):
        async_tasks.nap.enqueue(n, 30)
    worker = start_worker("--concurrency", "1", env=FAST)
    row = reported(lambda w: w.running_tasks == 5, "five async tasks running in one child")
    assert (row.busy_processes, row.concurrency) == (1, 1)
    worker.stop()
