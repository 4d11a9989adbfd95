"""Drain no-op tasks with flow control on beside the same tasks without it.

    .venv/bin/python benchmarks/flow_control.py --database postgres://root@127.0.0.1:5432/jobs_perf_bench
    .venv/bin/python benchmarks/flow_control.py --database sqlite:///$PWD/var/bench.sqlite3

Each run drains ``--tasks`` queued no-op tasks with one ``runworker --burst`` (``--concurrency``
children) twice, the kinds interleaved so that both see the same machine: without a key, then
spread over ``--keys`` concurrency keys at limit 1 (issue 14's target: at least half the rate
without). Medians and min..max of ``--runs`` runs, and the ratio of each run's pair.
"""

import argparse
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.workers import Report, drain, setup_django, vendor  # noqa: E402 (the path)


def enqueue_keyed(keys: int):
    def enqueue(count: int):
        from benchmarks import tasks

        for key in range(keys):
            calls = [(n,) for n in range(key, count, keys)]
            tasks.noop.using(concurrency_key=f"bench:{key}", concurrency_limit=1).enqueue_many(
                calls
            )

    return enqueue


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default=os.environ.get("DATABASE_URL", ""))
    parser.add_argument("--runs", type=int, default=3, help="runs of each kind, interleaved")
    parser.add_argument("--tasks", type=int, default=10_000, help="no-op tasks to drain")
    parser.add_argument("--keys", type=int, default=100, help="concurrency keys, limit 1 each")
    parser.add_argument("--concurrency", type=int, default=4, help="children of the worker")
    parser.add_argument("--log-level", default="INFO", help="JOBS_LOG_LEVEL of the worker")
    args = parser.parse_args()
    if not args.database:
        sys.exit("Name a database: --database postgres://... or sqlite:///path")
    setup_django(args.database)
    print(f"{vendor()}, {os.cpu_count()} cpus, {args.runs} runs, log level {args.log_level}\n")
    kinds = {"no key": None, f"{args.keys} keys at limit 1": enqueue_keyed(args.keys)}
    rates: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(args.runs):
        for kind, enqueue in kinds.items():
            result = drain(args.tasks, 1, args.concurrency, args.log_level, enqueue=enqueue)
            rates[kind].append(result["rate"])
    report = Report()
    for kind, values in rates.items():
        report.add(
            f"drain {args.tasks:,} no-op tasks, {kind}, 1 worker x {args.concurrency}",
            values,
            "tasks/s",
        )
    plain, keyed = rates.values()
    ratios = [k / p for p, k in zip(plain, keyed, strict=True)]
    print(report.markdown())
    print(
        f"\nkeyed / plain, per run: median {statistics.median(ratios):.2f} "
        f"({min(ratios):.2f}..{max(ratios):.2f}); target >= 0.50"
    )


if __name__ == "__main__":
    main()
