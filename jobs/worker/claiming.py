"""Claiming: taking due tasks for a worker, one statement per batch (its SQL is in ``jobs.sql``).

The claim is the ``claim`` transition of ``jobs.states`` done atomically: pick due rows (highest
priority, then longest due), set them running, bump ``attempts``, stamp the worker, ``started_at``
and the lease. On PostgreSQL the pick is ``FOR UPDATE SKIP LOCKED``, so concurrent workers take
disjoint rows without waiting on each other. SQLite has no row locks; the whole UPDATE runs under
its single writer lock, which is as safe, and a busy database is waited for and retried.
"""

from datetime import UTC, datetime, timedelta

from django.db import connections, router, transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from jobs import sql, transitions
from jobs.db import savepoint_in_transaction, wait_while_locked
from jobs.models import RateWindow, Task
from jobs.worker.wire import Claimed


def claim_and_record(
    worker_id: str,
    limit: int,
    successes,
    *,
    queues=None,
    groups=None,
    lease_seconds: float,
    now=None,
    prepare: bool = False,
) -> tuple[list[Claimed], set]:
    """Record reported ``successes`` and claim up to ``limit`` tasks, all or nothing.

    Returns the claimed tasks, highest priority first, each row as the JSON a child gets (no
    model instance: ``row_to_json`` on PostgreSQL, ``json_object`` on SQLite), and the ids of
    the successes recorded.
    The successes are recorded and the claim made in one transaction (two statements, one
    commit): a fault leaves both undone, to be tried again, so a success is never recorded twice
    nor lost. A success whose row the database refuses fails alone
    (``transitions.succeed_many``); the other successes are recorded and the claim made all the
    same.

    ``groups`` (instead of ``queues``): a worker with per-queue caps (``jobs.worker.queue_caps``)
    claims each group of queues in turn, ``(queues, room)``, at most ``room`` tasks of it (None:
    no room of its own), until ``limit`` are claimed; one statement per group, all in the one
    transaction. A capped queue is claimed alone, so its tasks come back knowing their queue.

    ``prepare``: the connection keeps its session, so the claim may be a prepared statement
    even where the database OPTIONS set no ``prepare_threshold`` (``jobs.sql`` ``claim_cursor``).
    """
    using = router.db_for_write(Task)
    connection = connections[using]
    statements = sql.dialect(connection)
    if groups is None:
        groups = [(sorted(set(queues or ())), None)]

    def claim_groups(alone: bool) -> list[Claimed]:
        claimed: list[Claimed] = []
        for group, room in groups:
            wanted = limit - len(claimed) if room is None else min(room, limit - len(claimed))
            if wanted <= 0:
                continue

            def claim_rows(group=group, wanted=wanted):
                # Stamped once the claim may write (``claim_lock``): a stamp taken before a
                # wait for SQLite's writer would date the start before a success this claim
                # waited for, so that a dependent seemed to start before what it waited for.
                moment = now or timezone.now()
                values = {
                    "now": moment,
                    "queues": sorted(set(group)),
                    "limit": wanted,
                    "worker_id": worker_id,
                    "lease_expires_at": moment + timedelta(seconds=lease_seconds),
                }
                with statements.claim_cursor(connection, prepare=prepare) as cursor:
                    return statements.claim_tasks(cursor, connection, **values)

            def claim_alone(claim_rows=claim_rows):
                # In a caller's transaction, a savepoint: a refused statement would abort it.
                with savepoint_in_transaction(using), statements.claim_lock(connection):
                    return claim_rows()

            rows = wait_while_locked(statements, claim_alone if alone else claim_rows)
            claimed += _claimed(rows, worker_id, group[0] if len(group) == 1 else "")
        return claimed

    if not successes:  # the claim alone, in autocommit: no BEGIN and COMMIT around it
        return claim_groups(alone=True), set()
    # One transaction, so one commit: the claim needs no savepoint of its own, as its failure
    # is to undo the recording too.
    with transaction.atomic(using=using):
        # The recording writes first: SQLite's write lock is held by the time the claim stamps.
        recorded = transitions.succeed_many(successes, now=now)
        claimed = claim_groups(alone=False)
    return claimed, recorded


def _claimed(rows, worker_id: str, queue: str) -> list[Claimed]:
    return [
        Claimed(task_id, attempts, worker_id, name, backend, text.encode(), queue, waited_for)
        for task_id, attempts, name, backend, text, waited_for in rows
    ]


def next_due_at(*, queues=None, now=None):
    """When the earliest waiting task becomes due (None if nothing waits): when to look next.

    A task with a rate key that is due already waits for its key's window instead
    (``next_window_at``), so it does not hide a later task due before that.
    """
    now = now or timezone.now()
    waiting = Task.objects.claimable().filter(Q(rate_key__isnull=True) | Q(run_after__gt=now))
    if queues:
        waiting = waiting.filter(queue__in=sorted(set(queues)))
    return waiting.order_by("run_after").values_list("run_after", flat=True).first()


def next_window_at(*, queues=None, now=None):
    """When the earliest full rate window that holds back a due task ends (None if none does):
    the moment its next task may start, so that a worker wakes for it."""
    now = now or timezone.now()
    held = Task.objects.due(now).filter(rate_key=OuterRef("key"))
    if queues:
        held = held.filter(queue__in=sorted(set(queues)))
    opens = (
        RateWindow.objects.filter(started__gte=F("rate_limit"))
        .annotate(opens=F("window_start") + F("period"))
        .filter(opens__gt=now.timestamp())
        .filter(Exists(held))
        .order_by("opens")
        .values_list("opens", flat=True)
        .first()
    )
    return None if opens is None else datetime.fromtimestamp(opens, tz=UTC)
