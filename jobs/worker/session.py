"""Proof of life across hosts: a PostgreSQL session holding an advisory lock (issue 16).

A pid proves death on one host only (``jobs.worker.liveness``). Across hosts the database's own
sessions do, as GoodJob's processes do: each worker holds a session-level advisory lock on a
random 63-bit key, on a direct connection of its own, and writes the key on its Worker row once
the lock is held. PostgreSQL releases the lock the moment the session ends: the process
killed, its host gone, its connection cut. A peer that sees a worker's key free in ``pg_locks``
twice, ``FREE_CONFIRM_SECONDS`` apart, with the row's key and heartbeat unchanged, rescues its
tasks at once (``jobs.worker.liveness.PeerWatch``, ``jobs.transitions.rescue_dead``).

No false rescue. A live worker's key is free only if its own session ended; the worker then
cannot tell whether a peer will rescue its tasks, so it must not run them past the moment a
peer could: its lock's connection is pinged every ``PING_INTERVAL`` from a thread of its own,
and once ``SILENT_LIMIT`` has passed since the last answer (or at once, if the connection
fails), unless a new key was taken and written in place of the old one by then, every child
is killed from that thread (``fence``): SIGKILL, before any peer can have confirmed the key
free. The new key is written only over the old (``UPDATE ... WHERE session_key = old``) and the
rescue locks the row and checks the key it saw free (``rescue_dead``), so of a re-key and a
rescue exactly one wins: a worker whose write finds its row gone was judged dead; it stops.
A worker stopped (SIGSTOP) keeps its session, so its key stays held and nothing is rescued; on
waking it asks its connection first and, answered, carries on.

Only on a direct connection: through a pooler in transaction mode the lock would belong to a
server connection of the pool, held after this worker died and released while it lives. So the
proof is on only where ``jobs.worker.notify.Listener.keeps_sessions`` says the task table's
connections keep their session, and ``JOBS_LISTEN_DATABASE`` is unset (``unavailable``); the
ping also checks that the backend answering is the one that took the lock.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import select
import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import connections, router

from jobs import sql
from jobs.conf import jobs_settings
from jobs.models import Task

logger = logging.getLogger(__name__)

PING_INTERVAL = 0.2  # seconds between two pings of the lock's connection
SILENT_LIMIT = 1.0  # seconds after the last proof at which the children are killed
FREE_CONFIRM_SECONDS = 1.5  # a peer's two sightings of a free key, this far apart (liveness)
RETRY_SECONDS = 1.0  # between two tries to take a new key, the database silent
KEY_BITS = 63  # a positive bigint: pg_advisory_lock's key


def unavailable(listener) -> str | None:
    """Why this worker cannot hold the proof (None: it can), given its started listener."""
    if jobs_settings.SESSION_RESCUE is False:
        return "JOBS_SESSION_RESCUE is False"
    if not sql.dialect(router.db_for_write(Task)).SESSION_LOCKS:
        return "the database has no sessions to prove a worker alive"
    if jobs_settings.LISTEN_DATABASE is not None:
        return "JOBS_LISTEN_DATABASE is set: the task table's connections may be pooled"
    if not getattr(listener, "keeps_sessions", False):
        return "the task table's connections are not proven to keep their session"
    return None


class SessionLock:
    """This worker's advisory lock, its key on the Worker row, and the thread that pings it."""

    def __init__(self, worker_id: str, *, fence: Callable[[], object], wake: Callable[[], object],
                 clock=time.monotonic):  # fmt: skip
        """``fence()`` kills every child at once (called from the lock's thread, with
        ``guard`` held); ``wake()`` wakes the worker's loop to see what happened."""
        self.worker_id = worker_id
        self.alias = router.db_for_write(Task)
        self._fence, self._wake, self._clock = fence, wake, clock
        # Held while the fence kills, and by the worker while it hands a child tasks: no batch
        # is sent between the moment the proof is lost and the kill.
        self.guard = threading.Lock()
        self._connection: Any = None  # psycopg's, autocommit; the lock is its session's
        self._backend_pid = 0
        self.key: int | None = None  # the key the row has, as this worker last wrote it
        self.held = False  # the lock of ``key`` is held and proven, so tasks may run
        self.orphaned = False  # the row was gone when a new key was written: judged dead
        self._proven_at = 0.0  # ``clock`` time of the last ping answered (sent at)
        self._fenced = False  # children killed, not yet seen by the loop (``take_fenced``)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # The worker's side -------------------------------------------------------------------------

    def start(self) -> bool:
        """Take a key and write it on the row, then ping it; whether it is held now."""
        try:
            self._take_key()
        except Exception as exc:
            logger.warning("session lock not taken yet, retrying error=%s", str(exc).strip())
        self._thread = threading.Thread(target=self._run, name="jobs-session", daemon=True)
        self._thread.start()
        return self.held

    def fileno(self) -> int | None:
        """The lock connection's socket, for a new child to close (see ``jobs.worker.child``)."""
        connection = self._connection
        if connection is None or connection.closed:
            return None
        with contextlib.suppress(Exception):
            return connection.fileno()
        return None

    def take_fenced(self) -> bool:
        """Whether the children were killed since the last call (the loop records it)."""
        with self.guard:
            fenced, self._fenced = self._fenced, False
        return fenced

    def close(self):
        """Stop pinging and end the session (its lock with it)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self._close_connection()

    # The lock's thread -------------------------------------------------------------------------

    def _run(self):
        while not self._stop.wait(PING_INTERVAL if self.held else RETRY_SECONDS):
            if self.held:
                sent = self._clock()
                failure = self._ping()
                if failure is None:
                    self._proven_at = sent
                    continue
                self._lose(failure)
            else:
                try:
                    self._take_key()
                except Exception as exc:
                    logger.debug("session lock not taken, retrying error=%s", str(exc).strip())
            if self.orphaned:  # a rescue won: its tasks may start elsewhere now
                with self.guard:
                    self._kill_all()
                self._wake()
                return

    def _ping(self) -> str | None:
        """Ask the connection which backend it is; None if the lock's own answered in time,
        else what went wrong. Waits until SILENT_LIMIT after the last proof, but always a
        moment: a worker stopped meanwhile (SIGSTOP) finds the answer waiting as it wakes."""
        import psycopg  # optional: only PostgreSQL workers get here

        connection = self._connection
        if connection is None:
            return "no connection"
        pgconn = connection.pgconn
        try:
            pgconn.send_query(sql.dialect(self.alias).SESSION_PING)
            while pgconn.flush() == 1:  # the query left in full, as a ping does at once
                select.select([], [pgconn.socket], [], 0.05)
            answer = None
            while True:
                pgconn.consume_input()
                if not pgconn.is_busy():
                    result = pgconn.get_result()
                    if result is None:
                        break
                    if result.status != psycopg.pq.ExecStatus.TUPLES_OK:
                        message = result.error_message.decode(errors="replace").strip()
                        return message or "the ping failed"
                    answer = result.get_value(0, 0)
                    continue
                left = max(self._proven_at + SILENT_LIMIT - self._clock(), 0.05)
                ready, _, _ = select.select([pgconn.socket], [], [], left)
                if not ready and self._clock() >= self._proven_at + SILENT_LIMIT:
                    return f"no answer within {SILENT_LIMIT:g}s"
        except (psycopg.Error, OSError, ValueError) as exc:
            return str(exc).strip() or type(exc).__name__
        if answer is None or int(answer) != self._backend_pid:
            return f"another backend answered ({answer!r}, the lock's is {self._backend_pid})"
        return None

    def _lose(self, failure: str):
        """The lock may be gone: try a new key in time, else kill the children (see above)."""
        deadline = self._proven_at + SILENT_LIMIT
        with self.guard:
            self.held = False
        logger.warning(
            "session lock lost, taking a new key worker_id=%s key=%s reason=%s "
            "children_stopped_in=%.2fs",
            self.worker_id, self.key, failure.replace(" ", "_")[:200],
            max(0.0, deadline - self._clock()),
        )  # fmt: skip
        self._close_connection()
        # The fence comes at the deadline unless a new key is written first; it runs from a
        # timer, as taking the key may wait on the network for longer.
        timer = threading.Timer(max(0.0, deadline - self._clock()), self._fence_unless_held)
        timer.daemon = True
        timer.start()
        try:
            self._take_key()
        except Exception as exc:
            logger.warning("session lock not taken, retrying error=%s", str(exc).strip())
        if self.held:
            timer.cancel()

    def _fence_unless_held(self):
        with self.guard:
            if self.held or self._stop.is_set():
                return
            self._kill_all()
        logger.error(
            "children stopped, the session lock could not be proven for %.1fs: a peer may "
            "rescue their tasks worker_id=%s",
            self._clock() - self._proven_at, self.worker_id,
        )  # fmt: skip
        self._wake()

    def _kill_all(self):
        self._fenced = True
        self._fence()

    def _take_key(self):
        """Open a connection, lock a new key on it, and write the key over the old one."""
        import psycopg  # optional: see _ping

        django_connection = connections[self.alias]
        dialect = sql.dialect(self.alias)
        params = django_connection.get_connection_params()
        params.pop("cursor_factory", None)
        params.pop("context", None)
        connection = psycopg.connect(**params, autocommit=True)
        try:
            key = secrets.randbits(KEY_BITS)
            while not (connection.execute(dialect.SESSION_LOCK_SQL, [key]).fetchone() or [0])[0]:
                key = secrets.randbits(KEY_BITS)  # another's, by a chance of 2**-63
            proven_at = self._clock()
            cursor = connection.execute(
                dialect.session_key_sql(django_connection), [key, self.worker_id, self.key]
            )
            if cursor.rowcount != 1:
                self.orphaned = True
                logger.error(
                    "worker judged dead by its peers (its row is gone), stopping "
                    "worker_id=%s key=%s",
                    self.worker_id, self.key,
                )  # fmt: skip
                raise RuntimeError("the worker's row is gone")
        except BaseException:
            with contextlib.suppress(Exception):
                connection.close()
            raise
        old, self._connection = self._connection, connection
        with self.guard:
            self._backend_pid = connection.info.backend_pid
            self.key, self._proven_at, self.held = key, proven_at, True
        if old is not None:
            with contextlib.suppress(Exception):
                old.close()
        logger.info("session lock held worker_id=%s key=%s", self.worker_id, key)

    def _close_connection(self):
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.close()
