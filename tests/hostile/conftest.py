"""A private, throwaway PostgreSQL server that a test may stop and start: a database outage.

Never the shared server: ``initdb`` makes a cluster under the test's temporary folder, on a
port of its own, and the fixture removes it at the end. Tests using it run in the suite's
PostgreSQL run (once per Python line); where the PostgreSQL binaries are missing they fail in CI
(``CI`` set) rather than skip unseen.
"""

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
import pytest
from django.db import connection

from tests.conftest import ROOT


def _postgres_bindir():
    found = shutil.which("pg_ctl")
    if found:
        return os.path.dirname(found)
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return os.path.dirname(candidates[-1]) if candidates else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PrivatePostgres:
    def __init__(self, folder, bindir):
        self.folder, self.bindir = folder, bindir
        self.data = folder / "data"
        self.port = _free_port()
        # initdb refuses to run as root: the cluster then belongs to the postgres user.
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        self.url = f"postgres://jobs@127.0.0.1:{self.port}/jobs"

    def _run(self, *command):
        # In its own folder: the postgres user may not be allowed into the checkout (a clone
        # under /root), and initdb gives up when it cannot read its working directory.
        done = subprocess.run(
            [*self._as, *command], cwd=self.folder, capture_output=True, text=True, timeout=60
        )
        if done.returncode != 0:
            log = self.folder / "server.log"
            raise RuntimeError(
                f"{command[0]} failed: {done.stdout}{done.stderr}"
                f"{log.read_text() if log.exists() else ''}"
            )

    def create(self):
        self.folder.mkdir(parents=True, exist_ok=True)
        if self._as:
            shutil.chown(self.folder, "postgres")
        self._run(f"{self.bindir}/initdb", "-D", str(self.data), "-U", "jobs", "--auth=trust",
                  "-E", "UTF8", "--no-sync")  # fmt: skip
        self.start()
        with psycopg.connect(self.url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE jobs")
        self.manage("migrate", "--noinput")

    def start(self):
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(f"{self.bindir}/pg_ctl", "-D", str(self.data), "-o", options, "-w", "start",
                  "-l", str(self.folder / "server.log"))  # fmt: skip

    def is_running(self) -> bool:
        status = [*self._as, f"{self.bindir}/pg_ctl", "-D", str(self.data), "status"]
        return subprocess.run(status, cwd=self.folder, capture_output=True).returncode == 0

    def stop(self):
        """Stop the server at once, ending every session: the database is down."""
        self._run(f"{self.bindir}/pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def env(self, **settings) -> dict:
        env = dict(os.environ)
        env.update(
            DJANGO_SETTINGS_MODULE="tests.settings",
            DATABASE_URL=self.url,
            PYTHONUNBUFFERED="1",
            **{name: str(value) for name, value in settings.items()},
        )
        return env

    def manage(self, *args, **settings) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env(**settings),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def query(self, sql, params=()):
        with psycopg.connect(self.url) as conn:
            cursor = conn.execute(sql, params)
            return cursor.fetchall() if cursor.description else None


@pytest.fixture(scope="module")
def private_postgres():
    """A PostgreSQL server of the module's own, migrated, running at the start of each test."""
    if connection.vendor != "postgresql":
        pytest.skip("database outages are tried once, in the suite's PostgreSQL run")
    bindir = _postgres_bindir()
    if bindir is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL server binaries (initdb, pg_ctl) are needed in CI")
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found")
    # Not under pytest's temporary folder: as root, that one is closed to the postgres user.
    server = PrivatePostgres(Path(tempfile.mkdtemp(prefix="jobs-private-postgres-")), bindir)
    server.create()
    yield server
    with contextlib.suppress(RuntimeError):  # stopped already
        server.stop()
    shutil.rmtree(server.folder, ignore_errors=True)


@pytest.fixture
def database_up(private_postgres):
    """The private server, running (a test before may have left it stopped)."""
    if not private_postgres.is_running():
        private_postgres.start()
    private_postgres.query("DELETE FROM jobs_task")
    private_postgres.query("DELETE FROM jobs_worker")
    return private_postgres


def processes_with(marker: str) -> list[int]:
    """Processes whose environment holds ``marker`` (a worker and the children it forked)."""
    found = []
    for environ in glob.glob("/proc/[0-9]*/environ"):
        try:
            with open(environ, "rb") as file:
                if marker.encode() in file.read():
                    found.append(int(environ.split("/")[2]))
        except OSError:
            continue
    return found


def wait_until(predicate, timeout, message):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout}s waiting for {message}")
