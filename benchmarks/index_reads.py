"""What the task table's indexes buy on the pages: EXPLAIN ANALYZE of each page's queries.

    .venv/bin/python benchmarks/index_reads.py --database postgres://root@127.0.0.1:5432/jobs_index_reads

PostgreSQL only; the database's task table is emptied and filled with ``--rows`` rows (mostly
finished, some waiting, retrying and running, three queues, twelve names). Each page of the
admin, the dashboard, the errors page, a task's page and the status view is fetched once with
the test client, and the ``jobs_task`` queries it ran are kept (with pruning's and the rollup
round's reads); then, for each variant (the table as migrated, or one index changed), the
change is made in a transaction, the queries are run under ``EXPLAIN ANALYZE`` (best of three),
and the transaction is rolled back. Printed: ms per page, summed over its queries.
"""

import argparse
import os
import sys
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FILL = """
INSERT INTO jobs_task (id, name, backend, queue, priority, status, payload, summary,
  idempotency_key, owner_id, concurrency_key, concurrency_limit, rate_key, rate_limit,
  rate_period, unique_key, unique_while, attempts, max_attempts, run_after, expires_at, snoozes,
  progress_current, progress_total, progress_message, result, result_public, last_error,
  error_details, worker_id, lease_expires_at, cancel_requested_at, cancelled_by_id, created_at,
  updated_at, started_at, finished_at)
SELECT gen_random_uuid(), 'app.tasks.t' || (n %% 12), '',
  (ARRAY['default', 'mail', 'reports'])[1 + n %% 3],
  0, CASE WHEN n <= 2000 THEN 'pending' WHEN n <= 2500 THEN 'retrying' WHEN n <= 3000 THEN 'running'
    WHEN n %% 20 = 0 THEN 'failed' WHEN n %% 97 = 0 THEN 'cancelled' ELSE 'succeeded' END,
  '{"args": [1], "kwargs": {}}', '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1, 3,
  now() - n * interval '3 seconds', NULL, 0, 0, NULL, '', NULL, false, '', '[]', '',
  CASE WHEN n > 2500 AND n <= 3000 THEN now() + interval '60 s' END, NULL, NULL,
  now() - n * interval '3 seconds', now(),
  CASE WHEN n > 2500 THEN now() - n * interval '3 seconds' + interval '1 s' END,
  CASE WHEN n > 3000 THEN now() - n * interval '3 seconds' + interval '2 s' END
FROM generate_series(1, %s) AS n
"""

VARIANTS = {
    "as migrated": [],
    "(status, finished_at) partial on finished_at IS NOT NULL": [
        "DROP INDEX jobs_task_status_finished_idx",
        "CREATE INDEX jobs_task_finished_idx ON jobs_task (status, finished_at) "
        "WHERE finished_at IS NOT NULL",
    ],
    "without created_idx": ["DROP INDEX jobs_task_created_idx"],
    "without name_created_idx": ["DROP INDEX jobs_task_name_created_idx"],
    "without queue_status_idx": ["DROP INDEX jobs_task_queue_status_idx"],
}


def page_queries() -> dict[str, list[str]]:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from jobs.models import Task

    admin, _ = get_user_model().objects.update_or_create(
        username="index-reads", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(admin)
    some = Task.objects.order_by("-created_at").values_list("pk", flat=True)[500]
    pages = {
        "admin list": "/admin/jobs/task/",
        "admin list, pending": "/admin/jobs/task/?status__exact=pending",
        "admin list, running": "/admin/jobs/task/?status__exact=running",
        "admin list, failed": "/admin/jobs/task/?status__exact=failed",
        "admin list, by name": "/admin/jobs/task/?name=app.tasks.t3",
        "admin list, by queue": "/admin/jobs/task/?queue=mail",
        "dashboard": "/admin/jobs/task/dashboard/",
        "errors page": "/admin/jobs/task/errors/",
        "task page": f"/admin/jobs/task/{some}/change/",
        "status view": f"/jobs/tasks/{some}/",
    }

    def reads(captured) -> list[str]:
        return [
            query["sql"]
            for query in captured.captured_queries
            if "jobs_task" in query["sql"]
            and query["sql"].lstrip().upper().startswith(("SELECT", "WITH"))
        ]

    found = {}
    for label, url in pages.items():
        with CaptureQueriesContext(connection) as captured:
            response = client.get(url)
        if response.status_code != 200:
            raise RuntimeError(f"{url} answered {response.status_code}")
        found[label] = reads(captured)
    now = timezone.now()
    pruned = Task.objects.filter(status="succeeded", finished_at__lt=now - timedelta(hours=12))
    rolled = Task.objects.filter(
        status="succeeded",
        finished_at__gte=now - timedelta(hours=2),
        finished_at__lt=now - timedelta(hours=1),
    )
    for label, queryset in (
        ("pruning batch", pruned.order_by("finished_at").values_list("pk", flat=True)[:1000]),
        ("rollup round read", rolled.values_list("queue", "name", "started_at", "finished_at")),
    ):
        with CaptureQueriesContext(connection) as captured:
            list(queryset)
        found[label] = reads(captured)
    return found


class RolledBack(Exception):
    pass


def explain(queries: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    from django.db import connection, transaction

    results: dict[str, dict[str, float]] = {label: {} for label in queries}
    for variant, statements in VARIANTS.items():
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                for statement in statements:
                    cursor.execute(statement)
                cursor.execute("ANALYZE jobs_task")
                for label, sqls in queries.items():
                    total = 0.0
                    for sql in sqls:
                        best = None
                        for _ in range(3):
                            cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}")
                            plan = cursor.fetchone()[0][0]
                            ms = plan["Execution Time"] + plan["Planning Time"]
                            best = ms if best is None else min(best, ms)
                        total += best or 0.0
                    results[label][variant] = total
                raise RolledBack
        except RolledBack:
            pass
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default=os.environ.get("DATABASE_URL", ""))
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    if not args.database.startswith(("postgres://", "postgresql://")):
        sys.exit("Name a PostgreSQL database: --database postgres://...")
    os.environ.setdefault("ALLOWED_HOSTS", "testserver,localhost")
    from benchmarks.workers import empty, setup_django

    setup_django(args.database)
    from django.db import connection

    empty()
    with connection.cursor() as cursor:
        cursor.execute(FILL, [args.rows])
        cursor.execute("VACUUM ANALYZE jobs_task")
    queries = page_queries()
    results = explain(queries)
    names = list(VARIANTS)
    print(f"\n{args.rows:,} rows, ms per page, load {os.getloadavg()[0]:.1f}")
    print("| page (its jobs_task queries) | " + " | ".join(names) + " |")
    print("| --- |" + " ---: |" * len(names))
    for label, by in results.items():
        cells = " | ".join(f"{by[name]:,.1f}" for name in names)
        print(f"| {label} ({len(queries[label])}) | {cells} |")
    empty()


if __name__ == "__main__":
    main()
