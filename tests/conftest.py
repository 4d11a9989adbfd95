import os
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent
WORKER_APP_NAME = "jobs-test-worker"


def database_url_for_tests() -> str:
    """The URL of the test database, for processes started by a test."""
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings['NAME']}"
    user = settings.get("USER") or ""
    host = settings.get("HOST") or "127.0.0.1"
    port = settings.get("PORT") or 5432
    # Named, so that a test can tell the workers' connections from its own.
    return f"postgres://{user}@{host}:{port}/{settings['NAME']}?application_name={WORKER_APP_NAME}"


@pytest.fixture
def worker_env():
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="tests.settings",
        DATABASE_URL=database_url_for_tests(),
        PYTHONUNBUFFERED="1",
    )
    return env


@pytest.fixture
def runworker(worker_env):
    """Run ``manage.py runworker`` in a real process and return its completed result."""

    def run(*args, timeout=60, env=None):
        return subprocess.run(
            [sys.executable, "manage.py", "runworker", *args],
            cwd=ROOT,
            env={**worker_env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return run


@pytest.fixture
def postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL behaviour; the suite's PostgreSQL run covers it")


class WorkerProcess:
    """A ``runworker`` running in the background, its output collected in a file."""

    def __init__(self, args, env, log_path, *, start_new_session=False):
        self.log_path = log_path
        self._log = open(log_path, "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "runworker", *args],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=start_new_session,
        )

    @property
    def output(self) -> str:
        self._log.flush()
        return Path(self.log_path).read_text()

    def signal(self, signum):
        self.process.send_signal(signum)

    def wait(self, timeout=30) -> int:
        return self.process.wait(timeout)

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self._log.close()


@pytest.fixture
def start_worker(worker_env, tmp_path):
    """Start background ``runworker`` processes; each is killed at the end of the test."""
    started = []

    def start(*args, env=None):
        worker = WorkerProcess(
            args, {**worker_env, **(env or {})}, tmp_path / f"worker-{len(started)}.log"
        )
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


def wait_for(predicate, timeout=30.0, interval=0.05, message="condition"):
    """Poll ``predicate`` until it is true; fail the test after ``timeout`` seconds."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout}s waiting for {message}")


@pytest.fixture
def no_success_receivers():
    """Disconnect the demo's task_finished receiver (the test settings include the demo)."""
    from demo_project.demo.notifications import notify_owner
    from jobs import signals

    signals.task_finished.disconnect(dispatch_uid="demo-notify-owner")
    yield
    signals.task_finished.connect(notify_owner, dispatch_uid="demo-notify-owner")


@contextmanager
def terminating_worker_connections(*, times=3, every=0.5):
    """While the block runs, terminate the workers' PostgreSQL sessions (those named
    ``WORKER_APP_NAME``) ``times`` times, ``every`` seconds apart, from a thread of its own."""
    stop = threading.Event()

    def terminate_repeatedly():
        try:
            for _ in range(times):
                if stop.wait(every):
                    return
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND application_name = %s",
                        [WORKER_APP_NAME],
                    )
        finally:
            connection.close()

    killer = threading.Thread(target=terminate_repeatedly)
    killer.start()
    try:
        yield
    finally:
        stop.set()
        killer.join()
