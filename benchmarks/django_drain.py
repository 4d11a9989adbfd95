"""Drain no-op tasks declared with Django's ``@task`` beside the same body with ``@jobs.task``.

    .venv/bin/python benchmarks/django_drain.py --database postgres://root@127.0.0.1:5432/jobs_perf_bench
    .venv/bin/python benchmarks/django_drain.py --database sqlite:///$PWD/var/bench.sqlite3

Drains ``--tasks`` queued no-op tasks with one ``runworker --burst`` (``--concurrency``
children), once per kind in each run, the kinds interleaved so that both see the same machine;
``--runs`` runs, medians and min..max. Django's own signal receivers stay connected (its log
lines are written at ``--log-level``), as in a project. Also the CPU time the worker (supervisor
and children) used per task: steadier than the rate on a shared machine.
"""

import argparse
import os
import resource
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.workers import Report, drain, setup_django, vendor  # noqa: E402 (the path)


def enqueue_django(count: int):
    """Queue ``count`` calls of ``benchmarks.tasks.django_noop`` in bulk: Django has no bulk
    enqueue, jobs' task object has (``enqueue_many``), rows as its backend stores them (due at
    their creation, ``run_after == created_at``: not deferred to Django's API)."""
    from benchmarks import tasks

    tasks.django_noop.enqueue_many([(n,) for n in range(count)])


def children_cpu_seconds() -> float:
    """User and system CPU time of the ended processes this one started, and theirs (the
    worker's children are waited for by it)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default=os.environ.get("DATABASE_URL", ""))
    parser.add_argument("--runs", type=int, default=5, help="runs of each kind, interleaved")
    parser.add_argument("--tasks", type=int, default=10_000, help="no-op tasks to drain")
    parser.add_argument("--concurrency", type=int, default=4, help="children of the worker")
    parser.add_argument("--log-level", default="INFO", help="JOBS_LOG_LEVEL of the worker")
    args = parser.parse_args()
    if not args.database:
        sys.exit("Name a database: --database postgres://... or sqlite:///path")
    setup_django(args.database)
    print(f"{vendor()}, {os.cpu_count()} cpus, {args.runs} runs, log level {args.log_level}\n")
    kinds = {"@jobs.task": "noop", "Django's @task": "django_noop"}
    rates: dict[str, list[float]] = {kind: [] for kind in kinds}
    cpu: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(args.runs):
        for kind, task in kinds.items():
            before = children_cpu_seconds()
            result = drain(
                args.tasks, 1, args.concurrency, args.log_level, task=task,
                enqueue=enqueue_django if task == "django_noop" else None,
            )  # fmt: skip
            rates[kind].append(result["rate"])
            cpu[kind].append((children_cpu_seconds() - before) / args.tasks * 1e6)
    report = Report()
    for kind, values in rates.items():
        report.add(
            f"drain {args.tasks:,} no-op tasks, {kind}, 1 worker x {args.concurrency}",
            values,
            "tasks/s",
        )
    for kind, values in cpu.items():
        report.add(f"worker CPU per task, {kind}", values, "µs")
    ratios = [d / j for d, j in zip(rates["Django's @task"], rates["@jobs.task"], strict=True)]
    report.add("Django's @task / @jobs.task, run by run", ratios, "", "≥ 0.90", "{:.2f}")
    print(f"\nmedian ratio {statistics.median(ratios):.2f}")
    print("\n" + report.markdown())


if __name__ == "__main__":
    main()
