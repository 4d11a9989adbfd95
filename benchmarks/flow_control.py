"""Drain no-op tasks with flow control on beside the same tasks without it.

    .venv/bin/python benchmarks/flow_control.py --database postgres://root@127.0.0.1:5432/jobs_perf_bench
    .venv/bin/python benchmarks/flow_control.py --database sqlite:///$PWD/var/bench.sqlite3

Each run drains ``--tasks`` queued no-op tasks with one ``runworker --burst`` (``--concurrency``
children) twice, the kinds interleaved so that both see the same machine: without a key, then
spread over ``--keys`` concurrency keys at limit 1 (issue 14's target: at least half the rate
without). Medians and min..max of ``--runs`` runs, and the ratio of each run's pair.

``--floor 12`` adds a third kind, interleaved with the two: the tasks without a key, drained by
a worker whose claims ask for at most 96 (``JOBS_BATCH_SIZE`` 12), about what a claim of the
keyed drain takes (one task per key). It shows what claims of that size cost with no key logic
at all: a bound for any design that keeps the claim of keyed tasks plain (docs/performance.md).

    .venv/bin/python benchmarks/flow_control.py rate --database postgres://...

Rate limits, two figures. Starts per second achieved against the limit: ``--workers`` burst
workers drain ``--seconds`` worth of tasks of one rate key at each of ``--limits``; the starts
are counted per window (one a second) from each row's ``started_at``, the first and the last
window (entered part way, and what was left) aside. And what an active limit costs the claim
of tasks without one: the claim statement alone (``claim_and_record``, rolled back so every
claim sees the same rows) of ``--batch`` tasks beside ``--plain`` waiting ones, with no rate
key, then with one key whose window is full holding ``--held`` tasks, then ``--keys`` such keys,
interleaved ``--rounds`` times.
"""

import argparse
import math
import os
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.comparison import compare  # noqa: E402 (the path)
from benchmarks.workers import Report, empty, setup_django, start_workers, vendor  # noqa: E402


def enqueue_keyed(keys: int):
    def enqueue(count: int):
        from benchmarks import tasks

        for key in range(keys):
            calls = [(n,) for n in range(key, count, keys)]
            tasks.noop.using(concurrency_key=f"bench:{key}", concurrency_limit=1).enqueue_many(
                calls
            )

    return enqueue


def rate_main():
    parser = argparse.ArgumentParser(description="Rate limits: starts achieved, claim cost")
    parser.add_argument("rate")
    parser.add_argument("--database", default=os.environ.get("DATABASE_URL", ""))
    parser.add_argument("--limits", default="20/s,200/s", help="comma-separated rate limits")
    parser.add_argument("--seconds", type=int, default=6, help="windows' worth of tasks")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--plain", type=int, default=20_000, help="waiting tasks without a key")
    parser.add_argument("--held", type=int, default=10_000, help="tasks a full window holds")
    parser.add_argument("--keys", type=int, default=100, help="full keys, in the last kind")
    parser.add_argument("--batch", type=int, default=10, help="tasks per claim")
    parser.add_argument("--rounds", type=int, default=50, help="claims of each kind")
    args = parser.parse_args()
    if not args.database:
        sys.exit("Name a database: --database postgres://... or sqlite:///path")
    setup_django(args.database)
    print(f"{vendor()}, {os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}\n")
    report = Report()
    for text in args.limits.split(","):
        windows = achieved(text.strip(), args)
        report.add(
            f"starts per window at {text}, {args.workers} workers x {args.concurrency}, "
            "full windows / limit", windows, "", "0.90 to 1.00", "{:.2f}",
        )  # fmt: skip
    for kind, values in claim_costs(args).items():
        report.add(
            f"claim of {args.batch} beside {args.plain:,} waiting, {kind}",
            values,
            "ms",
            "",
            "{:.2f}",
        )
    print(report.markdown())


def achieved(text: str, args) -> list[float]:
    """Drain ``args.seconds`` windows' worth of tasks of one key at ``text``; the starts of
    each full window over the limit."""
    from benchmarks import tasks
    from jobs.models import RateWindow, Task
    from jobs.tasks.rates import parse_rate

    empty()
    RateWindow.objects.all().delete()
    rate = parse_rate(text)
    count = rate.count * args.seconds
    limited = tasks.noop.using(queue="bench", rate_key="bench", rate_limit=text)
    limited.enqueue_many([(n,) for n in range(count)])
    processes = start_workers(args.workers, concurrency=args.concurrency, burst=True,
                              log_level="WARNING")  # fmt: skip
    for process in processes:
        process.wait(timeout=args.seconds * 10 + 60)
    starts = Task.objects.filter(status="succeeded").values_list("started_at", flat=True)
    if len(starts) != count:
        raise RuntimeError(f"{len(starts)} of {count} tasks succeeded")
    windows = Counter(math.floor(start.timestamp() / rate.period) for start in starts)
    if max(windows.values()) > rate.count:
        raise RuntimeError(f"a window started more than {rate.count}: {sorted(windows.items())}")
    inner = sorted(windows)[1:-1]
    return [windows[window] / rate.count for window in inner]


def claim_costs(args) -> dict[str, list[float]]:
    """Milliseconds per claim of tasks without a key, beside full rate windows or none."""
    from django.db import connection, transaction
    from django.utils import timezone

    from benchmarks import tasks
    from jobs.models import RateWindow, Task
    from jobs.worker import claiming

    empty()
    RateWindow.objects.all().delete()
    tasks.noop.using(queue="bench").enqueue_many([(n,) for n in range(args.plain)])
    now = timezone.now()
    hour = int(now.timestamp()) // 3600 * 3600

    def hold(keys: int):
        Task.objects.filter(rate_key__isnull=False).delete()
        RateWindow.objects.all().delete()
        for key in range(keys):
            held = tasks.noop.using(queue="bench", rate_key=f"held:{key}", rate_limit="1/h")
            held.enqueue_many([(n,) for n in range(args.held // keys)])
        RateWindow.objects.bulk_create(
            RateWindow(key=f"held:{key}", window_start=hour, period=3600, rate_limit=1, started=1)
            for key in range(keys)
        )
        # The rows deleted and the claims rolled back leave dead index entries that a busy
        # table's autovacuum would clear: cleared here, so each kind starts from the same.
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("VACUUM ANALYZE jobs_task")

    class RolledBack(Exception):
        pass

    def one_claim() -> float:
        started = time.perf_counter()
        try:
            with transaction.atomic():
                claimed, _ = claiming.claim_and_record(
                    "bench", args.batch, [], queues=["bench"], lease_seconds=60, now=now
                )
                if len(claimed) != args.batch or any(c.name != "benchmarks.tasks.noop"
                                                     for c in claimed):  # fmt: skip
                    raise RuntimeError("the claim took held tasks, or too few")
                raise RolledBack
        except RolledBack:
            pass
        return (time.perf_counter() - started) * 1000

    kinds = {"no rate key": 0, f"1 full key holding {args.held:,}": 1,
             f"{args.keys} full keys holding {args.held:,}": args.keys}  # fmt: skip
    times: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(max(1, args.rounds // 10)):  # interleaved, ten claims a turn
        for kind, keys in kinds.items():
            hold(keys)
            one_claim()  # the first after the change warms the plan
            times[kind] += [one_claim() for _ in range(10)]
    return times


def main():
    if sys.argv[1:2] == ["rate"]:
        rate_main()
        return

    def kinds(args):
        found = {
            "no key": {},
            f"{args.keys} keys at limit 1": {"enqueue": enqueue_keyed(args.keys)},
        }
        if args.floor:
            claims = f"no key, claims of at most {8 * args.floor}"
            found[claims] = {"env": {"JOBS_BENCH_BATCH_SIZE": str(args.floor)}}
        return found

    def add_arguments(parser):
        parser.add_argument("--keys", type=int, default=100, help="concurrency keys, limit 1 each")
        parser.add_argument(
            "--floor", type=int, default=0,
            help="also drain the tasks without a key, the worker's JOBS_BATCH_SIZE set to this "
            "(its claims ask for at most 8 times as many): what claims of the keyed drain's "
            "size cost with no key logic",
        )  # fmt: skip

    compare(__doc__, kinds, runs=3, target="≥ 0.50", add_arguments=add_arguments)


if __name__ == "__main__":
    main()
