"""Claiming: taking due tasks for a worker, one statement per batch (its SQL is in ``jobs.sql``).

The claim is the ``claim`` transition of ``jobs.states`` done atomically: pick due rows (highest
priority, then longest due), set them running, bump ``attempts``, stamp the worker, ``started_at``
and the lease. On PostgreSQL the pick is ``FOR UPDATE SKIP LOCKED``, so concurrent workers take
disjoint rows without waiting on each other. SQLite has no row locks; the whole UPDATE runs under
its single writer lock, which is as safe, and a busy database is waited for and retried.
"""

import logging
from datetime import timedelta

from django.db import DatabaseError, connections, router, transaction
from django.utils import timezone

from jobs import sql, transitions
from jobs.db import is_connection_fault, savepoint_in_transaction, wait_while_locked
from jobs.models import Task
from jobs.worker.wire import Claimed

logger = logging.getLogger(__name__)


def claim_and_record(
    worker_id: str, limit: int, successes, *, queues=None, lease_seconds: float, now=None
) -> tuple[list[Claimed], set]:
    """Record reported ``successes`` and claim up to ``limit`` tasks, all or nothing.

    Returns the claimed tasks, highest priority first, each row as the JSON a child gets (no
    model instance: ``row_to_json`` on PostgreSQL, ``json_object`` on SQLite), and the ids of
    the successes recorded.
    Where the database can (``RECORDS_WITH_CLAIM``: PostgreSQL) it is one statement (the
    successes' UPDATE runs as a CTE beside the claim's): one round trip and one commit for both;
    a fault leaves both undone, to be tried again, so a success is never recorded twice nor
    lost. Elsewhere, two statements in one transaction.
    A success whose row the database refuses fails alone (``transitions.succeed_many``); the
    other successes are recorded and the claim made all the same.
    """
    using = router.db_for_write(Task)
    connection = connections[using]
    statements = sql.dialect(connection)
    now = now or timezone.now()
    values = {
        "now": now,
        "queues": sorted(set(queues or ())),
        "limit": limit,
        "worker_id": worker_id,
        "lease_expires_at": now + timedelta(seconds=lease_seconds),
    }

    if not statements.RECORDS_WITH_CLAIM:

        def claim_in_transaction():
            with connection.cursor() as cursor:
                return statements.claim_tasks(cursor, connection, **values)

        with transaction.atomic(using=using):
            recorded = transitions.succeed_many(successes, now=now) if successes else set()
            rows = wait_while_locked(statements, claim_in_transaction) if limit > 0 else []
        return _claimed(rows, worker_id), recorded

    def claim_rows():
        # In a caller's transaction, a savepoint: a refused statement would abort it whole.
        with savepoint_in_transaction(using), connection.cursor() as cursor:
            return statements.claim_tasks(cursor, connection, **values)

    if limit <= 0:
        return [], transitions.succeed_many(successes, now=now) if successes else set()
    if not successes:
        return _claimed(wait_while_locked(statements, claim_rows), worker_id), set()
    recording = transitions.success_rows(successes)

    def run():
        with savepoint_in_transaction(using), connection.cursor() as cursor:
            return statements.record_and_claim_tasks(cursor, connection, recording, **values)

    try:
        rows, recorded_ids = wait_while_locked(statements, run)
    except DatabaseError as exc:
        if is_connection_fault(exc):
            raise
        # A success's row was refused (its result, a trigger): the statement did nothing. The
        # successes go apart, where the refused one is isolated and failed, then the claim.
        logger.warning("recording with the claim refused, recording apart count=%d", len(recording))
        recorded = transitions.succeed_many(successes, now=now)
        return _claimed(wait_while_locked(statements, claim_rows), worker_id), recorded
    return _claimed(rows, worker_id), transitions.succeeded(successes, recorded_ids)


def _claimed(rows, worker_id: str) -> list[Claimed]:
    return [
        Claimed(task_id, attempts, worker_id, name, backend, text.encode())
        for task_id, attempts, name, backend, text in rows
    ]


def next_due_at(*, queues=None):
    """When the earliest waiting task becomes due (None if nothing waits): when to look next."""
    waiting = Task.objects.claimable()
    if queues:
        waiting = waiting.filter(queue__in=sorted(set(queues)))
    return waiting.order_by("run_after").values_list("run_after", flat=True).first()
