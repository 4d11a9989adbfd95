"""Instant wake-up: PostgreSQL LISTEN/NOTIFY; elsewhere the worker simply polls.

Tasks announce themselves from the database: a trigger (migration 0003) sends
``NOTIFY jobs_task_ready, '<queue>'`` when a row becomes claimable now, on insert or when
requeued, so every way of enqueueing (the ORM, bulk inserts, raw SQL) wakes idle workers, and
a transaction that rolls back wakes nobody. The worker listens on its own connection, apart
from the one it claims with, and reconnects after faults; polling is always the fallback.

LISTEN needs a session of its own on the server. Through a pooler in transaction mode (PgBouncer,
as most production PostgreSQL is reached) the session that ran LISTEN goes back to the pool
after the statement, and its notifications reach nobody. So the listener proves its path once:
it listens on a channel of its own, sends itself a NOTIFY over the task table's connection (the
way the trigger's notifications travel) and waits for it. If it never arrives the worker polls,
and says why; ``JOBS_LISTEN_DATABASE`` names a direct connection to listen on instead.
"""

import contextlib
import logging
import secrets
import time

from django.db import connections, router

from jobs import sql
from jobs.conf import jobs_settings
from jobs.models import Task

logger = logging.getLogger(__name__)

CHANNEL = "jobs_task_ready"
# How long the listener waits for its own probe. A direct connection answers in milliseconds;
# this is spent in full only where notifications cannot arrive.
PROBE_SECONDS = 5.0


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

    wakes_all = True  # one NOTIFY reaches every idle worker (jobs.worker.claimer.notified)

    def __init__(self):
        self.task_alias = router.db_for_write(Task)
        self.alias = jobs_settings.LISTEN_DATABASE or self.task_alias
        self._connection = None
        self._retry_at = 0.0
        self._proven = False  # a probe came back once: later reconnects take the same path
        self.unreachable = False  # the probe never came back: poll for good
        self._pending: set[str] = set()  # queues announced while the probe was awaited

    @property
    def connection(self):
        """The LISTEN connection now (a new object after a reconnect), or None."""
        return self._connection

    @property
    def connected(self) -> bool:
        return self._connection is not None and not self._connection.closed

    @property
    def supported(self) -> bool:
        """Whether the worker listens (on PostgreSQL, unless its notifications cannot arrive)."""
        return sql.dialect(self.alias).LISTENS and not self.unreachable

    @property
    def keeps_sessions(self) -> bool:
        """Whether the task database's connections are proven to keep a session of their own:
        the probe came back on a connection made as theirs are (no ``JOBS_LISTEN_DATABASE``),
        so no pooler in transaction mode stands between, and named prepared statements are
        safe on them (``jobs.worker.claimer``)."""
        return self._proven and self.alias == self.task_alias

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
            if not self._proven and not self._probe():
                self.unreachable = True
                self.close()
                logger.warning(
                    "listen off, polling instead: a NOTIFY sent on the task database never "
                    "reached the LISTEN connection (a pooler in transaction mode, such as "
                    "PgBouncer, between them?) alias=%s poll_interval=%s "
                    "hint=set_JOBS_LISTEN_DATABASE_to_a_direct_connection",
                    self.alias,
                    jobs_settings.POLL_INTERVAL,
                )
                return
            logger.debug("listening channel=%s alias=%s", CHANNEL, self.alias)
        # psycopg's errors; for the probe's NOTIFY, the task database's (Django's) too.
        except Exception as exc:
            self.close()
            self._retry_at = time.monotonic() + 2.0
            logger.warning("listen failed, polling meanwhile error=%s", str(exc).strip())

    def _probe(self) -> bool:
        """Send a NOTIFY over the task table's connection; say whether it reached this one."""
        channel = f"jobs_listen_probe_{secrets.token_hex(6)}"
        token = secrets.token_hex(8)
        dialect = sql.dialect(self.alias)
        assert self._connection is not None
        self._connection.execute(dialect.listen_sql(channel))
        with connections[self.task_alias].cursor() as cursor:
            cursor.execute(dialect.NOTIFY_SQL, [channel, token])
        deadline = time.monotonic() + PROBE_SECONDS
        arrived = False
        while not arrived and (left := deadline - time.monotonic()) > 0:
            # The generator holds the connection's lock until it is closed: run nothing else
            # on the connection inside the loop.
            notices = self._connection.notifies(timeout=left, stop_after=1)
            try:
                for notice in notices:
                    if notice.channel == channel and notice.payload == token:
                        arrived = True
                    elif notice.channel == CHANNEL:
                        self._pending.add(notice.payload)
            finally:
                notices.close()
        if arrived:
            self._connection.execute(dialect.unlisten_sql(channel))
            self._proven = True
        return arrived

    def drain(self) -> set[str]:
        """Return the queues announced since the last call (empty if none or on a fault)."""
        pending, self._pending = self._pending, set()
        if self._connection is None:
            return pending
        import psycopg  # optional: see _connect

        try:
            return pending | {n.payload for n in self._connection.notifies(timeout=0)}
        except psycopg.Error as exc:
            logger.warning("listen connection lost, reconnecting error=%s", str(exc).strip())
            self.close()
            return set()

    def close(self):
        if self._connection is not None:
            with contextlib.suppress(Exception):
                self._connection.close()
            self._connection = None
