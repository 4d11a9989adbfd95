"""Pickup latency, drain and statements per task per transport (database, Redis, RabbitMQ).

    .venv/bin/python benchmarks/transports.py --database sqlite:///$PWD/var/bench.sqlite3
    .venv/bin/python benchmarks/transports.py --database postgres://root@127.0.0.1:5432/jobs_perf_bench

Pickup: enqueue-to-start latency (p50/p95) of ``--pickup`` tasks 20 ms apart with one idle worker
(``benchmarks.workers.pickup``); drain: ``--tasks`` queued no-op tasks run by 2 burst workers.
Statements per task: every SQL statement the workers send through Django's connections
(``benchmarks/statements.py``: an execute wrapper in the real ``runworker`` processes, children
included), divided by the tasks: at pickup from the first enqueue to the last task done (the
idle worker's polls, heartbeats and maintenance in that window included, its start not), at the
drain over the burst workers' whole life (start included); and enqueue's, counted the same way
in this process over ``--pickup`` single enqueues, each in its own transaction.
Each transport runs ``--runs`` times, interleaved; medians and min..max. ``--redis`` names the
Redis server (the machine's shared one by default; the benchmark only adds streams under
``jobs:queue:``); ``--rabbitmq`` an AMQP URL, by default a vhost of the benchmark's own made with
``rabbitmqctl`` on the machine's RabbitMQ (and deleted at the end). ``--only`` picks
transports. JOBS_POLL_INTERVAL is the default (1 s): on SQLite the database transport's pickup
is about half of it.
"""

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import statements  # noqa: E402 (the path)
from benchmarks.workers import drain, empty, pickup, setup_django, vendor  # noqa: E402

TRANSPORTS = ["database", "redis", "rabbitmq"]


def spread(values, unit="", digits=1):
    return (f"{statistics.median(values):,.{digits}f}{unit} "
            f"({min(values):,.{digits}f}..{max(values):,.{digits}f})")  # fmt: skip


def enqueue_statements(count: int) -> float:
    """Statements per task of ``count`` single enqueues, each in its own transaction."""
    from django.db import connection, transaction

    from benchmarks.tasks import noop

    counted = [0]

    def counter(execute, sql, params, many, context):
        counted[0] += 1
        return execute(sql, params, many, context)

    empty()
    with connection.execute_wrapper(counter):
        for n in range(count):
            with transaction.atomic():
                noop.enqueue(n)
    return counted[0] / count


class BenchVHost:
    """A RabbitMQ vhost of the benchmark's own, on the machine's server."""

    def __init__(self):
        self.name = f"jobs-bench-{os.getpid()}"
        self.url = f"amqp://guest:guest@127.0.0.1:5672/{self.name}"

    def __enter__(self):
        ctl = ["rabbitmqctl", "-q"]
        subprocess.run([*ctl, "add_vhost", self.name], check=True, capture_output=True)
        subprocess.run([*ctl, "set_permissions", "-p", self.name, "guest", ".*", ".*", ".*"],
                       check=True, capture_output=True)  # fmt: skip
        return self

    def __exit__(self, *exc):
        subprocess.run(["rabbitmqctl", "-q", "delete_vhost", self.name], capture_output=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default=os.environ.get("DATABASE_URL", ""))
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--rabbitmq", default="", help="AMQP URL (default: a vhost of its own)")
    parser.add_argument("--only", default=",".join(TRANSPORTS))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pickup", type=int, default=100, help="tasks of the pickup test")
    parser.add_argument("--tasks", type=int, default=2_000, help="tasks of the drain")
    args = parser.parse_args()
    if not args.database:
        sys.exit("Name a database: --database postgres://... or sqlite:///path")
    only = [name for name in args.only.split(",") if name]
    if unknown := set(only) - set(TRANSPORTS):
        sys.exit(f"--only: unknown transports {sorted(unknown)}")
    setup_django(args.database)  # before JOBS_BENCH_STATEMENTS: this process counts apart
    vhost = BenchVHost() if "rabbitmq" in only and not args.rabbitmq else None
    with tempfile.TemporaryDirectory() as counts, vhost or contextlib.nullcontext():
        os.environ[statements.ENV] = counts  # the workers' (benchmarks/apps.py)
        urls = {"database": None, "redis": args.redis,
                "rabbitmq": args.rabbitmq or (vhost.url if vhost else None)}  # fmt: skip
        run(args, {name: urls[name] for name in only}, counts)


def run(args, transports, counts):
    from django.conf import settings

    load = os.getloadavg()
    print(f"{vendor()}, {os.cpu_count()} cpus, {args.runs} runs, load {load[0]:.2f}\n")
    keys = ["p50", "p95", "drain", "pickup_sql", "drain_sql", "enqueue_sql"]
    figures = {name: {key: [] for key in keys} for name in transports}
    for _ in range(args.runs):
        for name, url in transports.items():
            os.environ["JOBS_TRANSPORT"] = url or ""  # the workers' (benchmarks/settings.py)
            settings.JOBS_TRANSPORT = url  # this process's enqueue
            statements.forget(counts)
            window = statements.Window(counts)
            p50, p95 = pickup(args.pickup, "WARNING", window)
            pickup_sql = window.count / args.pickup
            statements.forget(counts)
            rate = drain(args.tasks, 2, 4, "WARNING")["rate"]
            drain_sql = statements.counted(counts) / args.tasks  # the whole life of the workers
            enqueue_sql = enqueue_statements(args.pickup)
            for key, value in zip(keys, [p50, p95, rate, pickup_sql, drain_sql, enqueue_sql],
                                  strict=True):  # fmt: skip
                figures[name][key].append(value)
            print(f"  {name}: p50 {p50:.1f} ms p95 {p95:.1f} ms drain {rate:,.0f}/s "
                  f"statements/task: pickup {pickup_sql:.2f} drain {drain_sql:.2f} "
                  f"enqueue {enqueue_sql:.2f}", flush=True)  # fmt: skip
    load = os.getloadavg()
    print(f"\nload at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}\n")
    print("| transport | pickup p50 | pickup p95 | drain, 2 workers | statements/task: "
          "worker at pickup | worker at drain | enqueue |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for name, values in figures.items():
        cells = [spread(values["p50"], " ms"), spread(values["p95"], " ms"),
                 spread(values["drain"], "/s", 0)]  # fmt: skip
        cells += [spread(values[key], "", 2) for key in ["pickup_sql", "drain_sql", "enqueue_sql"]]
        print(f"| {name} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
