"""Benchmark recorded steps and progress reports: time per call and memory, as steps pile up.

    .venv/bin/python benchmarks/steps.py --database sqlite:///$PWD/var/bench-steps.sqlite3
    .venv/bin/python benchmarks/steps.py --database postgres://root@127.0.0.1:5432/jobs_bench_steps

One task records ``--steps`` steps (100,000 by default) through ``TaskContext.step``, with a
progress report after each, as a long import does. Every ``--every`` steps it prints the mean
time per step over the last stretch, and the resident memory of this process: both stay flat
when a step costs the same whatever the number before it. Use a database of its own: its tasks
are deleted first.
"""

import argparse
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.memory import memory_of  # noqa: E402 (after the path is set)
from benchmarks.workers import setup_django  # noqa: E402


def run(steps: int, every: int):
    from jobs.execution.context import TaskContext
    from jobs.models import Task, TaskStep
    from jobs.tasks.enqueueing import enqueue

    Task.objects.all().delete()
    task = enqueue("benchmarks.tasks.noop")
    Task.objects.filter(pk=task.pk).update(status="running", attempts=1, worker_id="bench")
    task.refresh_from_db()
    context = TaskContext(task)
    print(f"{'steps':>9} {'µs/step':>9} {'RSS MiB':>8} {'peak MiB':>9}")
    started = time.perf_counter()
    for number in range(1, steps + 1):
        context.step(f"import:{number}", lambda number=number: number)
        context.progress(number, steps, f"Imported {number:,} of {steps:,} rows")
        if number % every == 0:
            now = time.perf_counter()
            rss = memory_of(os.getpid())[0] / 2**20
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"{number:>9,} {(now - started) / every * 1e6:>9.0f} {rss:>8.1f} {peak:>9.1f}")
            started = now
    assert TaskStep.objects.filter(task_id=task.pk).count() == steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default=os.environ.get("DATABASE_URL", ""))
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--every", type=int, default=10_000)
    args = parser.parse_args()
    if not args.database:
        parser.error("--database (or DATABASE_URL) is required")
    setup_django(args.database)
    run(args.steps, args.every)


if __name__ == "__main__":
    main()
