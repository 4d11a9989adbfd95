"""Database helpers shared by the worker side: surviving faults while recording outcomes."""

import logging
import random
import time

from django.db import InterfaceError, OperationalError, connections, router

from jobs.conf import jobs_settings

logger = logging.getLogger(__name__)


def retry_on_database_error(
    operation, *, what: str, model=None, deadline_seconds=None, on_fault=None
):
    """Run ``operation()``; on a database fault, reconnect and try again until a deadline.

    For bookkeeping writes that must not be lost: a finished task's outcome is retried through a
    server restart or a dropped connection instead of leaving the task ``running``.
    """
    if deadline_seconds is None:
        deadline_seconds = jobs_settings.DATABASE_RETRY_SECONDS
    deadline = time.monotonic() + deadline_seconds
    pause = 0.05
    while True:
        try:
            return operation()
        except (OperationalError, InterfaceError) as exc:
            if time.monotonic() > deadline:
                raise
            logger.warning(
                "database fault, retrying what=%s error=%r pause=%.2f",
                what,
                str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
                pause,
            )
            _drop_broken_connection(model)
            if on_fault is not None:
                on_fault()
            time.sleep(pause * (1 + random.random()))
            pause = min(pause * 2, 2.0)


def _drop_broken_connection(model):
    alias = router.db_for_write(model) if model is not None else "default"
    connection = connections[alias]
    if connection.in_atomic_block:
        return  # the caller's transaction owns the connection; it decides
    if connection.connection is not None and not connection.is_usable():
        connection.close()
