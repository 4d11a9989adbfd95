"""Where the pickup goes: the enqueue call, then created_at -> started_at (the claim), then the
body's first line, each at its median and p95 over 100 tasks enqueued 20 ms apart to one idle
worker (``runworker --concurrency 4``), as ``benchmarks/peers.py``'s pickup enqueues them.

    .venv/bin/python benchmarks/pickup_breakdown.py postgres://root@127.0.0.1:5432/jobs

``created_at`` is stamped by the enqueuing process before its INSERT, ``started_at`` by the
claim as it starts (the claim thread's clock, before its statement), the body's first line by
the task (``benchmarks.tasks.stamp``): ``created->started`` holds the enqueue's commit, the
NOTIFY and the wake-up, ``started->body`` the claim's statement and commit and the dispatch.
"""

import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TASKS = 100
SPACING = 0.02  # seconds between enqueues: the worker is idle at each


def main(url: str):
    stamp_file = os.path.join(tempfile.mkdtemp(), "stamps.txt")
    os.environ["PEERS_STAMP_FILE"] = stamp_file  # the worker inherits it

    from benchmarks.workers import setup_django

    setup_django(url)
    from benchmarks.peers.drive import read_stamps, wait_for, warm_up
    from benchmarks.tasks import stamp
    from benchmarks.workers import empty, start_workers, stop_workers
    from jobs.models import Task

    empty()
    processes = start_workers(1, concurrency=4, burst=False, log_level="INFO")
    try:
        warm_up(stamp.enqueue, stamp_file)
        sent, returned, ids = {}, {}, {}
        next_at = time.monotonic()
        for n in range(TASKS):
            sent[n] = time.time()
            ids[n] = stamp.enqueue(n).id
            returned[n] = time.time()
            next_at += SPACING
            time.sleep(max(0, next_at - time.monotonic()))
        wait_for(lambda: len(read_stamps(stamp_file)) >= TASKS + 1, 60, "stamps")
    finally:
        stop_workers(processes)
    stamps = read_stamps(stamp_file)
    rows = {str(task.pk): task for task in Task.objects.filter(pk__in=list(ids.values()))}
    parts: dict[str, list[float]] = {
        "enqueue call": [],
        "call->created": [],
        "created->started": [],
        "started->body": [],
        "return->body": [],
        "total": [],
    }
    for n in range(TASKS):
        task = rows[str(ids[n])]
        created, started = task.created_at.timestamp(), task.started_at.timestamp()
        parts["enqueue call"].append((returned[n] - sent[n]) * 1e3)
        parts["call->created"].append((created - sent[n]) * 1e3)
        parts["created->started"].append((started - created) * 1e3)
        parts["started->body"].append((stamps[n] - started) * 1e3)
        parts["return->body"].append((stamps[n] - returned[n]) * 1e3)
        parts["total"].append((stamps[n] - sent[n]) * 1e3)
    for name, values in parts.items():
        values.sort()
        p95 = values[int(len(values) * 0.95)]
        print(f"{name:18} p50 {statistics.median(values):7.2f}  p95 {p95:7.2f} ms")


if __name__ == "__main__":
    main(sys.argv[1])
