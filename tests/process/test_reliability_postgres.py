"""Worker promises that need PostgreSQL: NOTIFY wake-up, connection faults, many workers."""

import signal

import pytest

from jobs.models import Task, Worker
from jobs.states import Status
from tests.conftest import terminating_worker_connections, wait_for
from tests.testapp import tasks
from tests.testapp.models import SideEffect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]


@pytest.fixture(autouse=True)
def _postgres(postgres_only):
    pass


def test_notify_wakes_an_idle_worker_well_before_its_poll(start_worker):
    worker = start_worker("--poll-interval", "30")
    wait_for(lambda: "worker started" in worker.output, message="worker start")
    latencies = []
    for i in range(5):
        task = tasks.add.enqueue(i, i).record
        wait_for(
            lambda task=task: Task.objects.filter(pk=task.pk, status=Status.SUCCEEDED).exists(),
            timeout=10,
            interval=0.01,
            message="the task to run",
        )
        task.refresh_from_db()
        latencies.append((task.started_at - task.created_at).total_seconds())
    assert "listen=True" in worker.output
    assert max(latencies) < 2.0, latencies  # a poll would take up to 30 s


def test_worker_survives_its_connections_being_terminated(start_worker):
    work = [tasks.write_and_pause.enqueue(f"k{i}").record for i in range(60)]
    worker = start_worker("--concurrency", "2")
    # Terminations before the worker has connected would cut nothing (a loaded machine can take
    # longer to start a worker than the three terminations take).
    wait_for(lambda: "worker started" in worker.output, message="worker start")
    with terminating_worker_connections(every=0.7):
        wait_for(
            lambda: (
                Task.objects.filter(pk__in=[t.pk for t in work], status=Status.SUCCEEDED).count()
                == len(work)
            ),
            timeout=90,
            interval=0.2,
            message="every task to succeed despite terminated connections",
        )
    assert not Task.objects.running().exists()
    assert worker.process.poll() is None, worker.output  # still serving
    assert "database fault" in worker.output or "listen connection lost" in worker.output


def test_four_workers_drain_2000_tasks_each_run_exactly_once(start_worker):
    # The four are up before the tasks arrive, and each task lasts 50 ms (a drain of 12 s at
    # least): with no-op tasks three workers could empty the table between two polls of the
    # fourth (bulk_create sends no NOTIFY), and "the work was shared" would be luck.
    workers = [start_worker("--concurrency", "2") for _ in range(4)]
    wait_for(
        lambda: Worker.objects.filter(stopped_at=None).count() == 4, timeout=60,
        message="four workers to start",
    )  # fmt: skip
    Task.objects.bulk_create(
        [
            Task(
                name="tests.testapp.tasks.write_and_pause", payload={"args": [str(i)], "kwargs": {}}
            )
            for i in range(2000)
        ]
    )
    wait_for(
        lambda: Task.objects.filter(status=Status.SUCCEEDED).count() == 2000, timeout=120,
        message="every task to succeed",
    )  # fmt: skip
    for worker in workers:
        worker.signal(signal.SIGTERM)
    assert all(worker.wait(60) == 0 for worker in workers), [w.output[-2000:] for w in workers]
    assert Task.objects.filter(status=Status.SUCCEEDED, attempts=1).count() == 2000
    assert SideEffect.objects.count() == 2000
    assert SideEffect.objects.values("key").distinct().count() == 2000
    workers_used = {w for w in Task.objects.values_list("worker_id", flat=True)}
    assert len(workers_used) == 4  # the work really was shared
