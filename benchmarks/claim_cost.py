"""Time one claim statement beside 10,000 waiting rows, with statistics that lag or are fresh.

    .venv/bin/python benchmarks/claim_cost.py --database postgres://root@127.0.0.1:5432/jobs_perf_bench
    .venv/bin/python benchmarks/claim_cost.py --database postgres://... --against main

The claim a worker makes in ``benchmarks/flow_control.py``'s drains, alone: 10,000 no-op tasks
waiting, spread over ``--keys`` concurrency keys at limit 1 and then without a key, and the
claim asks for ``--limit`` (as a worker of 4 idle children of batches of 100 asks for 700).
"Lagging": the statistics were taken when every row had finished (ANALYZE after a drain, as
autovacuum leaves them while the next burst of enqueues comes in); "fresh": ANALYZE after the
enqueues. Each claim is rolled back, so each finds the same rows. ``--against REF`` times the
claim statement of the git revision ``REF`` (its ``jobs/sql/common.py`` and
``jobs/sql/postgresql.py``) beside this checkout's, interleaved: median and min..max in ms.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
import types
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.workers import empty, setup_django, vendor  # noqa: E402 (the path)


def revision_claim(ref: str):
    """The ``jobs.sql.postgresql`` of git revision ``ref``, on that revision's ``common``."""

    def source(path: str) -> str:
        return subprocess.run(
            ["git", "show", f"{ref}:{path}"], cwd=ROOT, check=True, capture_output=True,
            text=True,
        ).stdout  # fmt: skip

    common = types.ModuleType(f"common_{ref}")
    exec(compile(source("jobs/sql/common.py"), "common.py", "exec"), common.__dict__)
    postgresql = types.ModuleType(f"postgresql_{ref}")
    postgresql.__dict__["__name__"] = postgresql.__name__
    text = source("jobs/sql/postgresql.py").replace("from jobs.sql import common\n", "")
    postgresql.__dict__["common"] = common
    exec(compile(text, "postgresql.py", "exec"), postgresql.__dict__)
    return postgresql


def fill(keys: int, count: int, statistics_lag: bool):
    from django.db import connection

    from benchmarks import tasks
    from benchmarks.flow_control import enqueue_keyed
    from jobs.models import Task

    empty()
    if statistics_lag:
        tasks.noop.enqueue_many([(n,) for n in range(count)])
        Task.objects.update(status="succeeded")
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {Task._meta.db_table}")
        empty()
    if keys:
        enqueue_keyed(keys)(count)
    else:
        tasks.noop.enqueue_many([(n,) for n in range(count)])
    if not statistics_lag:
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {Task._meta.db_table}")


def time_claims(claims: dict, limit: int, runs: int) -> dict:
    from django.db import connection, transaction
    from django.utils import timezone

    seconds: dict[str, list[float]] = {name: [] for name in claims}
    found = {}
    for _ in range(runs):
        for name, module in claims.items():
            now = timezone.now()
            values = {"now": now, "queues": ["bench"], "limit": limit, "worker_id": "bench",
                      "lease_expires_at": now + timedelta(seconds=60)}  # fmt: skip
            with transaction.atomic(), connection.cursor() as cursor:
                started = time.perf_counter()
                found[name] = len(module.claim_tasks(cursor, connection, **values))
                seconds[name].append(time.perf_counter() - started)
                transaction.set_rollback(True)
    return {name: (found[name], values) for name, values in seconds.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default=os.environ.get("DATABASE_URL", ""))
    parser.add_argument("--runs", type=int, default=21, help="claims timed per statement")
    parser.add_argument("--tasks", type=int, default=10_000, help="waiting no-op tasks")
    parser.add_argument("--keys", type=int, default=100, help="concurrency keys, limit 1 each")
    parser.add_argument("--limit", type=int, default=700, help="tasks each claim asks for")
    parser.add_argument("--against", help="a git revision whose claim to time beside this one")
    args = parser.parse_args()
    if not args.database.startswith(("postgres://", "postgresql://")):
        sys.exit("Name a PostgreSQL database: --database postgres://...")
    setup_django(args.database)
    from jobs.sql import postgresql

    claims = {"this checkout": postgresql}
    if args.against:
        claims[args.against] = revision_claim(args.against)
    load = os.getloadavg()[0]
    print(f"{vendor()}, {os.cpu_count()} cpus, {args.runs} claims each, load {load:.1f}\n")
    for keys in (args.keys, 0):
        for lag in (True, False):
            fill(keys, args.tasks, lag)
            for name, (found, values) in time_claims(claims, args.limit, args.runs).items():
                ms = [value * 1000 for value in values]
                print(
                    f"{f'{keys} keys' if keys else 'no key'}, statistics "
                    f"{'lagging' if lag else 'fresh'}, {name}: claimed {found}, "
                    f"{statistics.median(ms):.2f} ms ({min(ms):.2f} .. {max(ms):.2f})"
                )


if __name__ == "__main__":
    main()
