"""The per-task cost of checking a task's return value: reading the limit and measuring its text.

    .venv/bin/python benchmarks/result_check.py

Times ``jobs_settings.MAX_RESULT_BYTES`` (Django's settings without the setting: its default)
and ``jobs.tasks.payload.check_result_size`` for the results a quick task returns (None, an int,
a short string) and a small dict, in microseconds a call, best of ``--runs`` rounds. Run it on
two trees to compare them; no database is used.
"""

import argparse
import os
import sys
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=200_000, help="calls a round")
    parser.add_argument("--runs", type=int, default=5, help="rounds; the best is shown")
    args = parser.parse_args()
    os.environ.setdefault("DATABASE_URL", "sqlite:///:memory:")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")
    os.environ.setdefault("ALLOWED_HOSTS", "localhost")
    import django

    django.setup()
    from jobs.conf import jobs_settings
    from jobs.tasks.payload import check_result_size

    what = "the task's return value"
    cases = {
        "read JOBS_MAX_RESULT_BYTES": lambda: jobs_settings.MAX_RESULT_BYTES,
        "check_result_size(None)": lambda: check_result_size(None, what),
        "check_result_size(12345)": lambda: check_result_size(12345, what),
        "check_result_size('done')": lambda: check_result_size("done", what),
        "check_result_size({'rows': 3, 'ids': [1, 2, 3]})": lambda: check_result_size(
            {"rows": 3, "ids": [1, 2, 3]}, what
        ),
    }
    for label, call in cases.items():
        best = min(timeit.repeat(call, number=args.number, repeat=args.runs)) / args.number
        print(f"{label}: {best * 1e6:.2f} µs")


if __name__ == "__main__":
    main()
