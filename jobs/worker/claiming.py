"""All claim SQL: taking due tasks for a worker, one statement per batch.

The claim is the ``claim`` transition of ``jobs.states`` done atomically: pick due rows (highest
priority, then longest due), set them running, bump ``attempts``, stamp the worker, ``started_at``
and the lease. On PostgreSQL the pick is ``FOR UPDATE SKIP LOCKED``, so concurrent workers take
disjoint rows without waiting on each other. SQLite has no row locks; the whole UPDATE runs under
its single writer lock, which is as safe, and a busy database is waited for and retried.
"""

import logging
import uuid
from datetime import timedelta

from django.db import DatabaseError, connections, router, transaction
from django.db.models import JSONField
from django.utils import timezone

from jobs import states, transitions
from jobs.db import is_connection_fault, savepoint_in_transaction
from jobs.db import wait_while_locked as _with_retry
from jobs.models import QueuePause, Task
from jobs.worker.wire import Claimed

logger = logging.getLogger(__name__)


def _claim_sql(connection, queue_count: int, returning: str = "task.*", recorded="") -> str:
    """The claim statement; parameters: now, *queues, limit, worker_id, now, now, lease end.

    On PostgreSQL the pick is a MATERIALIZED CTE: as a plain ``IN (subquery)`` the planner may
    run the ``SKIP LOCKED`` subquery more than once and claim more rows than ``LIMIT``. One queue
    is compared with ``=``, which the per-queue claim index serves in order; with ``IN`` and
    statistics that lag behind a burst of enqueues, PostgreSQL was seen to sort every waiting
    row of the queue instead (10 ms for 20,000 rows, at each claim).
    """
    table = connection.ops.quote_name(Task._meta.db_table)
    paused = connection.ops.quote_name(QueuePause._meta.db_table)
    sources = ", ".join(f"'{status}'" for status in sorted(states.CLAIM.sources))
    queue_filter = ""
    if queue_count == 1:
        queue_filter = "AND queue = %s"
    elif queue_count:
        queue_filter = f"AND queue IN ({', '.join(['%s'] * queue_count)})"
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
        picked = f"picked AS MATERIALIZED ({pick} FOR UPDATE SKIP LOCKED)"
        update = f"""
            UPDATE {table} AS task SET {assignments}
            FROM picked WHERE task.id = picked.id
            RETURNING {returning}
        """
        if returning != DISPATCH:
            return f"WITH {picked} {update}"
        # For a worker: the claimed rows in claim order (sorted here, not in Python), then, if
        # ``recorded`` (an UPDATE returning ids, whose parameters come first) runs beside the
        # claim, the ids it recorded, with NULLs.
        with_recorded = f"recorded AS ({recorded})," if recorded else ""
        also_recorded = (
            "UNION ALL SELECT 1, id, NULL, NULL, NULL, NULL, NULL, NULL FROM recorded"
            if recorded
            else ""
        )
        return f"""
            WITH {with_recorded} {picked}, claimed AS ({update})
            SELECT id, attempts, name, backend, row FROM (
                SELECT 0 AS kind, id, attempts, name, backend, row, priority, run_after
                FROM claimed {also_recorded}
            ) AS out ORDER BY kind, priority DESC, run_after
        """
    if returning == DISPATCH:
        # For a worker: each row as JSON (json_object), as row_to_json gives it on PostgreSQL;
        # SQLite cannot sort what an UPDATE returns, so the sort keys come too.
        pairs = ", ".join(
            f"'{field.attname}', "
            + (f"json({field.column})" if isinstance(field, JSONField) else field.column)
            for field in Task._meta.concrete_fields
        )
        returning = f"id, attempts, name, backend, priority, run_after, json_object({pairs})"
    else:
        returning = "*"
    # SQLite runs the whole statement under its single writer lock: nothing to skip.
    return f"""
        WITH picked AS ({pick})
        UPDATE {table} SET {assignments}
        WHERE id IN (SELECT id FROM picked) AND status IN ({sources})
        RETURNING {returning}
    """


def claim(worker_id: str, limit: int, *, queues=None, lease_seconds: float, now=None) -> list:
    """Claim up to ``limit`` due tasks for ``worker_id``; return them, highest priority first."""
    if limit <= 0:
        return []
    using = router.db_for_write(Task)
    connection = connections[using]
    sql, params = _prepare(connection, worker_id, limit, queues, lease_seconds, now)
    # One round trip: the claimed rows come back whole, through the model's converters.
    run = lambda: list(Task.objects.using(using).raw(sql, params))  # noqa: E731
    tasks = _with_retry(connection, run)
    tasks.sort(key=lambda task: (-task.priority, task.run_after))
    return tasks


# What a worker's claim returns of each row on PostgreSQL (see ``_claim_sql``).
DISPATCH = (
    "task.id, task.attempts, task.name, task.backend, task.priority, task.run_after, "
    "row_to_json(task)::text AS row"
)


def claim_and_record(
    worker_id: str, limit: int, successes, *, queues=None, lease_seconds: float, now=None
) -> tuple[list[Claimed], set]:
    """Record reported ``successes`` and claim up to ``limit`` tasks, all or nothing.

    Returns the claimed tasks, highest priority first, each row as the JSON a child gets (no
    model instance: ``row_to_json`` on PostgreSQL, ``json_object`` on SQLite), and the ids of
    the successes recorded.
    On PostgreSQL it is one statement (the successes' UPDATE runs as a CTE beside the claim's):
    one round trip and one commit for both; a fault leaves both undone, to be tried again, so a
    success is never recorded twice nor lost. Elsewhere, two statements in one transaction.
    A success whose row the database refuses fails alone (``transitions.succeed_many``); the
    other successes are recorded and the claim made all the same.
    """
    using = router.db_for_write(Task)
    connection = connections[using]
    if connection.vendor != "postgresql":
        sql, params = _prepare(
            connection, worker_id, limit, queues, lease_seconds, now, returning=DISPATCH
        )

        def claim_rows():
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                return cursor.fetchall()

        with transaction.atomic(using=using):
            recorded = transitions.succeed_many(successes, now=now) if successes else set()
            rows = _with_retry(connection, claim_rows) if limit > 0 else []
        # Highest priority first, then longest due (run_after as stored sorts as it reads).
        rows.sort(key=lambda row: (-row[4], row[5]))
        claimed = [
            Claimed(uuid.UUID(task_id), attempts, worker_id, name, backend, text.encode())
            for task_id, attempts, name, backend, _, _, text in rows
        ]
        return claimed, recorded
    if limit <= 0:
        return [], transitions.succeed_many(successes, now=now) if successes else set()
    recording, recorded_sql, params = [], "", []
    if successes:
        (recorded_sql, params), *more = transitions.succeed_many_statements(successes, now=now)
        assert not more, "succeed_many_statements makes one statement on PostgreSQL"
        recording = successes
    claim_sql, claim_params = _prepare(
        connection, worker_id, limit, queues, lease_seconds, now,
        returning=DISPATCH, recorded=recorded_sql,
    )  # fmt: skip
    params = [*params, *claim_params]

    def run():
        # In a caller's transaction, a savepoint: a refused statement would abort it whole.
        with savepoint_in_transaction(using), connection.cursor() as cursor:
            cursor.execute(claim_sql, params)
            return cursor.fetchall()

    try:
        rows = _with_retry(connection, run)
    except DatabaseError as exc:
        if is_connection_fault(exc) or not recording:
            raise
        # A success's row was refused (its result, a trigger): the statement did nothing. The
        # successes go apart, where the refused one is isolated and failed, then the claim.
        logger.warning("recording with the claim refused, recording apart count=%d", len(recording))
        recorded = transitions.succeed_many(successes, now=now)
        claimed, _ = claim_and_record(
            worker_id, limit, [], queues=queues, lease_seconds=lease_seconds, now=now
        )
        return claimed, recorded
    claimed = [
        Claimed(task_id, attempts, worker_id, name, backend, text.encode())
        for task_id, attempts, name, backend, text in rows
        if attempts is not None
    ]
    recorded_ids = [row[0] for row in rows if row[1] is None]
    return claimed, transitions.succeeded(recording, recorded_ids) if recording else set()


def _prepare(
    connection, worker_id, limit, queues, lease_seconds, now, returning="task.*", recorded=""
):
    now = now or timezone.now()
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
    return _claim_sql(connection, len(queues), returning, recorded), params


def next_due_at(*, queues=None):
    """When the earliest waiting task becomes due (None if nothing waits): when to look next."""
    waiting = Task.objects.claimable()
    if queues:
        waiting = waiting.filter(queue__in=sorted(set(queues)))
    return waiting.order_by("run_after").values_list("run_after", flat=True).first()
