"""Per-queue caps with a real worker: ``runworker --queues imports:2,emails:8 --concurrency 10``
runs at most 2 imports at once, async ones included, while e-mails keep flowing; signals to the
whole process group and a database that goes away lose nothing. And a paused task type, skipped
by a real worker, then resumed."""

import os
import signal

import pytest

from jobs.maintenance import pausing
from jobs.models import Task, Worker
from jobs.states import Status
from tests.conftest import WorkerProcess, terminating_worker_connections, wait_for
from tests.testapp import async_tasks, tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]

CAPPED = ("--queues", "imports:2,emails:8", "--concurrency", "10")


def enqueue(imports=6, emails=60, *, import_seconds=0.6, email_seconds=0.05):
    # Imports first and of a higher priority: a claim blind to caps would take them all.
    for _ in range(imports):
        tasks.span.using(queue="imports", priority=10).enqueue(import_seconds)
    for _ in range(emails):
        tasks.span.using(queue="emails").enqueue(email_seconds)


def spans(queue):
    """(start, end) of each finished task of ``queue``, as the tasks recorded them."""
    rows = Task.objects.filter(queue=queue, status=Status.SUCCEEDED)
    return [(result[0], result[1]) for result in rows.values_list("result", flat=True)]


def most_at_once(intervals) -> int:
    """The most intervals open at one moment (an end before a start at the same moment)."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals],
                    key=lambda event: (event[0], event[1]))  # fmt: skip
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def all_done():
    return not Task.objects.exclude(status=Status.SUCCEEDED).exists()


def assert_capped_and_flowing(imports, emails):
    assert most_at_once(imports) == 2  # at its cap, never past it
    assert 2 < most_at_once(emails) <= 8
    # E-mails ran while imports held their cap: the capped queue did not hold the others back.
    both = [
        (max(a[0], b[0]), min(a[1], b[1]))
        for i, a in enumerate(imports)
        for b in imports[i + 1 :]
        if min(a[1], b[1]) > max(a[0], b[0])
    ]
    during = [e for e in emails if any(start <= e[0] and e[1] <= end for start, end in both)]
    assert len(during) >= 5, f"only {len(during)} e-mails ran while two imports ran"


def test_at_most_two_imports_at_once_while_emails_keep_flowing(start_worker):
    enqueue()
    worker = start_worker(*CAPPED)
    wait_for(lambda: Worker.objects.filter(stopped_at__isnull=True).exists(), message="worker")
    row = Worker.objects.get()
    assert (row.queues, row.queue_caps) == (["emails", "imports"], {"imports": 2, "emails": 8})
    wait_for(all_done, timeout=120, message="every task done")
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0, worker.output
    assert "queues=emails:8,imports:2 concurrency=10" in worker.output
    imports, emails = spans("imports"), spans("emails")
    assert (len(imports), len(emails)) == (6, 60)
    assert_capped_and_flowing(imports, emails)


def test_async_tasks_of_a_capped_queue_run_at_most_the_cap_at_once(start_worker):
    # A child runs up to JOBS_ASYNC_CONCURRENCY (100) async tasks together: the cap still holds.
    for n in range(8):
        async_tasks.nap.using(queue="imports").enqueue(f"i{n}", 0.4)
    for n in range(20):
        async_tasks.nap.using(queue="emails").enqueue(f"e{n}", 0.4)
    worker = start_worker("--queues", "imports:2,emails", "--concurrency", "2")
    wait_for(all_done, timeout=120, message="every task done")
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0, worker.output

    def naps(queue):
        results = Task.objects.filter(queue=queue).values_list("result", flat=True)
        return [(started, ended) for _, started, ended, _ in results]

    assert most_at_once(naps("imports")) == 2
    assert most_at_once(naps("emails")) > 2  # uncapped: many to a child, together


def test_sigterm_to_the_whole_group_while_capped_queues_are_busy_loses_nothing(
    worker_env, tmp_path, runworker
):
    enqueue(imports=4, emails=200, import_seconds=1.0, email_seconds=0.2)
    env = {**worker_env, "JOBS_SHUTDOWN_GRACE": "0.2"}  # tasks outlast the grace: handed back
    worker = WorkerProcess(CAPPED, env, tmp_path / "worker.log", start_new_session=True)
    try:
        wait_for(
            lambda: Task.objects.filter(queue="imports", status=Status.RUNNING).count() == 2,
            message="two imports running",
        )
        os.killpg(worker.process.pid, signal.SIGTERM)  # the supervisor and every child
        assert worker.wait(30) == 0, worker.output
    finally:
        worker.stop()
    assert not Task.objects.filter(status=Status.RUNNING).exists()
    # What was cut short waits again (handed back, or its loss recorded with attempts left);
    # another capped worker finishes everything, and the imports never ran more than 2 at once.
    done = runworker("--burst", *CAPPED, timeout=240)
    assert done.returncode == 0, done.stderr
    assert Task.objects.filter(status=Status.SUCCEEDED).count() == 204
    assert most_at_once(spans("imports")) == 2


def test_the_database_going_away_keeps_the_cap(start_worker, postgres_only):
    enqueue(imports=6, emails=60)
    worker = start_worker(*CAPPED)
    with terminating_worker_connections(times=3, every=0.7):
        wait_for(all_done, timeout=180, message="every task done")
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0, worker.output
    assert most_at_once(spans("imports")) <= 2


def test_a_paused_task_type_is_skipped_by_a_real_worker_then_resumed(start_worker):
    pausing.pause_task_type("tests.testapp.tasks.span")
    paused = [tasks.span.using(priority=10).enqueue(0.01).record for _ in range(3)]
    others = [tasks.add.enqueue(1, n).record for n in range(5)]
    worker = start_worker("--concurrency", "2", env={"JOBS_LEASE_SECONDS": "2"})
    wait_for(
        lambda: (
            Task.objects.filter(pk__in=[t.pk for t in others], status=Status.SUCCEEDED).count() == 5
        ),
        message="the other tasks done",
    )
    wait_for(lambda: "task type paused, not claiming it" in worker.output, message="the log")
    rows = Task.objects.filter(pk__in=[t.pk for t in paused])
    assert set(rows.values_list("status", "attempts")) == {(Status.PENDING, 0)}
    pausing.resume_task_type("tests.testapp.tasks.span")
    wait_for(lambda: rows.filter(status=Status.SUCCEEDED).count() == 3, message="resumed ones")
    wait_for(lambda: "task type resumed, claiming it again" in worker.output, message="the log")
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0, worker.output
