"""Enqueue and drain a batch of no-op members (jobs.batch) against as many plain tasks.

    .venv/bin/python benchmarks/workflows.py --database sqlite:///$PWD/var/bench.sqlite3
    .venv/bin/python benchmarks/workflows.py --database postgres://root@127.0.0.1:5432/jobs_perf_bench

Per run and kind, interleaved: enqueue ``--tasks`` tasks (plain: ``enqueue_many``; batch:
``--tasks - 1`` members and an ``on_finish`` callback, so both finish ``--tasks`` rows), then
drain them with one ``runworker --burst``. The time is the enqueue plus the drain (first start to
last finish); the worker's peak RSS is sampled. Target: the batch within 1.5x the plain time.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.workers import drain, setup_django, vendor  # noqa: E402 (the path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default=os.environ.get("DATABASE_URL", ""))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    if not args.database:
        sys.exit("Name a database: --database postgres://... or sqlite:///path")
    setup_django(args.database)
    import jobs
    from benchmarks import tasks

    timed: dict[str, float] = {}

    def plain(count):
        started = time.perf_counter()
        tasks.noop.enqueue_many([(n,) for n in range(count)])
        timed["enqueue"] = time.perf_counter() - started

    def batch(count):
        started = time.perf_counter()
        jobs.batch([tasks.noop.s(n) for n in range(count - 1)], on_finish=tasks.noop.si(-1))
        timed["enqueue"] = time.perf_counter() - started

    kinds = {"plain tasks": plain, "one batch": batch}
    totals: dict[str, list[float]] = {kind: [] for kind in kinds}
    rss: dict[str, list[float]] = {kind: [] for kind in kinds}
    print(f"{vendor()}, {os.cpu_count()} cpus, {args.runs} runs, load {os.getloadavg()}")
    for _ in range(args.runs):
        for kind, enqueue in kinds.items():
            result = drain(args.tasks, 1, args.concurrency, "WARNING", enqueue=enqueue)
            totals[kind].append(timed["enqueue"] + result["seconds"])
            rss[kind].append((result["rss"] or 0) / 2**20)
            print(f"  {kind}: enqueue {timed['enqueue']:.2f} s + drain {result['seconds']:.2f} s")
    for kind in kinds:
        values = totals[kind]
        print(
            f"{kind}: {statistics.median(values):.2f} s ({min(values):.2f} - {max(values):.2f}),"
            f" worker peak RSS {statistics.median(rss[kind]):.0f} MiB"
        )
    ratios = [b / p for b, p in zip(totals["one batch"], totals["plain tasks"], strict=True)]
    print(
        f"batch / plain: {statistics.median(ratios):.2f} ({min(ratios):.2f} - {max(ratios):.2f}),"
        f" target <= 1.5; load after {os.getloadavg()}"
    )


if __name__ == "__main__":
    main()
