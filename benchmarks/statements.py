"""Count the SQL statements a real worker sends, for benchmarks/transports.py.

With ``JOBS_BENCH_STATEMENTS=<directory>`` in its environment, a process started with
``benchmarks.settings`` counts every statement that goes through a Django database connection
(``connection.execute_wrappers``, installed on each connection as it is made), its forked
children's included (the counter is in shared memory, made before any fork), and writes the
total to ``<directory>/<pid>`` when it exits. That is the claims, outcomes, heartbeats,
maintenance and polls of the worker; the LISTEN connection of the database transport on
PostgreSQL (psycopg, outside Django) is not counted: it sends LISTEN once and a probe per
reconnection. ``collect(directory)`` sums and removes what the workers wrote.
"""

import atexit
import multiprocessing
import os
from pathlib import Path

ENV = "JOBS_BENCH_STATEMENTS"


def install() -> None:
    directory = os.environ.get(ENV)
    if not directory:
        return
    from django.db import connections
    from django.db.backends.signals import connection_created

    counter = multiprocessing.Value("q", 0)  # shared with the children forked later
    owner = os.getpid()

    def count(execute, sql, params, many, context):
        with counter.get_lock():
            counter.value += len(params) if many and params is not None else 1
        return execute(sql, params, many, context)

    def on_connection(sender, connection, **kwargs):
        if count not in connection.execute_wrappers:
            connection.execute_wrappers.append(count)

    connection_created.connect(on_connection, weak=False)
    for connection in connections.all(initialized_only=True):
        on_connection(None, connection)

    def write():
        if os.getpid() == owner:
            Path(directory, str(owner)).write_text(str(counter.value))

    atexit.register(write)


def collect(directory) -> int:
    """The statements counted by every worker that exited since the last call."""
    total = 0
    for path in Path(directory).iterdir():
        total += int(path.read_text())
        path.unlink()
    return total
