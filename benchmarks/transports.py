"""Pickup latency and drain per transport (the database, Redis Streams), on one database.

    .venv/bin/python benchmarks/transports.py --database sqlite:///$PWD/var/bench.sqlite3
    .venv/bin/python benchmarks/transports.py --database postgres://root@127.0.0.1:5432/jobs_perf_bench

Pickup: enqueue-to-start latency (p50/p95) of ``--pickup`` tasks 20 ms apart with one idle worker
(``benchmarks.workers.pickup``); drain: ``--tasks`` queued no-op tasks run by 2 burst workers.
Each transport runs ``--runs`` times, interleaved; medians and min..max. ``--redis`` names the
Redis server (the machine's shared one by default; the benchmark only adds streams under
``jobs:queue:``). JOBS_POLL_INTERVAL is the default (1 s): on SQLite the database transport's
pickup is about half of it.
"""

import argparse
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.workers import drain, pickup, setup_django, vendor  # noqa: E402 (the path)


def spread(values, unit):
    return f"{statistics.median(values):,.1f} {unit} ({min(values):,.1f}..{max(values):,.1f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default=os.environ.get("DATABASE_URL", ""))
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pickup", type=int, default=100, help="tasks of the pickup test")
    parser.add_argument("--tasks", type=int, default=2_000, help="tasks of the drain")
    args = parser.parse_args()
    if not args.database:
        sys.exit("Name a database: --database postgres://... or sqlite:///path")
    setup_django(args.database)
    from django.conf import settings

    print(f"{vendor()}, {os.cpu_count()} cpus, {args.runs} runs\n")
    transports = {"database": None, "redis": args.redis}
    figures = {name: {"p50": [], "p95": [], "drain": []} for name in transports}
    for _ in range(args.runs):
        for name, url in transports.items():
            os.environ["JOBS_TRANSPORT"] = url or ""  # the workers' (benchmarks/settings.py)
            settings.JOBS_TRANSPORT = url  # this process's enqueue
            p50, p95 = pickup(args.pickup, "WARNING")
            rate = drain(args.tasks, 2, 4, "WARNING")["rate"]
            figures[name]["p50"].append(p50)
            figures[name]["p95"].append(p95)
            figures[name]["drain"].append(rate)
            print(f"  {name}: p50 {p50:.1f} ms p95 {p95:.1f} ms drain {rate:,.0f}/s", flush=True)
    print("\n| transport | pickup p50 | pickup p95 | drain, 2 workers |")
    print("|---|---|---|---|")
    for name, values in figures.items():
        print(f"| {name} | {spread(values['p50'], 'ms')} | {spread(values['p95'], 'ms')} | "
              f"{spread(values['drain'], 'tasks/s')} |")  # fmt: skip


if __name__ == "__main__":
    main()
