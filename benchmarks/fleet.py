"""Benchmark a fleet: 1, 2, 4, 8 and 16 worker processes on one PostgreSQL.

    .venv/bin/python benchmarks/fleet.py --database postgres://root@127.0.0.1:5432/jobs_fleet_bench
    .venv/bin/python benchmarks/fleet.py --database ... --workers-from /path/to/other/checkout

For each fleet size, real ``runworker`` processes (``--concurrency``, 2 by default) start idle
and then:

- **drain**: ``--tasks`` no-op tasks enqueued at once (one statement, one NOTIFY) are drained;
  throughput is tasks over the span from the first start to the last finish, and its share of
  the best size's. Meanwhile the database is sampled every 20 ms: the fleet's connections
  (``pg_stat_activity`` by ``application_name``), its backends waiting on a lock
  (``wait_event_type = 'Lock'``) and the locks not granted (``pg_locks``).
- **trickle**: ``--trickle`` tasks enqueued one at a time, 25 ms apart, each announced by its
  own NOTIFY to the whole idle fleet; the workers' claims are counted from their log (the claim
  thread's ``claimed count=N`` lines), and the claims that took nothing, per task, are reported.

``--workers-from`` runs the workers of another checkout (its ``manage.py`` and ``jobs``) against
the same database: the figures before and after a change, measured in the same run. The
database is created and migrated if needed, and its task table emptied between measurements:
use a database of its own. The machine's load shows in the spread: repeat with ``--runs``.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.workers import empty, setup_django, stop_workers, wait_for  # noqa: E402

APP_NAME = "jobs-fleet-bench"
SIZES = (1, 2, 4, 8, 16)
CLAIM_LINE = re.compile(rb"claimed count=(\d+) wanted=(\d+)")

SETTINGS = """\
from benchmarks.settings import *  # noqa: F403
from benchmarks.settings import LOGGING

# The claim thread's one line per claim (not per task), to count the claims that took nothing.
LOGGING["loggers"]["jobs.worker.claimer"] = {
    "handlers": ["console"], "level": "DEBUG", "propagate": False,
}
"""


def start_fleet(count: int, *, concurrency: int, checkout: Path, log_dir: Path) -> list:
    settings_dir = log_dir / "settings"
    settings_dir.mkdir(exist_ok=True)
    (settings_dir / "fleet_bench_settings.py").write_text(SETTINGS)
    url = os.environ["DATABASE_URL"]
    joiner = "&" if "?" in url else "?"
    env = {
        **os.environ,
        "DATABASE_URL": f"{url}{joiner}application_name={APP_NAME}",
        "DJANGO_SETTINGS_MODULE": "fleet_bench_settings",
        "PYTHONPATH": f"{settings_dir}:{checkout}",
        "JOBS_LOG_LEVEL": "INFO",
    }
    command = [sys.executable, str(checkout / "manage.py"), "runworker", "--queues", "bench"]
    command += ["--concurrency", str(concurrency)]
    processes = []
    for n in range(count):
        log = open(log_dir / f"worker-{n}.log", "wb")  # noqa: SIM115 (closed with the process)
        processes.append(subprocess.Popen(command, env=env, stdout=log, stderr=log, cwd=checkout))
    return processes


def claims(log_dir: Path, count: int) -> tuple[int, int]:
    """Claims logged so far by the fleet's workers, and how many of them took nothing."""
    total = empty_claims = 0
    for n in range(count):
        for took, _ in CLAIM_LINE.findall((log_dir / f"worker-{n}.log").read_bytes()):
            total += 1
            empty_claims += took == b"0"
    return total, empty_claims


class Sampler(threading.Thread):
    """The fleet's connections and lock waits, sampled from a connection of the benchmark's."""

    def __init__(self):
        super().__init__(daemon=True)
        self.done = threading.Event()
        self.connections: list[int] = []
        self.lock_waits = 0  # samples in which some backend of the fleet waited on a lock
        self.not_granted = 0  # samples in which pg_locks showed a lock not granted
        self.samples = 0
        self.waiting_queries: set[str] = set()  # lock (wait_event) and statement of each wait

    def run(self):
        from django.db import connection

        try:
            with connection.cursor() as cursor:
                while not self.done.wait(0.02):
                    cursor.execute(
                        "SELECT count(*), count(*) FILTER (WHERE wait_event_type = 'Lock'), "
                        "array_agg(wait_event || ': ' || left(ltrim(query), 40)) "
                        "FILTER (WHERE wait_event_type = 'Lock') "
                        "FROM pg_stat_activity WHERE application_name = %s",
                        [APP_NAME],
                    )
                    held, waiting, queries = cursor.fetchone()
                    self.waiting_queries.update(queries or ())
                    # This database's locks only: the server may serve others meanwhile.
                    cursor.execute(
                        "SELECT count(*) FROM pg_locks WHERE NOT granted AND database = "
                        "(SELECT oid FROM pg_database WHERE datname = current_database())"
                    )
                    self.connections.append(held)
                    self.lock_waits += waiting > 0
                    self.not_granted += cursor.fetchone()[0] > 0
                    self.samples += 1
        finally:
            connection.close()


def fleet_run(size: int, *, tasks: int, trickle: int, concurrency: int, checkout: Path) -> dict:
    from django.db.models import Max, Min

    from benchmarks.tasks import noop
    from jobs.models import Task, Worker

    empty()
    with tempfile.TemporaryDirectory(prefix="jobs-fleet-") as tmp:
        log_dir = Path(tmp)
        processes = start_fleet(size, concurrency=concurrency, checkout=checkout, log_dir=log_dir)
        sampler = Sampler()
        try:
            wait_for(lambda: Worker.objects.filter(stopped_at=None).count() >= size, 120, "fleet")
            time.sleep(1.0)  # past the first claims and heartbeats: idle, listening
            idle_connections = _connections()
            sampler.start()
            noop.enqueue_many([(n,) for n in range(tasks)])
            wait_for(lambda: _finished() >= tasks, 600, "the drain", step=0.02)
            sampler.done.set()
            sampler.join()
            span = Task.objects.aggregate(first=Min("started_at"), last=Max("finished_at"))
            seconds = (span["last"] - span["first"]).total_seconds()
            time.sleep(1.0)  # idle again (a worker's news after the drain claims once more)
            before_total, before_empty = claims(log_dir, size)
            next_at = time.monotonic()
            for n in range(trickle):
                noop.enqueue(n)
                next_at += 0.025
                time.sleep(max(0.0, next_at - time.monotonic()))
            wait_for(lambda: _finished() >= tasks + trickle, 120, "the trickle", step=0.02)
            time.sleep(0.3)  # the last claims' lines
            total, empty_claims = claims(log_dir, size)
        finally:
            sampler.done.set()
            stop_workers(processes)
    return {
        "rate": tasks / seconds,
        "connections": max(sampler.connections or [0]),
        "idle_connections": idle_connections,
        "lock_samples": sampler.lock_waits,
        "not_granted_samples": sampler.not_granted,
        "samples": sampler.samples,
        "waiting_queries": sorted(sampler.waiting_queries),
        "empty_per_task": (empty_claims - before_empty) / trickle,
        "claims_per_task": (total - before_total) / trickle,
    }


def _finished() -> int:
    from jobs.models import Task

    return Task.objects.filter(status__in=["succeeded", "failed"]).count()


def _connections() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [APP_NAME]
        )
        return cursor.fetchone()[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", required=True, help="postgres://... (a database of its own)")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--tasks", type=int, default=4000)
    parser.add_argument("--trickle", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--workers-from", type=Path, default=ROOT, help="another checkout")
    args = parser.parse_args()
    if not args.database.startswith(("postgres://", "postgresql://")):
        parser.error("a fleet shares one PostgreSQL: --database postgres://...")
    setup_django(args.database)
    sizes = [int(size) for size in args.sizes.split(",")]
    results: dict[int, list[dict]] = {size: [] for size in sizes}
    for _ in range(args.runs):
        for size in sizes:  # each run goes through every size: the load drifts alike for all
            options = {"tasks": args.tasks, "trickle": args.trickle}
            result = fleet_run(
                size, **options, concurrency=args.concurrency, checkout=args.workers_from
            )
            results[size].append(result)
            print(f"workers={size} {result}", flush=True)
    best = max(statistics.median(r["rate"] for r in runs) for runs in results.values())
    print(f"\nworkers from {args.workers_from}, --concurrency {args.concurrency}, "
          f"{args.tasks} no-op tasks, {args.runs} run(s), {os.cpu_count()} cores\n")  # fmt: skip
    print("| workers | tasks/s (min..max) | % of best | connections (idle) | "
          "lock-wait samples | empty claims per task |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|")
    for size, runs in results.items():
        rates = [r["rate"] for r in runs]
        median = statistics.median(rates)
        lock_samples = sum(r["lock_samples"] + r["not_granted_samples"] for r in runs)
        samples = sum(r["samples"] for r in runs)
        print(
            f"| {size} | {median:,.0f} ({min(rates):,.0f}..{max(rates):,.0f}) | "
            f"{100 * median / best:.0f} % | {max(r['connections'] for r in runs)} "
            f"({max(r['idle_connections'] for r in runs)}) | {lock_samples} of {samples} | "
            f"{statistics.median(r['empty_per_task'] for r in runs):.2f} |"
        )


if __name__ == "__main__":
    main()
