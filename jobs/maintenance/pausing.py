"""Pausing and resuming queues, and task types.

A paused queue is a ``QueuePause`` row, a paused task type (a task's name as its rows carry it,
in whatever queue) a ``TaskPause`` row. The claim SQL (``jobs.worker.claiming``) skips both, so a
worker stops taking those tasks at its very next claim, whatever it was started with; tasks
already running finish normally, and waiting ones wait (pending, no attempt used). Workers also
log when a queue they serve, or a task type, is paused or resumed (``log_changes``,
``log_task_type_changes``), so an operator reading the logs knows why nothing runs.
"""

import logging

from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import Value
from django.utils import timezone

from jobs.models import QueuePause, Task, TaskPause
from jobs.tasks.discovery import discover_task_modules
from jobs.tasks.payload import MAX_QUEUE_LENGTH, check_name
from jobs.tasks.registry import registered_names

logger = logging.getLogger(__name__)

MAX_TASK_TYPE_LENGTH = 200  # TaskPause.name's max_length


def _queue(queue) -> str:
    """``queue`` if a pause row can hold it; else ``PayloadError``, before the database (a NUL
    is PostgreSQL's ``DataError``, a surrogate a ``UnicodeEncodeError``, ``5`` becomes ``'5'``).
    """
    return check_name(queue, "queue", MAX_QUEUE_LENGTH)


def _task_type(name) -> str:
    return check_name(name, "task type", MAX_TASK_TYPE_LENGTH)


def pause(queue: str, *, user=None, now=None) -> bool:
    """Pause ``queue``; return False when it was already paused."""
    queue = _queue(queue)
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
    queue = _queue(queue)
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


# Task types ---------------------------------------------------------------------------------


def task_type_known(name: str) -> bool:
    """Whether ``name`` is a task type: carried by a stored task, or declared in an app's tasks
    module (a name nothing knows is a typo, and pausing it would pause nothing).

    The apps' tasks modules are imported first if this process has not (a web process may not
    have), as a worker does; never a module the name itself would point to.
    """
    if Task.objects.filter(name=name).exists() or name in registered_names():
        return True
    discover_task_modules()
    return name in registered_names()


def pause_task_type(name: str, *, user=None, now=None) -> bool:
    """Pause the task type ``name``; return False when it was already paused."""
    name = _task_type(name)
    try:
        with transaction.atomic():
            TaskPause.objects.create(
                name=name, paused_at=now or timezone.now(), paused_by=user if user else None
            )
    except IntegrityError:
        return False  # already paused: the first pause keeps its time and author
    logger.info("task type paused name=%s by=%s", name, getattr(user, "username", "-"))
    return True


def resume_task_type(name: str, *, user=None) -> bool:
    """Resume the task type ``name``; return False when it was not paused."""
    name = _task_type(name)
    deleted, _ = TaskPause.objects.filter(name=name).delete()
    if deleted:
        logger.info("task type resumed name=%s by=%s", name, getattr(user, "username", "-"))
    return bool(deleted)


def paused_task_types() -> set[str]:
    """Return the names of every paused task type."""
    return set(TaskPause.objects.values_list("name", flat=True))


def paused_of(queues, names) -> tuple[set[str], set[str]]:
    """Return which of ``queues`` and which of the task types ``names`` are paused, in one
    query (a page of the task list asks for both)."""
    kinds: dict[str, set[str]] = {"queue": set(), "type": set()}
    queue_rows = (
        QueuePause.objects.filter(queue__in=sorted(queues)).order_by().annotate(kind=Value("queue"))
    )
    type_rows = (
        TaskPause.objects.filter(name__in=sorted(names)).order_by().annotate(kind=Value("type"))
    )
    rows = queue_rows.values_list("kind", "queue").union(type_rows.values_list("kind", "name"))
    for kind, value in rows:
        kinds[kind].add(value)
    return kinds["queue"], kinds["type"]


def log_task_type_changes(previous: frozenset, *, worker_id: str) -> frozenset:
    """Log the task types paused or resumed since ``previous``; return the paused set (as
    ``log_changes``: a database fault keeps ``previous``)."""
    try:
        current = frozenset(paused_task_types())
    except DatabaseError as exc:
        logger.debug("could not read paused task types worker_id=%s error=%s", worker_id, exc)
        return previous
    for name in sorted(current - previous):
        logger.info("task type paused, not claiming it name=%s worker_id=%s", name, worker_id)
    for name in sorted(previous - current):
        logger.info("task type resumed, claiming it again name=%s worker_id=%s", name, worker_id)
    return current
