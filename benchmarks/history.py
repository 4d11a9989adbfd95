"""Time the rollup rounds over 1,000,000 finished tasks, and the history pages over their rollups.

    DATABASE_URL=postgres://root@127.0.0.1:5432/jobs_bench .venv/bin/python benchmarks/history.py

The table is the dashboard benchmark's (``benchmarks/dashboard.py``: 30 days of tasks, 20 task
names in 4 queues, filled once and reused). The rollups are emptied, then rolled up from the
start as a worker's maintenance rounds would, one bounded chunk per round
(``jobs.maintenance.rollups.CHUNK_ROWS`` per status): the time of each step of a round (median
and spread) and of the whole catch-up are printed (``--rounds N``: the first N rounds only),
then those of later rounds. Then the pages that read the rollups are timed: the dashboard with
the hour, the day and the week, a task type's page, and ``metrics.history`` alone, ``--runs``
times each after one warm-up (``--pages-only`` keeps the rollups there are).
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


def timed(call, *args, **kwargs) -> float:
    started = time.perf_counter()
    call(*args, **kwargs)
    return (time.perf_counter() - started) * 1000


def roll_from_scratch(limit: int):
    """Empty the rollups and roll them up again, timing each round's steps; at most ``limit``
    rounds (0: until caught up)."""
    from django.utils import timezone

    from jobs.maintenance import rollups
    from jobs.models import RollupMark, TaskRollup

    TaskRollup.objects.all().delete()
    RollupMark.objects.all().delete()
    now = timezone.now()
    steps: dict[str, list[float]] = {"minutes": [], "hours": [], "forget": []}
    started = time.perf_counter()
    while not limit or len(steps["minutes"]) < limit:
        mark = rollups.rolled_until(60)
        steps["minutes"].append(timed(rollups.roll_minutes, now=now))
        steps["hours"].append(timed(rollups.roll_hours, now=now))
        steps["forget"].append(timed(rollups.forget_old, now=now))
        if rollups.rolled_until(60) == mark:
            break
    total = time.perf_counter() - started
    rounds = len(steps["minutes"])
    print(f"\n{'catch-up, per round':32} {'median ms':>10} {'min ms':>9} {'max ms':>9}")
    for name, times in steps.items():
        print(f"{name:32} {spread(times)}   ({rounds} rounds)")
    print(f"{rounds} rounds in {total:.1f} s; rollups kept: {TaskRollup.objects.count():,}")


def idle_rounds():
    """Time the steps of a round with nothing new to roll up (the rollups as they are)."""
    from django.utils import timezone

    from jobs.maintenance import rollups

    steps: dict[str, list[float]] = {"minutes": [], "hours": [], "forget": [], "round": []}
    for _ in range(7):
        now = timezone.now()
        steps["minutes"].append(timed(rollups.roll_minutes, now=now))
        steps["hours"].append(timed(rollups.roll_hours, now=now))
        steps["forget"].append(timed(rollups.forget_old, now=now))
        steps["round"].append(timed(rollups.run, "bench", now=now))
    print(f"\n{'a later round, per step':32} {'median ms':>10} {'min ms':>9} {'max ms':>9}")
    for name, times in steps.items():
        print(f"{name:32} {spread(times)}   (7 rounds)")


def measure(runs: int):
    from django.contrib.auth import get_user_model
    from django.test import Client, RequestFactory

    from jobs import metrics
    from jobs.admin import history

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
        "history section alone, week": lambda: history.dashboard_context(
            RequestFactory().get("/", {"history": "week"})
        ),
        "metrics.history('week')": lambda: metrics.history("week"),
        "metrics.history('day')": lambda: metrics.history("day"),
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
    parser.add_argument("--rounds", type=int, default=0, help="catch-up rounds timed (0: all)")
    args = parser.parse_args()
    setup_django(os.environ.get("DATABASE_URL", ""))
    fill(args.rows, args.refill)
    if not args.pages_only:
        roll_from_scratch(args.rounds)
    idle_rounds()
    measure(args.runs)


if __name__ == "__main__":
    main()
