"""Time the rollup rounds over 1,000,000 finished tasks, and the history pages over their rollups.

    DATABASE_URL=postgres://root@127.0.0.1:5432/jobs_bench .venv/bin/python benchmarks/history.py

The table is the dashboard benchmark's (``benchmarks/dashboard.py``: 30 days of tasks, 20 task
names in 4 queues, filled once and reused). The rollups are emptied, then rolled up from the
start as a worker's maintenance rounds would, one bounded chunk per round
(``jobs.maintenance.rollups.CHUNK_ROWS`` per status): the time of each round (median and spread)
and of the whole catch-up are printed, then that of a round with nothing left to do. Then the
pages that read the rollups are timed: the dashboard with the hour, the day and the week, a
task type's page, and ``metrics.history`` alone, ``--runs`` times each after one warm-up.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.dashboard import fill, setup_django  # noqa: E402


def spread(times: list[float]) -> str:
    return f"{statistics.median(times):10.1f} {min(times):9.1f} {max(times):9.1f}"


def roll_everything():
    from django.utils import timezone

    from jobs.maintenance import rollups
    from jobs.models import RollupMark, TaskRollup

    TaskRollup.objects.all().delete()
    RollupMark.objects.all().delete()
    now = timezone.now()
    rounds, started = [], time.perf_counter()
    while True:
        mark = rollups.rolled_until(60)
        one = time.perf_counter()
        rollups.run("bench", now=now)
        rounds.append((time.perf_counter() - one) * 1000)
        if rollups.rolled_until(60) == mark and not rollups.roll_hours(now=now):
            break
    total = time.perf_counter() - started
    print(f"\n{'rollup round':32} {'median ms':>10} {'min ms':>9} {'max ms':>9}")
    print(f"{'one round (a chunk)':32} {spread(rounds)}   ({len(rounds)} rounds)")
    written = TaskRollup.objects.count()
    print(f"catch-up of the whole table: {total:.1f} s; rollups kept: {written:,}")
    idle = []
    for _ in range(7):
        one = time.perf_counter()
        rollups.run("bench", now=now)
        idle.append((time.perf_counter() - one) * 1000)
    print(f"{'a round with nothing to do':32} {spread(idle)}")


def measure(runs: int):
    from django.contrib.auth import get_user_model
    from django.test import Client

    from jobs import metrics

    user, _ = get_user_model().objects.get_or_create(
        username="bench-admin", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)

    def page(url):
        def get():
            response = client.get(url)
            assert response.status_code == 200, response.status_code

        return get

    cases = {
        "dashboard, history of the hour": page("/admin/jobs/task/dashboard/"),
        "dashboard, history of the day": page("/admin/jobs/task/dashboard/?history=day"),
        "dashboard, history of the week": page("/admin/jobs/task/dashboard/?history=week"),
        "task type page, week": page("/admin/jobs/task/task-type/?name=app.task_3&history=week"),
        "metrics.history('week')": lambda: metrics.history("week"),
        "metrics.history('hour')": lambda: metrics.history("hour"),
    }
    print(f"\n{'what':32} {'median ms':>10} {'min ms':>9} {'max ms':>9}   ({runs} runs)")
    for name, call in cases.items():
        call()
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            call()
            times.append((time.perf_counter() - started) * 1000)
        print(f"{name:32} {spread(times)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="tasks in the table")
    parser.add_argument("--runs", type=int, default=7, help="timed runs per measurement")
    parser.add_argument("--refill", action="store_true", help="empty and fill the table again")
    parser.add_argument("--pages-only", action="store_true", help="keep the rollups, time pages")
    args = parser.parse_args()
    setup_django(os.environ.get("DATABASE_URL", ""))
    fill(args.rows, args.refill)
    if not args.pages_only:
        roll_everything()
    measure(args.runs)


if __name__ == "__main__":
    main()
