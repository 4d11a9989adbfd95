"""Benchmark a fleet: 1, 2, 4, 8 and 16 worker processes on one PostgreSQL.

    .venv/bin/python benchmarks/fleet.py --database postgres://root@127.0.0.1:5432/jobs_fleet_bench
    .venv/bin/python benchmarks/fleet.py --database ... --workers-from /path/to/other/checkout

For each fleet size, real ``runworker`` processes (``--concurrency``, 2 by default) start idle
and then:

- **drain**: ``--tasks`` no-op tasks enqueued at once (one statement, one NOTIFY) are drained;
  throughput is tasks over the span from the first start to the last finish, and its share of
  the best size's. Meanwhile the fleet's connections are counted every 20 ms
  (``pg_stat_activity`` by ``application_name``).
- **trickle**: ``--trickle`` tasks enqueued one at a time, 25 ms apart, each announced by its
  own NOTIFY to the whole idle fleet; the workers' claims are counted from their log (the claim
  thread's ``claimed count=N`` lines), and the claims that took nothing, per task, are reported.

Through the drain and the trickle, a process of its own (``benchmarks/lock_waits.py``) samples
every 10 ms the fleet's backends waiting on a lock, with the statements blocking them; the waits
are reported by kind (a claim waiting, an outcome write, another statement), lock and blocking
statement.

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
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import lock_waits, proc_cpu  # noqa: E402
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
    """The fleet's connections, counted from a connection of the benchmark's."""

    def __init__(self):
        super().__init__(daemon=True)
        self.done = threading.Event()
        self.connections: list[int] = []

    def run(self):
        from django.db import connection

        try:
            with connection.cursor() as cursor:
                while not self.done.wait(0.02):
                    cursor.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                        [APP_NAME],
                    )
                    self.connections.append(cursor.fetchone()[0])
        finally:
            connection.close()


def start_lock_sampler(out: Path) -> subprocess.Popen:
    """``benchmarks/lock_waits.py`` in a process of its own, sampling into ``out``."""
    command = [sys.executable, str(ROOT / "benchmarks" / "lock_waits.py")]
    command += ["--database", os.environ["DATABASE_URL"], "--application-name", APP_NAME]
    process = subprocess.Popen([*command, "--out", str(out)])
    wait_for(lambda: out.exists(), 30, "the lock sampler", step=0.02)
    return process


def stop_lock_sampler(process: subprocess.Popen, out: Path) -> dict:
    process.terminate()
    process.wait(30)
    return lock_waits.summarize(out)


def fleet_run(size: int, *, tasks: int, trickle: int, concurrency: int, checkout: Path) -> dict:
    from django.db.models import Max, Min

    from benchmarks.tasks import noop
    from jobs.models import Task, Worker

    empty()
    with tempfile.TemporaryDirectory(prefix="jobs-fleet-") as tmp:
        log_dir = Path(tmp)
        processes = start_fleet(size, concurrency=concurrency, checkout=checkout, log_dir=log_dir)
        sampler = Sampler()
        locks_out = log_dir / "lock-waits.jsonl"
        lock_sampler = None
        try:
            wait_for(lambda: Worker.objects.filter(stopped_at=None).count() >= size, 120, "fleet")
            time.sleep(1.0)  # past the first claims and heartbeats: idle, listening
            pids = proc_cpu.descendants([p.pid for p in processes]) + _backends()
            idle_before, idle_started = proc_cpu.total(pids), time.monotonic()
            time.sleep(2.0)  # what the idle fleet costs
            idle = proc_cpu.spent(idle_before, proc_cpu.total(pids))
            idle_seconds = time.monotonic() - idle_started
            idle_connections = _connections()
            sampler.start()
            lock_sampler = start_lock_sampler(locks_out)
            claims_before = claim_sizes(log_dir, size)
            workers_pids = proc_cpu.descendants([p.pid for p in processes])
            backend_pids = _backends()
            drain_workers, drain_backends = (
                proc_cpu.total(workers_pids),
                proc_cpu.total(backend_pids),
            )
            machine_before = proc_cpu.machine_busy()
            noop.enqueue_many([(n,) for n in range(tasks)])
            wait_for(lambda: _finished() >= tasks, 600, "the drain", step=0.02)
            machine_after = proc_cpu.machine_busy()
            # the children forked during the drain (a worker forks them at its first tasks)
            now_pids = proc_cpu.descendants([p.pid for p in processes])
            drain_workers.update({p: proc_cpu.Usage() for p in now_pids if p not in drain_workers})
            drain_workers = proc_cpu.spent(drain_workers, proc_cpu.total(now_pids))
            drain_backends = proc_cpu.spent(drain_backends, proc_cpu.total(backend_pids))
            drain_claims = [
                took
                for then, now in zip(claims_before, claim_sizes(log_dir, size), strict=True)
                for took in now[len(then) :]
            ]
            sampler.done.set()
            sampler.join()
            span = Task.objects.aggregate(first=Min("started_at"), last=Max("finished_at"))
            seconds = (span["last"] - span["first"]).total_seconds()
            tail, late = _tail(span["first"])
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
            waits = stop_lock_sampler(lock_sampler, locks_out)
            lock_sampler = None
        finally:
            sampler.done.set()
            if lock_sampler is not None:
                lock_sampler.kill()
            stop_workers(processes)
    busy = machine_after[0] - machine_before[0]
    taken = [n for n in drain_claims if n]
    return {
        "rate": tasks / seconds,
        # CPU per task (ms) in the supervisors and children, and in their PostgreSQL backends
        "worker_cpu_ms": round(1000 * drain_workers.cpu / tasks, 3),
        "backend_cpu_ms": round(1000 * drain_backends.cpu / tasks, 3),
        # the machine's cores busy (of os.cpu_count()) from the enqueue to the last finish
        "machine_busy": round(busy / (machine_after[1] - machine_before[1]) * os.cpu_count(), 2),
        "switches_per_task": round((drain_workers.voluntary + drain_backends.voluntary) / tasks, 2),
        "preempted_per_task": round(
            (drain_workers.involuntary + drain_backends.involuntary) / tasks, 2
        ),
        "drain_claims": len(drain_claims),
        "drain_empty_claims": len(drain_claims) - len(taken),
        "mean_claim": round(statistics.mean(taken), 1) if taken else 0,
        # the idle fleet, cores (CPU seconds per second) and wake-ups per second
        "idle_cores": round(idle.cpu / idle_seconds, 3),
        "idle_switches_per_s": round(idle.voluntary / idle_seconds),
        # the share of the drain's span after 95 % of its tasks had finished (its tail), and
        # how long after the first start the last worker started its first task (s)
        "tail_share": round(tail / seconds, 3),
        "last_worker_joined": round(late, 3),
        "connections": max(sampler.connections or [0]),
        "idle_connections": idle_connections,
        "lock_samples": waits["samples"],
        "lock_waits": waits["waits"],
        "empty_per_task": (empty_claims - before_empty) / trickle,
        "claims_per_task": (total - before_total) / trickle,
    }


def claim_sizes(log_dir: Path, count: int) -> list[list[int]]:
    """The sizes of the claims logged so far by each of the fleet's workers."""
    return [
        [int(took) for took, _ in CLAIM_LINE.findall((log_dir / f"worker-{n}.log").read_bytes())]
        for n in range(count)
    ]


def _tail(first) -> tuple[float, float]:
    """The drain's tail (seconds from its 95th percentile finish to its last) and when the last
    worker joined it (seconds from ``first`` to the latest of the workers' first starts)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT extract(epoch FROM max(finished_at) - percentile_disc(0.95) WITHIN GROUP "
            "(ORDER BY finished_at)) FROM jobs_task WHERE finished_at IS NOT NULL"
        )
        (tail,) = cursor.fetchone()
        cursor.execute(
            "SELECT extract(epoch FROM max(joined) - %s) FROM (SELECT min(started_at) AS joined"
            " FROM jobs_task WHERE started_at IS NOT NULL GROUP BY worker_id) AS workers",
            [first],
        )
        (late,) = cursor.fetchone()
    return float(tail or 0), float(late or 0)


def _backends() -> list[int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s", [APP_NAME])
        return [pid for (pid,) in cursor.fetchall()]


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
          "lock waits: claims, outcomes, others (samples) | empty claims per task |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|")
    every: Counter = Counter()  # (size, kind, lock, waiting, blocking) -> waits
    for size, runs in results.items():
        rates = [r["rate"] for r in runs]
        median = statistics.median(rates)
        waits = {"claim": 0, "outcome": 0, "other": 0}
        for r in runs:
            for wait in r["lock_waits"]:
                waits[wait["kind"]] += wait["waits"]
                key = (size, wait["kind"], wait["lock"], wait["waiting"], wait["blocking"])
                every[key] += wait["waits"]
        samples = sum(r["lock_samples"] for r in runs)
        print(
            f"| {size} | {median:,.0f} ({min(rates):,.0f}..{max(rates):,.0f}) | "
            f"{100 * median / best:.0f} % | {max(r['connections'] for r in runs)} "
            f"({max(r['idle_connections'] for r in runs)}) | "
            f"{waits['claim']}, {waits['outcome']}, {waits['other']} ({samples}) | "
            f"{statistics.median(r['empty_per_task'] for r in runs):.2f} |"
        )
    print("\n| workers | kind | lock | waiting statement | blocked by | waits |")
    print("|---:|---|---|---|---|---:|")
    for (size, kind, lock, waiting, blocking), count in sorted(every.items()):
        print(f"| {size} | {kind} | {lock} | {waiting} | {blocking} | {count} |")
    if not every:
        print("| | no lock wait seen | | | | |")


if __name__ == "__main__":
    main()
