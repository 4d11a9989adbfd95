"""The database's share of a drain: our claim and outcome statements alone, no worker around them.

    .venv/bin/python benchmarks/database_floor.py --database postgres://root@127.0.0.1:5432/jobs_perf_bench

Queues ``--tasks`` no-op tasks, then ``--processes`` plain processes each loop over
``jobs.worker.claiming.claim_and_record``: record the previous batch as succeeded and claim
``--batch`` tasks in one transaction, exactly as a worker's supervisor does, until nothing is
left. No child runs a task, nothing is logged. The rate is what the worker could reach if its
Python cost nothing: the ceiling on this machine for this schema. Medians and spread over
``--runs``.
"""

import argparse
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def drain(number: int, batch: int) -> int:
    from django.utils import timezone

    from jobs import transitions
    from jobs.worker import claiming

    worker_id = f"floor-{os.getpid()}-{number}"
    successes, done = [], 0
    while True:
        claimed, _ = claiming.claim_and_record(
            worker_id, batch, successes, queues=["bench"], lease_seconds=60
        )
        if not claimed:  # the last successes were recorded by this call
            return done + len(successes)
        done += len(successes)
        now = timezone.now()
        successes = [transitions.Success(c.id, c.attempts, worker_id, None, now) for c in claimed]


def run(tasks: int, processes: int, batch: int) -> float:
    from django.db import connections

    from benchmarks.tasks import noop
    from benchmarks.workers import empty

    empty()
    noop.enqueue_many([(n,) for n in range(tasks)])
    connections.close_all()  # not shared with the forked processes
    started = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        done = sum(pool.starmap(drain, [(n, batch) for n in range(processes)]))
    seconds = time.perf_counter() - started
    if done != tasks:
        raise RuntimeError(f"drained {done} of {tasks} tasks")
    return tasks / seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default=os.environ.get("DATABASE_URL", ""))
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=400, help="tasks per claim")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if not args.database:
        sys.exit("Name a database: --database postgres://... or sqlite:///path")
    from benchmarks.workers import setup_django

    setup_django(args.database)
    for processes in (1, 2):
        rates = [run(args.tasks, processes, args.batch) for _ in range(args.runs)]
        median = statistics.median(rates)
        print(
            f"{processes} process(es), {args.batch} per claim: median {median:,.0f} tasks/s"
            f" ({min(rates):,.0f} .. {max(rates):,.0f})",
            flush=True,
        )


if __name__ == "__main__":
    main()
