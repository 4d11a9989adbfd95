"""All claim SQL: taking due tasks for a worker, one statement per batch.

The claim is the ``claim`` transition of ``jobs.states`` done atomically: pick due rows (highest
priority, then longest due), set them running, bump ``attempts``, stamp the worker, ``started_at``
and the lease. On PostgreSQL the pick is ``FOR UPDATE SKIP LOCKED``, so concurrent workers take
disjoint rows without waiting on each other. SQLite has no row locks; the whole UPDATE runs under
its single writer lock, which is as safe, and a busy database is waited for and retried.
"""

import logging
import random
import time
from datetime import timedelta

from django.db import OperationalError, connections, router
from django.utils import timezone

from jobs import states
from jobs.models import QueuePause, Task

logger = logging.getLogger(__name__)


def _claim_sql(connection, queue_count: int) -> str:
    table = connection.ops.quote_name(Task._meta.db_table)
    paused = connection.ops.quote_name(QueuePause._meta.db_table)
    sources = ", ".join(f"'{status}'" for status in sorted(states.CLAIM.sources))
    queue_filter = f"AND queue IN ({', '.join(['%s'] * queue_count)})" if queue_count else ""
    skip_locked = "FOR UPDATE SKIP LOCKED" if connection.vendor == "postgresql" else ""
    return f"""
        UPDATE {table}
        SET status = '{states.CLAIM.target}', attempts = attempts + 1, worker_id = %s,
            started_at = %s, updated_at = %s, lease_expires_at = %s
        WHERE id IN (
            SELECT id FROM {table}
            WHERE status IN ({sources}) AND run_after <= %s {queue_filter}
                AND queue NOT IN (SELECT queue FROM {paused})
            ORDER BY priority DESC, run_after
            LIMIT %s
            {skip_locked}
        ) AND status IN ({sources})
        RETURNING id
    """


def claim(worker_id: str, limit: int, *, queues=None, lease_seconds: float, now=None) -> list:
    """Claim up to ``limit`` due tasks for ``worker_id``; return them, highest priority first."""
    if limit <= 0:
        return []
    now = now or timezone.now()
    using = router.db_for_write(Task)
    connection = connections[using]
    queues = sorted(set(queues or ()))
    adapt = connection.ops.adapt_datetimefield_value
    lease_expires_at = now + timedelta(seconds=lease_seconds)
    params = [worker_id, adapt(now), adapt(now), adapt(lease_expires_at), adapt(now), *queues]
    params.append(limit)
    sql = _claim_sql(connection, len(queues))
    ids = _execute_with_retry(connection, sql, params)
    if not ids:
        return []
    tasks = list(Task.objects.using(using).filter(pk__in=ids))
    tasks.sort(key=lambda task: (-task.priority, task.run_after))
    return tasks


def _execute_with_retry(connection, sql, params, deadline_seconds=30.0):
    """Run the claim, waiting out SQLite's "database is locked" instead of failing on it."""
    deadline = time.monotonic() + deadline_seconds
    pause = 0.005
    while True:
        try:
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                return [row[0] for row in cursor.fetchall()]
        except OperationalError as exc:
            locked = connection.vendor == "sqlite" and "locked" in str(exc)
            if not locked or time.monotonic() > deadline:
                raise
            logger.debug("claim waiting for a busy database pause=%.3f", pause)
            time.sleep(pause * (1 + random.random()))
            pause = min(pause * 2, 0.2)
