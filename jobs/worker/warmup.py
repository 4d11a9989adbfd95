"""Warm, in the supervisor and before it forks, the code its children run for every task.

A forked child shares the supervisor's memory until it writes to a page. On CPython 3.11 the
first calls of a function write to its code object (warm-up counter, then the specialised
bytecode), and first uses fill lazy caches (a model's field maps, psycopg's adapters, logging's
level cache): done in each child after the fork, every such write copies a page into that child.
Done once here, before the fork, those pages stay shared: on the benchmark a child's first task
copies 2.6 MiB instead of 4.4 (reference counts, written whatever we do, are most of the rest).
Nothing here runs task code, sends a signal or writes a log line: it decodes a made-up
task row, resolves a registered task, executes a stand-in that does nothing, formats (without
emitting) the executor's log lines, and opens the database connection the children will open.
"""

import json
import logging
import time
import uuid

from django.db import DatabaseError, connections, router, transaction
from django.utils import timezone

from jobs import signals
from jobs.execution import executor
from jobs.models import Task
from jobs.tasks import registry
from jobs.tasks.retry import Backoff
from jobs.worker import wire

logger = logging.getLogger(__name__)

ROUNDS = 16  # CPython 3.11 specialises a function's bytecode after 8 calls


def warm_children_path(rounds: int = ROUNDS):
    """Run the framework's per-task code ``rounds`` times; never raise (it only saves memory)."""
    try:
        _warm(rounds)
    except Exception as exc:
        # Only memory is at stake (children start cold): say so, and start the worker anyway.
        logger.warning("warm-up failed, children start cold error=%r", exc, exc_info=True)
    finally:
        # A connection must not cross a fork; the supervisor reopens its own when it needs one.
        connections.close_all()


def _warm(rounds: int):
    using = router.db_for_write(Task)
    names = registry.registered_names()
    message = wire.encode_task(_made_up_task(Task, names[0] if names else "jobs.worker.warmup"))
    executor_logger = logging.getLogger(executor.__name__)
    connected = _connect(using)
    for _ in range(rounds):
        task = wire.task_from_values(json.loads(message))
        try:
            runnable = executor.resolve(task)
        except Exception:
            runnable = None
        # The stand-in never fails, so its backoff is never asked for a delay.
        backoff = runnable.backoff if runnable is not None else Backoff()
        stand_in = executor.Runnable(call=lambda task: None, backoff=backoff)
        outcome = executor.execute(task, stand_in)
        signals.has_listeners(outcome.kind)
        if connected:
            transaction.on_commit(lambda: None, using=using)  # as task_started is sent
        _format_log_line(executor_logger, task)
        json.dumps({"task": str(task.pk), "outcome": outcome.kind, "finished_at": time.time()})


def _connect(using: str) -> bool:
    """Open the connection as a child's first task does (psycopg's adapters, Django's state)."""
    try:
        connections[using].ensure_connection()
    except DatabaseError as exc:
        # The worker reports and rides out database faults itself, right after this.
        logger.debug("warm-up without the database error=%r", exc)
        return False
    return True


def _made_up_task(model, name: str):
    now = timezone.now()
    return model(
        id=uuid.uuid4(),
        name=name,
        payload={"args": [], "kwargs": {}},
        attempts=1,
        max_attempts=1,
        created_at=now,
        updated_at=now,
        run_after=now,
        started_at=now,
    )


def _format_log_line(task_logger: logging.Logger, task):
    """Format, without emitting, a line as the executor logs one, through every handler.

    It pays: a child's first log line then copies about 140 KiB less (docs/performance.md,
    "Shortcuts into Django's internals"). The walk mirrors ``Logger.callHandlers``;
    tests/db/test_django_shortcuts.py checks it reaches the handlers a real line reaches.
    """
    if not task_logger.isEnabledFor(logging.INFO):
        return
    record = task_logger.makeRecord(
        task_logger.name, logging.INFO, __file__, 0, "task started name=%s id=%s", (task.name,
        task.pk), None)  # fmt: skip
    current: logging.Logger | None = task_logger
    while current:
        for handler in current.handlers:
            if record.levelno >= handler.level:
                handler.format(record)
        current = current.parent if current.propagate else None
