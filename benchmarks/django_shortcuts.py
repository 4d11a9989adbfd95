"""Benchmark each shortcut into Django's internals against the plain Django way.

    .venv/bin/python benchmarks/django_shortcuts.py --database sqlite:///$PWD/var/bench-shortcuts.sqlite3
    .venv/bin/python benchmarks/django_shortcuts.py --database postgres://root@127.0.0.1:5432/jobs_bench_shortcuts

Three figures, each the median and the range of ``--runs`` runs (the machine is shared, so the
range matters as much as the median):

- decode: a child builds the claimed ``Task`` from its JSON row with ``Task.__new__`` and a
  ``ModelState`` (``jobs.worker.wire.task_from_values``), against ``Task.from_db``.
- insert: enqueue's INSERT with the model defaults written as literals by the schema editor's
  ``quote_value`` (``jobs.tasks.inserting``), against the same INSERT with every default a
  parameter.
- cursor (PostgreSQL): that INSERT through Django's ``ServerBindingCursor``, built and wrapped
  by hand (``jobs.tasks.inserting._cursor``), against ``connection.cursor()``.
- log warm-up: the private memory a forked child's first log line copies when the supervisor
  formatted (without emitting) the executor's log line before the fork, and when it did not.
  Each run is a fresh process (what was warmed stays warm).

Use a database of its own: its tasks are deleted.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.workers import setup_django  # noqa: E402 (after the path is set)


def spread(values, unit: str, digits: int = 2) -> str:
    return (
        f"{statistics.median(values):.{digits}f} {unit} "
        f"({min(values):.{digits}f} - {max(values):.{digits}f})"
    )


def timed(call, count: int) -> float:
    """Microseconds per call of ``call`` over ``count`` calls."""
    started = time.perf_counter()
    for _ in range(count):
        call()
    return (time.perf_counter() - started) / count * 1e6


def bench_decode(runs: int, count: int) -> tuple[list, list]:
    from django.db import router

    from jobs.models import Task
    from jobs.worker import wire

    row = json.loads(wire.encode_task(_made_up_task()))
    using = router.db_for_write(Task)
    fields = [(f.attname, wire._converter(f)) for f in Task._meta.concrete_fields]

    def plain():  # what task_from_values does where a post_init receiver waits
        converted = {}
        for attname, convert in fields:
            value = row[attname]
            converted[attname] = value if convert is None or value is None else convert(value)
        return Task.from_db(using, list(converted), list(converted.values()))

    short, django = [], []
    for _ in range(runs):  # interleaved, so that both see the same load
        short.append(timed(lambda: wire.task_from_values(row), count))
        django.append(timed(plain, count))
    return short, django


def bench_insert(runs: int, count: int) -> tuple[list, list]:
    import uuid

    from django.db import connection, transaction
    from django.utils import timezone

    from jobs.models import Task
    from jobs.tasks import inserting

    sql = inserting.statements("default")
    fields = Task._meta.concrete_fields
    plain_sql = (
        f"INSERT INTO {sql.table} ({sql.columns}) VALUES ({', '.join(['%s'] * len(fields))})"
    )
    defaults = {
        f.name: f.get_db_prep_save(f.get_default(), connection)
        for f in fields
        if f.name not in inserting.SET_BY_ENQUEUE
    }

    def values():
        now = timezone.now()
        return {
            "id": uuid.uuid4(), "name": "benchmarks.tasks.noop", "backend": "default",
            "queue": "default", "priority": 0, "payload": None, "summary": "",
            "idempotency_key": None, "max_attempts": 3, "run_after": now, "owner": None,
            "created_at": now, "updated_at": now,
        }  # fmt: skip

    payload = '{"args": [], "kwargs": {}}'

    def literal():
        inserting.insert_one(values(), payload, using="default")

    def parameters():  # insert_one's way, with every default a parameter
        given = values()
        params = []
        for field in fields:
            if field.name == "payload":
                params.append(payload)
            elif field.name in defaults:
                params.append(defaults[field.name])
            else:
                params.append(field.get_db_prep_save(given[field.name], connection))
        with inserting._cursor(connection, sql.server_binding) as cursor:
            cursor.execute(plain_sql, params)

    def default_cursor():  # insert_one through Django's own cursor (client-side binding)
        binding, sql.server_binding = sql.server_binding, None
        try:
            literal()
        finally:
            sql.server_binding = binding

    def prepared():  # insert_one with psycopg preparing after 5 uses (Django sets None)
        driver = connection.connection
        threshold, driver.prepare_threshold = driver.prepare_threshold, 5
        try:
            literal()
        finally:
            driver.prepare_threshold = threshold

    short, django, cursor, ready = [], [], [], []
    variants = [(literal, short), (parameters, django)]
    if sql.server_binding is not None:
        variants += [(default_cursor, cursor), (prepared, ready)]
    for _ in range(runs):
        for call, out in variants:
            with transaction.atomic():
                out.append(timed(call, count))
            Task.objects.all().delete()
    return short, django, cursor, ready


def _made_up_task():
    from jobs.models import Task
    from jobs.worker.warmup import _made_up_task as made_up

    return made_up(Task, "benchmarks.tasks.noop")


def measure_log_copy(warm: bool) -> int:
    """In a fresh process: the KiB a forked child's first log line copies (private dirty)."""
    import gc
    import logging

    from jobs.execution import executor
    from jobs.worker import warmup

    if not warm:
        warmup._format_log_line = lambda task_logger, task: None
    warmup.warm_children_path()
    log = logging.getLogger(executor.__name__)
    log.setLevel(logging.INFO)
    gc.collect()
    gc.freeze()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        before = _private_dirty()
        log.info("task started name=%s id=%s", "benchmarks.tasks.noop", "x")
        os.write(write, str(_private_dirty() - before).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    return int(os.read(read, 64))


def _private_dirty() -> int:
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        if line.startswith("Private_Dirty:"):
            return int(line.split()[1])
    raise RuntimeError("no Private_Dirty in smaps_rollup")


def bench_log(runs: int, database: str) -> tuple[list, list]:
    warm, cold = [], []
    for _ in range(runs):
        for flag, out in (("warm", warm), ("cold", cold)):
            done = subprocess.run(
                [sys.executable, __file__, "--database", database, "--log-copy", flag],
                check=True,
                capture_output=True,
                text=True,
            )
            out.append(int(done.stdout.split()[-1]))
    return warm, cold


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database", required=True)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--count", type=int, default=5000, help="calls per run")
    parser.add_argument("--log-copy", choices=["warm", "cold"], help=argparse.SUPPRESS)
    options = parser.parse_args()
    setup_django(options.database)
    if options.log_copy:
        print(measure_log_copy(options.log_copy == "warm"))
        return
    # Imports inside the functions of this script: Django is set up by main() first.
    import django
    from django.db import connection

    print(
        f"Django {django.__version__} on {connection.vendor}, {options.runs} runs, shared machine"
    )
    short, plain = bench_decode(options.runs, options.count)
    print(f"decode, µs/task   Task.__new__: {spread(short, 'µs')}   from_db: {spread(plain, 'µs')}")
    short, plain, cursor, ready = bench_insert(options.runs, options.count)
    print(f"insert, µs/task   literals: {spread(short, 'µs')}   parameters: {spread(plain, 'µs')}")
    if cursor:
        print(
            f"insert, µs/task   ServerBindingCursor: {spread(short, 'µs')}   "
            f"connection.cursor(): {spread(cursor, 'µs')}   "
            f"ServerBindingCursor, prepare_threshold 5: {spread(ready, 'µs')}"
        )
    warm, cold = bench_log(options.runs, options.database)
    print(
        f"first log line in a child, KiB copied   formatted before the fork: "
        f"{spread(warm, 'KiB', 0)}   not: {spread(cold, 'KiB', 0)}"
    )


if __name__ == "__main__":
    main()
