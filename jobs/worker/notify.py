"""Instant wake-up: PostgreSQL LISTEN/NOTIFY; elsewhere the worker simply polls.

Tasks announce themselves from the database: a trigger (migration 0003) sends
``NOTIFY jobs_task_ready, '<queue>'`` when a row becomes claimable now, on insert or when
requeued, so every way of enqueueing (the ORM, bulk inserts, raw SQL) wakes idle workers, and
a transaction that rolls back wakes nobody. The worker listens on its own connection, apart
from the one it claims with, and reconnects after faults; polling is always the fallback.
"""

import contextlib
import logging
import time

from django.db import connections, router

from jobs import sql
from jobs.models import Task

logger = logging.getLogger(__name__)

CHANNEL = "jobs_task_ready"


def wake(queues, *, using: str):
    """NOTIFY idle workers that tasks of ``queues`` are due now, delivered when the caller's
    transaction commits; for changes the trigger does not see (it fires on a status change, not
    on a waiting task's ``run_after`` moved to now). Nothing where the database cannot listen."""
    connection = connections[using]
    dialect = sql.dialect(connection)
    if not dialect.LISTENS:
        return
    with connection.cursor() as cursor:
        for queue in sorted(queues):
            cursor.execute(dialect.NOTIFY_SQL, [CHANNEL, queue])


class Listener:
    """A LISTEN connection whose socket the worker's wait can watch; None where unsupported."""

    def __init__(self):
        self.alias = router.db_for_write(Task)
        self._connection = None
        self._retry_at = 0.0

    @property
    def connection(self):
        """The LISTEN connection now (a new object after a reconnect), or None."""
        return self._connection

    @property
    def connected(self) -> bool:
        return self._connection is not None and not self._connection.closed

    @property
    def supported(self) -> bool:
        return sql.dialect(self.alias).LISTENS

    def fileno(self):
        """Return the socket to wait on, connecting (again) if needed; None when unavailable."""
        if not self.supported:
            return None
        if self._connection is None or self._connection.closed:
            if time.monotonic() < self._retry_at:
                return None
            self._connect()
        return self._connection.fileno() if self._connection is not None else None

    def _connect(self):
        import psycopg  # optional: only a worker that listens (PostgreSQL) pays for its import

        params = connections[self.alias].get_connection_params()
        params.pop("cursor_factory", None)
        params.pop("context", None)
        try:
            self._connection = psycopg.connect(**params, autocommit=True)
            self._connection.execute(sql.dialect(self.alias).listen_sql(CHANNEL))
            logger.debug("listening channel=%s", CHANNEL)
        except psycopg.Error as exc:
            self._connection = None
            self._retry_at = time.monotonic() + 2.0
            logger.warning("listen failed, polling meanwhile error=%s", str(exc).strip())

    def drain(self) -> set[str]:
        """Return the queues announced since the last call (empty if none or on a fault)."""
        if self._connection is None:
            return set()
        import psycopg  # optional: see _connect

        try:
            return {n.payload for n in self._connection.notifies(timeout=0)}
        except psycopg.Error as exc:
            logger.warning("listen connection lost, reconnecting error=%s", str(exc).strip())
            self.close()
            return set()

    def close(self):
        if self._connection is not None:
            with contextlib.suppress(Exception):
                self._connection.close()
            self._connection = None
