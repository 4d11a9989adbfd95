"""Drain async tasks that each await ``asyncio.sleep(0.1)``, with one worker.

    .venv/bin/python benchmarks/async_drain.py --database postgres://root@127.0.0.1:5432/jobs_perf_bench
    .venv/bin/python benchmarks/async_drain.py --database sqlite:///$PWD/var/bench.sqlite3

Drains ``--tasks`` queued async tasks with one ``runworker --burst`` of the default concurrency
(``JOBS_CONCURRENCY`` children, each running up to ``JOBS_ASYNC_CONCURRENCY`` of them at once on
its event loop), declared with ``@jobs.task`` and with Django's ``@task``, the kinds interleaved;
``--runs`` runs, medians and min..max. The time is from the first task's start to the last
one's finish; the target is 1,000 tasks in under 2 s (one at a time per child, about 25 s).
"""

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.workers import Report, drain, setup_django, vendor  # noqa: E402 (the path)


def enqueue_django(count: int):
    """Queue ``count`` calls of the Django task: the rows of the jobs task, renamed, as its
    backend stores them (see benchmarks/django_drain.py)."""
    from django.db.models import F

    from benchmarks import tasks
    from jobs.models import Task

    tasks.async_sleep100.enqueue_many([(n,) for n in range(count)])
    Task.objects.update(
        name=tasks.django_async_sleep100.module_path, backend="default", run_after=F("created_at")
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default=os.environ.get("DATABASE_URL", ""))
    parser.add_argument("--runs", type=int, default=5, help="runs of each kind, interleaved")
    parser.add_argument("--tasks", type=int, default=1_000, help="async tasks to drain")
    parser.add_argument("--concurrency", type=int, default=None,
                        help="children of the worker (default: JOBS_CONCURRENCY)")  # fmt: skip
    parser.add_argument("--log-level", default="WARNING", help="JOBS_LOG_LEVEL of the worker")
    args = parser.parse_args()
    if not args.database:
        sys.exit("Name a database: --database postgres://... or sqlite:///path")
    setup_django(args.database)
    from jobs.conf import jobs_settings

    concurrency = args.concurrency or jobs_settings.CONCURRENCY
    print(
        f"{vendor()}, {os.cpu_count()} cpus, {args.runs} runs, {concurrency} children, "
        f"JOBS_ASYNC_CONCURRENCY={jobs_settings.ASYNC_CONCURRENCY}\n"
    )
    kinds = {"@jobs.task": None, "Django's @task": enqueue_django}
    seconds: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(args.runs):
        for kind, enqueue in kinds.items():
            result = drain(args.tasks, 1, concurrency, args.log_level, task="async_sleep100",
                           enqueue=enqueue)  # fmt: skip
            seconds[kind].append(result["seconds"])
            print(f"  {kind}: {result['seconds']:.2f} s", flush=True)
    report = Report()
    for kind, values in seconds.items():
        report.add(
            f"drain {args.tasks:,} async tasks of 100 ms, {kind}, 1 worker x {concurrency}",
            values, "s", target="< 2 s", fmt="{:.2f}",
        )  # fmt: skip
    print()
    print(report.markdown())


if __name__ == "__main__":
    main()
