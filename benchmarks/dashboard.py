"""Time the admin dashboard and each metrics query on a PostgreSQL table of 1,000,000 tasks.

    DATABASE_URL=postgres://root@127.0.0.1:5432/jobs_bench .venv/bin/python benchmarks/dashboard.py

The database is created and migrated if needed, then filled once with ``INSERT ... SELECT
generate_series`` (about half a minute for a million rows) and reused on later runs; ``--refill``
starts over. Most rows are finished tasks spread over 30 days, as on a busy production table
before pruning; the newest hours hold a backlog of pending, retrying and running tasks. Each
measurement is run ``--runs`` times after one warm-up; the median and the spread (min..max) are
printed in milliseconds.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FILL_SQL = """
INSERT INTO jobs_task (
    id, name, backend, queue, priority, status, payload, summary, idempotency_key, owner_id,
    attempts, max_attempts, run_after, progress_current, progress_total, progress_message,
    result, last_error, error_details, worker_id, lease_expires_at, cancel_requested_at,
    created_at, updated_at, started_at, finished_at)
SELECT
    gen_random_uuid(), 'app.task_' || (i % 20), '',
    (ARRAY['default', 'emails', 'imports', 'reports'])[1 + i % 4], 0, s.status,
    jsonb_build_object('args', jsonb_build_array(i), 'kwargs', '{}'::jsonb),
    'benchmark row ' || i, NULL, NULL,
    CASE WHEN s.status = 'pending' THEN 0 ELSE 1 + (i % 7 = 0)::int END, 3,
    CASE WHEN s.status = 'retrying' THEN t.created_at + interval '1 minute' ELSE t.created_at END,
    0, NULL, '', NULL,
    CASE WHEN s.status = 'failed' THEN 'Something went wrong.' ELSE '' END,
    CASE WHEN s.status = 'failed' THEN jsonb_build_array(jsonb_build_object(
        'attempt', 1, 'exception', 'builtins.' || (ARRAY['ValueError', 'KeyError'])[1 + i % 2],
        'message', 'bad row ' || i, 'traceback', 'Traceback ...', 'user_message', 'Sorry.'))
    ELSE '[]'::jsonb END,
    CASE WHEN s.status = 'running' THEN 'bench:1:worker' ELSE '' END,
    CASE WHEN s.status = 'running' THEN now() + interval '1 minute' END, NULL,
    t.created_at, t.created_at,
    CASE WHEN s.status IN ('pending', 'retrying') OR s.status = 'cancelled' THEN NULL
         ELSE t.created_at + (i % 10) * interval '1 second' END,
    CASE WHEN s.status IN ('succeeded', 'failed') THEN
            t.created_at + (i % 10) * interval '1 second' + ((i * 7) % 300) * interval '10 ms'
         WHEN s.status = 'cancelled' THEN t.created_at END
FROM generate_series(1, {rows}) AS i
CROSS JOIN LATERAL (SELECT now() - i * (interval '30 days' / {rows}) AS created_at) AS t
CROSS JOIN LATERAL (SELECT CASE
    WHEN i <= 5000 THEN 'pending'
    WHEN i <= 5500 THEN 'retrying'
    WHEN i <= 5550 THEN 'running'
    WHEN i % 67 = 0 THEN 'failed'
    WHEN i % 199 = 0 THEN 'cancelled'
    ELSE 'succeeded' END AS status) AS s
"""


def setup_django(url: str):
    if not url.startswith(("postgres://", "postgresql://")):
        sys.exit("This benchmark measures PostgreSQL: set DATABASE_URL=postgres://user@host/db")
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo_project.settings")
    os.environ.setdefault("DEBUG", "false")  # no query log eating memory and time
    os.environ.setdefault("ALLOWED_HOSTS", "localhost")
    create_database(url)
    import django

    django.setup()


def create_database(url: str):
    """Create the benchmark database when missing (connecting to the server's ``postgres``)."""
    import psycopg

    base, _, name = url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')
            print(f"created database {name}")


def fill(rows: int, refill: bool):
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from jobs.models import Task, Worker

    call_command("migrate", verbosity=0)
    if not refill and Task.objects.count() == rows:
        print(f"reusing {rows:,} rows")
        return
    started = time.perf_counter()
    with connection.cursor() as cursor:
        # CASCADE: the tables that refer to tasks (steps, effects) go with them.
        cursor.execute("TRUNCATE jobs_task, jobs_worker, jobs_queuepause CASCADE")
        # No parameters: the SQL uses % as modulo, and rows is an int.
        cursor.execute(FILL_SQL.replace("{rows}", str(int(rows))))
    now = timezone.now()
    for n in range(4):
        Worker.objects.create(
            id=f"bench:{n}:worker", hostname="bench", pid=n, concurrency=8, last_heartbeat_at=now
        )
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE jobs_task")
    print(f"filled {rows:,} rows in {time.perf_counter() - started:.1f} s")


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
        "dashboard page (GET)": page("/admin/jobs/task/dashboard/"),
        "changelist page (GET)": page("/admin/jobs/task/"),
        "changelist, failed only": page("/admin/jobs/task/?status__exact=failed"),
        "metrics.snapshot": metrics.snapshot,
        "metrics.status_counts": metrics.status_counts,
        "metrics.oldest_waiting": metrics.oldest_waiting,
        "metrics.throughput": metrics.throughput,
        "metrics.outcomes": metrics.outcomes,
        "metrics.retries": metrics.retries,
        "metrics.run_time_percentiles": metrics.run_time_percentiles,
        "metrics.wait_time_percentiles": metrics.wait_time_percentiles,
        "metrics.live_workers": metrics.live_workers,
        "metrics.recent_failures": metrics.recent_failures,
        "metrics.waiting_too_long": metrics.waiting_too_long,
        "metrics.running_too_long": metrics.running_too_long,
        "metrics.queue_names": metrics.queue_names,
        "metrics.task_names": metrics.task_names,
    }
    print(f"\n{'what':32} {'median ms':>10} {'min ms':>9} {'max ms':>9}   ({runs} runs)")
    for name, call in cases.items():
        call()  # warm-up: caches, plans, connection
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            call()
            times.append((time.perf_counter() - started) * 1000)
        print(f"{name:32} {statistics.median(times):10.1f} {min(times):9.1f} {max(times):9.1f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="tasks in the table")
    parser.add_argument("--runs", type=int, default=7, help="timed runs per measurement")
    parser.add_argument("--refill", action="store_true", help="empty and fill the table again")
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "")
    setup_django(url)
    fill(args.rows, args.refill)
    measure(args.runs)


if __name__ == "__main__":
    main()
