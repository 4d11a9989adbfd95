"""Database helpers shared by the worker side: surviving faults while recording outcomes."""

import asyncio.events
import functools
import logging
import random
import time
from contextlib import contextmanager, nullcontext

from asgiref.sync import AsyncToSync
from django.conf import settings
from django.db import (
    DatabaseError,
    InterfaceError,
    OperationalError,
    connections,
    reset_queries,
    router,
    transaction,
)

from jobs.conf import jobs_settings

logger = logging.getLogger(__name__)


def retry_on_database_error(
    operation, *, what: str, model=None, deadline_seconds=None, on_fault=None, abandon=None
):
    """Run ``operation()``; on a database fault, reconnect and try again until a deadline.

    For bookkeeping writes that must not be lost: a finished task's outcome is retried through a
    server restart or a dropped connection instead of leaving the task ``running``.

    ``abandon``, a function, says when to stop trying before the deadline (the worker was told
    to stop now, its grace period is over, its leases may have lapsed): the fault is raised
    then. It is asked after every fault and during the pauses, so that a signal handler that
    sets what it reads ends the retries within a tenth of a second.
    """
    if deadline_seconds is None:
        deadline_seconds = jobs_settings.DATABASE_RETRY_SECONDS

    def after_fault(exc, pause):
        logger.warning(
            "database fault, retrying what=%s error=%r pause=%.2f", what, first_line(exc), pause
        )
        _drop_broken_connection(model)
        if on_fault is not None:
            on_fault()

    return _retry(
        operation,
        is_connection_fault,
        after_fault,
        deadline_seconds=deadline_seconds,
        pauses=(0.05, 2.0),
        abandon=abandon,
    )


def wait_while_locked(statements, run, deadline_seconds=30.0):
    """Run ``run()``, waiting out a busy database (SQLite's "database is locked") rather than fail.

    Another process holds SQLite's one write lock for a moment: the statement is tried again
    after a short pause, on the same connection (nothing is broken). Any other error is raised.
    ``statements``, the database's module of ``jobs.sql``, says which errors mean busy.
    """

    def busy(exc):
        return isinstance(exc, OperationalError) and statements.is_busy(exc)

    def after_busy(exc, pause):
        logger.debug("claim waiting for a busy database pause=%.3f", pause)

    return _retry(run, busy, after_busy, deadline_seconds=deadline_seconds, pauses=(0.005, 0.2))


def _retry(operation, retryable, after, *, deadline_seconds, pauses, abandon=None):
    """The one retry loop: run ``operation()`` until it returns or fails for good.

    An error for which ``retryable(exc)`` is true is tried again after ``after(exc, pause)``
    and a jittered pause (doubling from ``pauses[0]`` up to ``pauses[1]`` seconds), until
    ``deadline_seconds`` have passed or ``abandon()`` turns true: then it is raised.
    """
    deadline = time.monotonic() + deadline_seconds
    pause, longest = pauses
    while True:
        try:
            return operation()
        except DatabaseError as exc:
            if not retryable(exc):
                raise
            if time.monotonic() > deadline or (abandon is not None and abandon()):
                raise
            after(exc, pause)
            _sleep_unless(pause * (1 + random.random()), abandon)
            pause = min(pause * 2, longest)


def _sleep_unless(seconds: float, abandon):
    """Sleep ``seconds``, in short slices while ``abandon`` may turn true meanwhile."""
    until = time.monotonic() + seconds
    while (left := until - time.monotonic()) > 0:
        if abandon is not None and abandon():
            return
        time.sleep(min(left, 0.1))


def _drop_broken_connection(model):
    alias = router.db_for_write(model) if model is not None else "default"
    connection = connections[alias]
    if connection.in_atomic_block:
        return  # the caller's transaction owns the connection; it decides
    if connection.connection is not None and not connection.is_usable():
        connection.close()


def is_connection_fault(exc: BaseException) -> bool:
    """Whether ``exc`` is about the connection (retry it), not about the rows a statement wrote.

    A row the database refuses (``DataError`` such as a NUL in jsonb, ``IntegrityError``, an
    error raised by a trigger) fails the same way however often it is tried: it is isolated by
    ``record_isolating`` instead.
    """
    return isinstance(exc, OperationalError | InterfaceError)


def record_isolating(items: list, record, *, using: str) -> tuple[list, list]:
    """Run ``record(items)``; if the database refuses a row, record the others without it.

    ``record`` writes a list of items in one statement and returns a list (the ids it applied
    to). On a refusal that is not a connection fault (those propagate, for
    ``retry_on_database_error``), the list is split in halves, each tried again, down to the
    single items the database refuses: about 2·log2(n) statements for one bad item in n.
    Returns what the successful calls returned, joined, and the refused ``(item, error)`` pairs.
    Each try runs in a savepoint when a transaction is open, so that a refused statement does
    not abort the caller's transaction (PostgreSQL aborts it whole otherwise).
    """
    try:
        with savepoint_in_transaction(using):
            return list(record(items)), []
    except DatabaseError as exc:
        if is_connection_fault(exc):
            raise
        if len(items) == 1:
            logger.warning(
                "database refused a row what=%s error=%r", record.__name__, first_line(exc)
            )
            return [], [(items[0], exc)]
    middle = len(items) // 2
    done_first, refused_first = record_isolating(items[:middle], record, using=using)
    done_last, refused_last = record_isolating(items[middle:], record, using=using)
    return done_first + done_last, refused_first + refused_last


def savepoint_in_transaction(using: str):
    """A savepoint if a transaction is open (nothing otherwise): around a statement the database
    may refuse, which on PostgreSQL would otherwise abort the whole transaction."""
    if connections[using].in_atomic_block:
        return transaction.atomic(using=using)
    return nullcontext()


def server_binding_cursor(connection, server_binding):
    """A cursor that binds parameters on the server, so that psycopg can prepare its statements.

    Django's default psycopg 3 cursor binds on the client: PostgreSQL then parses and plans the
    same statement at every use. A server-side binding cursor (``server_binding``, Django's
    ``ServerBindingCursor``; None: Django's own cursor) lets psycopg prepare it after
    ``prepare_threshold`` uses, when the database OPTIONS set one (Django's default, ``None``,
    prepares nothing, as PgBouncer in transaction mode needs), without switching the whole ORM
    to ``server_side_binding``. It is wrapped like any Django cursor, so execute wrappers see
    the statement. While queries are logged (DEBUG), Django's own cursor is used: the log of a
    prepared statement would read ``None`` as its SQL.

    A shortcut into Django's internals (``ServerBindingCursor``, ``make_cursor``), for enqueue's
    INSERT (434 µs an enqueue against 697) and the claim (docs/performance.md, "Shortcuts into
    Django's internals"); guarded by tests/db/test_django_shortcuts.py.
    """
    if server_binding is None or connection.queries_logged:
        return connection.cursor()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    return connection.make_cursor(server_binding(connection.connection))


def forget_queries():
    """Empty this thread's query logs, as Django does at each request, if ``DEBUG`` keeps them.

    With ``DEBUG`` on, every connection logs its queries (up to 9,000 each): a worker serves no
    requests, so without this its processes grow by that log. Called once per task in a child
    and once per round of the supervisor's loop (and of its claim thread); with ``DEBUG`` off
    it costs one attribute read.
    """
    if settings.DEBUG:
        reset_queries()


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@contextmanager
def outside_event_loop():
    """Let Django's database calls run here even in the thread of a running event loop.

    A worker's child runs async tasks on one loop, in its main thread, whose database
    connection is the child's only one: the bookkeeping of each task (its outcome, its
    progress, a cancellation checkpoint) is a short synchronous call made there, the loop
    paused meanwhile, so the calls of tasks running together never interleave on it. Django
    refuses a database call in a thread running a loop (``SynchronousOnlyOperation``): for the
    duration of the block, this thread is seen as running none. Nothing in it may await.
    """
    loop = asyncio.events._get_running_loop()
    if loop is None:
        yield
        return
    asyncio.events._set_running_loop(None)
    try:
        yield
    finally:
        asyncio.events._set_running_loop(loop)


def usable_in_event_loop(method):
    """Decorate a synchronous function making database calls so that a coroutine may call it.

    On a loop that ``asgiref``'s ``async_to_sync`` runs (an async task run alone, outside a
    worker), the call is made in the thread waiting for the loop, with that thread's connection
    (a test's transaction, say), as ``sync_to_async`` would; the loop waits for it. On a loop run
    in its own thread (a worker child's), it is made there (``outside_event_loop``).
    """

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        if asyncio.events._get_running_loop() is not None:
            waiting = getattr(AsyncToSync.executors, "current", None)
            if waiting is not None:
                return waiting.submit(method, *args, **kwargs).result()
        with outside_event_loop():
            return method(*args, **kwargs)

    return wrapper
