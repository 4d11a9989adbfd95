"""Drain no-op tasks with flow control on beside the same tasks without it.

    .venv/bin/python benchmarks/flow_control.py --database postgres://root@127.0.0.1:5432/jobs_perf_bench
    .venv/bin/python benchmarks/flow_control.py --database sqlite:///$PWD/var/bench.sqlite3

Each run drains ``--tasks`` queued no-op tasks with one ``runworker --burst`` (``--concurrency``
children) twice, the kinds interleaved so that both see the same machine: without a key, then
spread over ``--keys`` concurrency keys at limit 1 (issue 14's target: at least half the rate
without). Medians and min..max of ``--runs`` runs, and the ratio of each run's pair.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.comparison import compare  # noqa: E402 (the path)


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
    compare(
        __doc__,
        lambda args: {
            "no key": {},
            f"{args.keys} keys at limit 1": {"enqueue": enqueue_keyed(args.keys)},
        },
        runs=3,
        target="≥ 0.50",
        add_arguments=lambda parser: parser.add_argument(
            "--keys", type=int, default=100, help="concurrency keys, limit 1 each"
        ),
    )


if __name__ == "__main__":
    main()
