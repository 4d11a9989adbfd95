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
    """The claim statement; parameters: now, *queues, limit, worker_id, now, now, lease end.

    On PostgreSQL the pick is a MATERIALIZED CTE: as a plain ``IN (subquery)`` the planner may
    run the ``SKIP LOCKED`` subquery more than once and claim more rows than ``LIMIT``.
    """
    table = connection.ops.quote_name(Task._meta.db_table)
    paused = connection.ops.quote_name(QueuePause._meta.db_table)
    sources = ", ".join(f"'{status}'" for status in sorted(states.CLAIM.sources))
    queue_filter = f"AND queue IN ({', '.join(['%s'] * queue_count)})" if queue_count else ""
    pick = f"""
        SELECT id FROM {table}
        WHERE status IN ({sources}) AND run_after <= %s {queue_filter}
            AND queue NOT IN (SELECT queue FROM {paused})
        ORDER BY priority DESC, run_after
        LIMIT %s
    """
    assignments = f"""
        status = '{states.CLAIM.target}', attempts = attempts + 1, worker_id = %s,
        started_at = %s, updated_at = %s, lease_expires_at = %s
    """
    if connection.vendor == "postgresql":
        return f"""
            WITH picked AS MATERIALIZED ({pick} FOR UPDATE SKIP LOCKED)
            UPDATE {table} AS task SET {assignments}
            FROM picked WHERE task.id = picked.id
            RETURNING task.*
        """
    # SQLite runs the whole statement under its single writer lock: nothing to skip.
    return f"""
        WITH picked AS ({pick})
        UPDATE {table} SET {assignments}
        WHERE id IN (SELECT id FROM picked) AND status IN ({sources})
        RETURNING *
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
    params = [
        adapt(now),
        *queues,
        limit,
        worker_id,
        adapt(now),
        adapt(now),
        adapt(lease_expires_at),
    ]
    sql = _claim_sql(connection, len(queues))
    # One round trip: the claimed rows come back whole, through the model's converters.
    tasks = _execute_with_retry(connection, sql, params, using=using)
    tasks.sort(key=lambda task: (-task.priority, task.run_after))
    return tasks


def next_due_at(*, queues=None):
    """When the earliest waiting task becomes due (None if nothing waits): when to look next."""
    waiting = Task.objects.claimable()
    if queues:
        waiting = waiting.filter(queue__in=sorted(set(queues)))
    return waiting.order_by("run_after").values_list("run_after", flat=True).first()


def _execute_with_retry(connection, sql, params, using, deadline_seconds=30.0):
    """Run the claim, waiting out SQLite's "database is locked" instead of failing on it."""
    deadline = time.monotonic() + deadline_seconds
    pause = 0.005
    while True:
        try:
            return list(Task.objects.using(using).raw(sql, params))
        except OperationalError as exc:
            locked = connection.vendor == "sqlite" and "locked" in str(exc)
            if not locked or time.monotonic() > deadline:
                raise
            logger.debug("claim waiting for a busy database pause=%.3f", pause)
            time.sleep(pause * (1 + random.random()))
            pause = min(pause * 2, 0.2)
