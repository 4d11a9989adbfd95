"""A worker and a database outage: it obeys its signals, keeps running, never runs a task twice
at the same time. Real ``runworker`` processes against a private PostgreSQL server that each test
stops and starts (``private_postgres``); never the shared server."""

import signal
import subprocess
import sys
import time
import uuid

from tests.conftest import ROOT
from tests.hostile.conftest import processes_with, wait_until


def start_worker(server, tmp_path, *args, **settings):
    marker = f"jobs-outage-{uuid.uuid4().hex}"
    with open(tmp_path / f"{marker}.log", "w") as log:  # the process keeps its own copy
        process = subprocess.Popen(
            [sys.executable, "manage.py", "runworker", *args],
            cwd=ROOT,
            env=server.env(JOBS_TEST_MARKER=marker, **settings),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    process.marker, process.log_path = marker, tmp_path / f"{marker}.log"
    return process


def output(process) -> str:
    return process.log_path.read_text()


def enqueue_logging_task(server, path, first_attempt_seconds) -> str:
    code = (
        "from tests.testapp.hostile_tasks import logs_its_runs; "
        f"print(logs_its_runs.enqueue({str(path)!r}, {first_attempt_seconds}).id)"
    )
    return server.manage("shell", "-c", code).strip().splitlines()[-1]


def runs(path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_a_worker_started_with_the_database_down_stops_on_sigterm(database_up, tmp_path):
    database_up.stop()
    worker = start_worker(database_up, tmp_path, "--concurrency", "2",
                          JOBS_DATABASE_RETRY_SECONDS=60)  # fmt: skip
    try:
        wait_until(lambda: "database fault" in output(worker), 20, "the first database fault")
        worker.send_signal(signal.SIGTERM)
        started = time.monotonic()
        assert worker.wait(10) == 0, output(worker)
        assert time.monotonic() - started < 5, output(worker)
        assert "Traceback" not in output(worker)
        assert processes_with(worker.marker) == []
    finally:
        worker.kill()
        worker.wait(10)


def test_a_worker_that_cannot_reach_the_database_at_start_exits_1_in_one_line(
    database_up, tmp_path
):
    database_up.stop()
    worker = start_worker(database_up, tmp_path, "--concurrency", "2",
                          JOBS_DATABASE_RETRY_SECONDS=2)  # fmt: skip
    try:
        assert worker.wait(15) == 1, output(worker)
        assert "worker not started, could not register in the database" in output(worker)
        assert "Traceback" not in output(worker)
        assert processes_with(worker.marker) == []
    finally:
        worker.kill()
        worker.wait(10)


def test_outage_during_a_task_then_sigterm_exits_within_the_grace(database_up, tmp_path):
    path = tmp_path / "runs.log"
    task_id = enqueue_logging_task(database_up, path, first_attempt_seconds=2)
    worker = start_worker(database_up, tmp_path, "--concurrency", "1", "--grace", "4",
                          JOBS_DATABASE_RETRY_SECONDS=60, JOBS_LEASE_SECONDS=60)  # fmt: skip
    try:
        wait_until(lambda: runs(path), 20, "the task to start")
        database_up.stop()
        worker.send_signal(signal.SIGTERM)
        started = time.monotonic()
        assert worker.wait(15) == 0, output(worker)
        seconds = time.monotonic() - started
        # The task finished within the grace; its success could not be written, and the log
        # says what was left.
        assert seconds < 4 + 3, output(worker)
        assert runs(path)[-1].startswith("end"), runs(path)
        left = [line for line in output(worker).splitlines() if task_id in line]
        assert any("not handed back" in line or "not recorded" in line for line in left), left
        assert "Traceback" not in output(worker)
        assert processes_with(worker.marker) == []
    finally:
        worker.kill()
        worker.wait(10)
    # Not lost: still running under its lease, for a worker to rescue once it lapses.
    database_up.start()
    status, attempts = database_up.query(
        "SELECT status, attempts FROM jobs_task WHERE id = %s", [task_id]
    )[0]
    assert (status, attempts) == ("running", 1)


def test_a_second_signal_during_an_outage_stops_at_once(database_up, tmp_path):
    path = tmp_path / "runs.log"
    enqueue_logging_task(database_up, path, first_attempt_seconds=30)
    worker = start_worker(database_up, tmp_path, "--concurrency", "1", "--grace", "60",
                          JOBS_DATABASE_RETRY_SECONDS=60, JOBS_LEASE_SECONDS=60)  # fmt: skip
    try:
        wait_until(lambda: runs(path), 20, "the task to start")
        database_up.stop()
        worker.send_signal(signal.SIGTERM)
        time.sleep(1)
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(10) == 0, output(worker)
        assert processes_with(worker.marker) == []
    finally:
        worker.kill()
        worker.wait(10)


def test_a_worker_outlives_an_outage_and_never_runs_a_task_twice_at_once(database_up, tmp_path):
    """Longer than JOBS_DATABASE_RETRY_SECONDS and than the lease: the worker stops the task
    whose lease may lapse, keeps running, and once the database answers the task is rescued
    and runs again (a second attempt), never beside the first."""
    path = tmp_path / "runs.log"
    task_id = enqueue_logging_task(database_up, path, first_attempt_seconds=30)
    settings = {"JOBS_DATABASE_RETRY_SECONDS": 2, "JOBS_LEASE_SECONDS": 4,
                "JOBS_MAINTENANCE_INTERVAL": 1}  # fmt: skip
    worker = start_worker(database_up, tmp_path, "--concurrency", "1", **settings)
    try:
        wait_until(lambda: runs(path), 20, "the task to start")
        database_up.stop()
        wait_until(lambda: "lease could not be renewed" in output(worker), 10, "the task stopped")
        time.sleep(3)  # past JOBS_DATABASE_RETRY_SECONDS: the worker must still run
        assert worker.poll() is None, output(worker)
        database_up.start()
        wait_until(
            lambda: (
                database_up.query("SELECT status FROM jobs_task WHERE id = %s", [task_id])
                == [("succeeded",)]
            ),
            20,
            f"the task to succeed\n{output(worker)}",
        )
        starts = [line for line in runs(path) if line.startswith("start")]
        assert len(starts) == 2, runs(path)
        assert starts[1].endswith("attempt=2 alive=[]"), runs(path)
        assert "database reachable again" in output(worker)
        assert "Traceback" not in output(worker)
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(10) == 0, output(worker)
        assert processes_with(worker.marker) == []
    finally:
        worker.kill()
        worker.wait(10)
    result = database_up.query("SELECT attempts FROM jobs_task WHERE id = %s", [task_id])
    assert result == [(2,)]
