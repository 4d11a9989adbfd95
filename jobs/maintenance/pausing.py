"""Pausing and resuming queues.

A paused queue is a ``QueuePause`` row. The claim SQL (``jobs.worker.claiming``) skips queues that
have one, so a worker stops taking tasks from a paused queue at its very next claim, whatever it was
started with; tasks already running finish normally. Workers also log when a queue they serve is
paused or resumed (``log_changes``), so an operator reading the logs knows why nothing runs.
"""

import logging

from django.db import DatabaseError, IntegrityError, transaction
from django.utils import timezone

from jobs.models import QueuePause

logger = logging.getLogger(__name__)


def pause(queue: str, *, user=None, now=None) -> bool:
    """Pause ``queue``; return False when it was already paused."""
    try:
        with transaction.atomic():
            QueuePause.objects.create(
                queue=queue, paused_at=now or timezone.now(), paused_by=user if user else None
            )
    except IntegrityError:
        return False  # already paused: the first pause keeps its time and author
    logger.info("queue paused queue=%s by=%s", queue, getattr(user, "username", "-"))
    return True


def resume(queue: str, *, user=None) -> bool:
    """Resume ``queue``; return False when it was not paused."""
    deleted, _ = QueuePause.objects.filter(queue=queue).delete()
    if deleted:
        logger.info("queue resumed queue=%s by=%s", queue, getattr(user, "username", "-"))
    return bool(deleted)


def paused_queues() -> set[str]:
    """Return the names of every paused queue."""
    return set(QueuePause.objects.values_list("queue", flat=True))


def pauses() -> list[QueuePause]:
    """Return every pause, by queue name, with who paused it (for the health check's notices)."""
    return list(QueuePause.objects.select_related("paused_by").order_by("queue"))


def paused_among(queues) -> set[str]:
    """Return which of ``queues`` are paused; with no queues (a worker serving all), all paused."""
    rows = QueuePause.objects.all()
    if queues:
        rows = rows.filter(queue__in=list(queues))
    return set(rows.values_list("queue", flat=True))


def log_changes(previous: frozenset, queues, *, worker_id: str) -> frozenset:
    """Log the queues of a worker paused or resumed since ``previous``; return the paused set.

    Called from the worker loop: a database fault here only delays the log line (the claim skips
    paused queues on its own), so it is logged at debug level and ``previous`` is kept.
    """
    try:
        current = frozenset(paused_among(queues))
    except DatabaseError as exc:
        logger.debug("could not read paused queues worker_id=%s error=%s", worker_id, exc)
        return previous
    for queue in sorted(current - previous):
        logger.info("queue paused, not claiming from it queue=%s worker_id=%s", queue, worker_id)
    for queue in sorted(previous - current):
        logger.info("queue resumed, claiming again queue=%s worker_id=%s", queue, worker_id)
    return current
