"""A real PgBouncer (Debian's package) in transaction pooling mode, for the tests that need one.

Each ``PgBouncer`` runs its own server process on a free port with a configuration of its own,
in front of the suite's PostgreSQL, and stops it at the end; ``restart`` stops and starts it on
the same port (the pooler going away under a running worker). A missing binary fails the test:
``.ci/ensure-pgbouncer`` installs the package.
"""

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

CANDIDATES = ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer")

CONFIG = """\
[databases]
* = host={host} port={port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen_port}
unix_socket_dir =
auth_type = trust
auth_file = {folder}/users.txt
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
server_reset_query =
ignore_startup_parameters = extra_float_digits,options
logfile = {folder}/pgbouncer.log
pidfile = {folder}/pgbouncer.pid
"""


def binary() -> str:
    path = os.environ.get("JOBS_PGBOUNCER") or next(
        (p for p in CANDIDATES if Path(p).exists()), None
    )
    if not path:
        pytest.fail(
            "PgBouncer is not installed: the pooler tests need it (Debian: apt-get install "
            "pgbouncer, or .ci/ensure-pgbouncer; or set JOBS_PGBOUNCER to its path)."
        )
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PgBouncer:
    """One PgBouncer in front of ``host:port``; ``url(name)`` reaches a database through it."""

    def __init__(self, *, host: str, port: int, user: str):
        self.user = user
        self.port = free_port()
        # Not pytest's tmp_path: PgBouncer refuses to run as root, so it runs as postgres and
        # must read its configuration and write its log.
        self.folder = Path(tempfile.mkdtemp(prefix="jobs-pgbouncer-"))
        self.folder.chmod(0o755)
        (self.folder / "users.txt").write_text(f'"{user}" ""\n')
        config = CONFIG.format(host=host, port=port, listen_port=self.port, folder=self.folder)
        self.config = self.folder / "pgbouncer.ini"
        self.config.write_text(config)
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres")
        self.process: subprocess.Popen | None = None

    def url(self, database: str, **query: str) -> str:
        tail = "&".join(f"{k}={v}" for k, v in query.items())
        return f"postgres://{self.user}@127.0.0.1:{self.port}/{database}" + (
            f"?{tail}" if tail else ""
        )

    @property
    def log(self) -> str:
        path = self.folder / "pgbouncer.log"
        return path.read_text() if path.exists() else ""

    def start(self) -> "PgBouncer":
        command = [binary(), str(self.config)]
        if os.geteuid() == 0:
            command[1:1] = ["-u", "postgres"]
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"PgBouncer exited at start ({self.process.returncode}):\n{self.log}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.05)
        pytest.fail(f"PgBouncer did not listen on port {self.port}:\n{self.log}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()  # SIGTERM: PgBouncer closes every connection at once
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None

    def restart(self, down_for: float = 0.0) -> None:
        self.stop()
        time.sleep(down_for)
        self.start()

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)
