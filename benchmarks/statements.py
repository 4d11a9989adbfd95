"""Count the SQL statements a real worker sends, for benchmarks/transports.py.

With ``JOBS_BENCH_STATEMENTS=<directory>`` in its environment, a process started with
``benchmarks.settings`` (``benchmarks/apps.py``) counts every statement that goes through a
Django database connection (``connection.execute_wrappers``, installed on each connection as it
is made; an ``executemany`` counts its rows), its forked children's included, into the file
``<directory>/<pid>``: eight bytes mapped in shared memory, so that the benchmark reads the count
while the worker runs. That is the claims, outcomes, heartbeats, maintenance and polls of the
worker; the LISTEN connection of the database transport on PostgreSQL (psycopg, outside Django)
is not counted: it sends LISTEN once and a probe per reconnection.
"""

import mmap
import multiprocessing
import os
import struct
from pathlib import Path

ENV = "JOBS_BENCH_STATEMENTS"


def install() -> None:
    directory = os.environ.get(ENV)
    if not directory:
        return
    from django.db import connections
    from django.db.backends.signals import connection_created

    path = Path(directory, str(os.getpid()))
    path.write_bytes(bytes(8))
    with open(path, "r+b") as file:
        shared = mmap.mmap(file.fileno(), 8)  # MAP_SHARED: the children's counts land here too
    lock = multiprocessing.Lock()  # made before any fork: the children share it

    def count(execute, sql, params, many, context):
        with lock:
            done = struct.unpack_from("q", shared)[0]
            struct.pack_into("q", shared, 0, done + (len(params) if many and params else 1))
        return execute(sql, params, many, context)

    def on_connection(sender, connection, **kwargs):
        if count not in connection.execute_wrappers:
            connection.execute_wrappers.append(count)

    connection_created.connect(on_connection, weak=False)
    for connection in connections.all(initialized_only=True):
        on_connection(None, connection)


def counted(directory) -> int:
    """The statements counted so far by every worker started since the last ``forget``."""
    return sum(struct.unpack("q", path.read_bytes()[:8])[0] for path in Path(directory).iterdir())


def forget(directory) -> None:
    for path in Path(directory).iterdir():
        path.unlink()


class Window:
    """A context manager: the statements counted between its entry and its exit, in ``.count``."""

    def __init__(self, directory):
        self.directory, self.count = directory, 0

    def __enter__(self):
        self.count = -counted(self.directory)
        return self

    def __exit__(self, *exc):
        self.count += counted(self.directory)
