"""Profile a worker draining no-op tasks: the supervisor and one child, with cProfile.

    DATABASE_URL=postgres://root@127.0.0.1:5432/jobs_perf_bench \\
        .venv/bin/python benchmarks/profile_worker.py --tasks 5000

Runs one ``runworker --burst`` in this process (the supervisor under cProfile) after queueing
``--tasks`` no-op tasks; each child profiles its own batches and writes
``var/profile-child-<pid>.prof`` after each batch. Prints the top functions of both.

Under the profiler a task costs several times its usual CPU time, so a batch's time budget
(``JOBS_BATCH_SECONDS``, 0.02 s) fits fewer tasks: about 5 a batch instead of about 80 for a
no-op, which multiplies whatever a child does once per batch (a Django task's held successes
are one statement per batch). ``--batch-seconds`` (0.1 by default here) keeps the batches
about as large as in an unprofiled drain; the ``batches`` line printed says how large they were.
"""

import argparse
import cProfile
import glob
import json
import os
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument(
        "--batch-seconds", type=float, default=0.1, help="JOBS_BATCH_SECONDS (see above)"
    )
    parser.add_argument(
        "--task", default="noop", help="noop, sleep50 (the mixed load), or django_noop (@task)"
    )
    args = parser.parse_args()
    from benchmarks.workers import empty, setup_django

    setup_django(os.environ["DATABASE_URL"])
    from django.conf import settings

    settings.JOBS_BATCH_SECONDS = args.batch_seconds
    from benchmarks import tasks
    from jobs.worker import child
    from jobs.worker.lifecycle import Worker

    out = ROOT / "var"
    for old in glob.glob(str(out / "profile-child-*.prof")) + glob.glob(
        str(out / "batches-child-*.json")
    ):
        os.unlink(old)
    run = child._BatchRunner.run
    state = {"profile": None}
    batches = {"count": 0, "tasks": 0}

    def profiled(runner, message):
        batches["count"] += 1
        batches["tasks"] += len(message["tasks"])
        (out / f"batches-child-{os.getpid()}.json").write_text(json.dumps(batches))
        if state["profile"] is None:
            state["profile"] = cProfile.Profile(time.process_time)
        state["profile"].enable()
        try:
            return run(runner, message)
        finally:
            state["profile"].disable()
            state["profile"].dump_stats(out / f"profile-child-{os.getpid()}.prof")

    child._BatchRunner.run = profiled
    empty()
    if args.task == "django_noop":
        from benchmarks.django_drain import enqueue_django

        enqueue_django(args.tasks)
    else:
        getattr(tasks, args.task).enqueue_many([(n,) for n in range(args.tasks)])
    worker = Worker(queues=["bench"], concurrency=args.concurrency, burst=True)
    # CPU time, not wall time: the supervisor mostly waits, for the database and its children.
    profile = cProfile.Profile(time.process_time)
    profile.runcall(worker.run)
    print("== supervisor")
    pstats.Stats(profile).sort_stats("tottime").print_stats(args.top)
    sent = [json.loads(Path(f).read_text()) for f in glob.glob(str(out / "batches-child-*.json"))]
    count = sum(b["count"] for b in sent)
    print(f"== batches: {count}, {sum(b['tasks'] for b in sent) / max(count, 1):.1f} tasks each")
    print("   (sent; those not started in the budget go back and are sent again)")
    files = sorted(glob.glob(str(out / "profile-child-*.prof")))
    if files:
        print(f"== children ({len(files)} files)")
        pstats.Stats(*files).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
