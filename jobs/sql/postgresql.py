"""The statements as PostgreSQL runs them: row locks, data-modifying CTEs, LISTEN, the planner.

Every module of ``jobs.sql`` for one database defines the same names (see ``jobs.sql``). A
function whose name ends in ``_sql`` returns text; ``succeed_attempts``, ``release_attempts``
and ``inserts`` return text with what it needs (parameters, the fields in order); the others,
given a cursor, run their statement and return what their docstring says.
"""

import json
from contextlib import nullcontext
from datetime import datetime

from jobs import states
from jobs.db import server_binding_cursor
from jobs.models import Task, Worker
from jobs.sql import common

NAME = "postgresql"
LISTENS = True  # LISTEN/NOTIFY wakes workers (jobs.worker.notify)
ONE_WRITER = False  # concurrent writers, each row locked alone
CHECK_LIBRARY = False  # a server: nothing of this Python's to check
SESSION_LOCKS = True  # a session-level advisory lock proves a worker alive (jobs.worker.session)


# Claiming -------------------------------------------------------------------------------------


def _window(period: str) -> str:
    """The start of the window of ``period`` seconds at the parameter (now), epoch seconds."""
    return f"floor(extract(epoch FROM %s::timestamptz) / {period})::bigint * {period}"


# A rate key's room, decided under a lock of the key (``jobs_rate_room``, migration 0019, as
# ``jobs_claim_room``: 0 when another claim holds the key). Parameter: now.
_RATE_ROOM = "jobs_rate_room(rate_key, rate_limit, rate_period, %s::timestamptz)"


def _claim_keys(connection, queue_count: int) -> str:
    """CTEs ending in ``hopeful``, as ``common.claim_keys`` (SQLite's) but with one index probe
    per key where that has three. Parameters: now, now, *queues (three times), limit.

    ``heads`` skips from key to key in the partial index of waiting keyed rows (a loose index
    scan, as a recursive CTE) and takes at each step the key's first row in that index, whose
    order is the claim order within the key: its next due row, if that one is due (``due``,
    true for nearly every key), so ``firsts`` probes again only the keys whose first waiting row
    is not due (delayed, of another queue, paused, expired). Where each step read the next key,
    then (``firsts``) its next due row, and (``allowed``) that row again, a keyed claim beside
    10,000 waiting rows over 100 keys spent most of its key machinery in those probes
    (docs/performance.md). ``hopeful`` is ``common.claim_keys``'s.
    """
    table = common.task_table(connection)
    waiting = f"status IN ({common.quoted_statuses(states.CLAIM.sources)})"
    due = common.due_condition(connection, queue_count)
    columns = "concurrency_key, id, concurrency_limit, priority, run_after, created_at"
    key_order = f"concurrency_key, {common.CLAIM_ORDER}"
    head = f"SELECT {columns}, ({due}) AS due FROM {table}"
    return f"""
        heads(claim_key, id, concurrency_limit, priority, run_after, created_at, due) AS (
            ({head} WHERE concurrency_key IS NOT NULL AND {waiting} ORDER BY {key_order} LIMIT 1)
            UNION ALL
            SELECT next_head.* FROM heads CROSS JOIN LATERAL (
                {head} WHERE concurrency_key > heads.claim_key AND {waiting}
                ORDER BY {key_order} LIMIT 1
            ) AS next_head
        ),
        firsts AS (
            SELECT claim_key, id, concurrency_limit, priority, run_after, created_at
            FROM heads WHERE due
            UNION ALL
            SELECT heads.claim_key, next_due.* FROM heads CROSS JOIN LATERAL (
                SELECT id, concurrency_limit, priority, run_after, created_at FROM {table}
                WHERE concurrency_key = heads.claim_key AND {due}
                ORDER BY {common.CLAIM_ORDER} LIMIT 1
            ) AS next_due
            WHERE heads.due IS NOT TRUE
        ),
        {common.hopeful(connection)}
    """


def _claim_ctes(connection, queue_count: int) -> str:
    # The pick is a MATERIALIZED CTE: as a plain ``IN (subquery)`` the planner may run the
    # ``SKIP LOCKED`` subquery more than once and claim more rows than ``LIMIT``. So are the
    # rooms: each key is locked and counted once (``jobs_claim_room``, migration 0011, locks
    # the key for this transaction, or answers 0 when another claim holds it).
    # The pick reads its candidates, best first, then locks them one by one by primary key
    # until it has ``limit``: no condition but the id may lead the planner to another index.
    # With statistics taken before a burst of enqueues (every row finished, say), a pick whose
    # lookups also said ``status IN (...) AND queue = ...`` was planned as a scan of every
    # waiting row of the queue (4 to 8 ms a claim with 10,000 keyed rows waiting), and
    # ``id IN (SELECT ...)`` as a hash join over the whole table (6 ms with 20,000 rows). The
    # due condition is checked on the row as locked (``FOR UPDATE`` reads its latest
    # version), so a row another claim took meanwhile is passed over; ``LIMIT 1`` keeps it out
    # of the lookup.
    # ``allowed``: a key with room for one takes its next due row, found already (``first_id``,
    # in this statement's snapshot, as ``keyed_pick`` would find it again); only a key with more
    # room reads its rows in order.
    table = common.task_table(connection)
    pick = f"""
        SELECT locked.id FROM (
            SELECT id AS candidate FROM {table}
            WHERE id = ANY(ARRAY(SELECT id FROM candidates))
            ORDER BY {common.CLAIM_ORDER}
        ) AS ordered CROSS JOIN LATERAL (
            SELECT * FROM {table} WHERE id = ordered.candidate LIMIT 1 FOR UPDATE SKIP LOCKED
        ) AS locked
        WHERE {common.due_condition(connection, queue_count)}
        LIMIT %s
    """
    return f"""
        {_claim_keys(connection, queue_count)},
        rooms AS MATERIALIZED (
            SELECT claim_key, first_id, jobs_claim_room(claim_key, claim_limit) AS room
            FROM hopeful
        ),
        allowed AS MATERIALIZED (
            SELECT first_id AS id FROM rooms WHERE room = 1
            UNION ALL
            SELECT keyed.id FROM rooms CROSS JOIN LATERAL (
                {common.keyed_pick(connection, queue_count)} LIMIT rooms.room
            ) AS keyed
            WHERE rooms.room > 1
        ),
        {common.rate_ctes(connection, queue_count, lateral=True, window=_window, room=_RATE_ROOM)},
        candidates AS MATERIALIZED ({common.claim_candidates(connection, queue_count)}),
        picked AS MATERIALIZED ({pick}),
        claimed AS (
            UPDATE {common.task_table(connection)} AS task SET {common.CLAIM_ASSIGNMENTS}
            WHERE task.id = ANY(ARRAY(SELECT id FROM picked))
            RETURNING task.id, task.attempts, task.name, task.backend, task.priority,
                task.run_after, task.created_at, row_to_json(task)::text AS row,
                {common.WAITED_FOR} AS waited_for
        )
    """


def claim_sql(connection, queue_count: int) -> str:
    """Claim due rows; parameters: ``claim_params``.

    Returns ``(id, attempts, name, backend, row, waited_for)`` per claimed task, in claim order
    (sorted here, not in Python), ``row`` the whole row as JSON text, as a child gets it,
    ``waited_for`` whether a workflow or a dependent waits for it (``common.WAITED_FOR``).
    """
    return f"""
        WITH RECURSIVE {_claim_ctes(connection, queue_count)}
        SELECT id, attempts, name, backend, row, waited_for FROM claimed
        ORDER BY priority DESC, run_after, created_at, id
    """


def claim_lock(connection):
    """Nothing to hold: the claim's rows are locked as it picks them (``FOR UPDATE SKIP LOCKED``)
    and no writer waits for another."""
    return nullcontext()


def claim_cursor(connection, *, prepare: bool = False):
    """The cursor to claim with: one whose statement psycopg prepares, where the database
    OPTIONS set a ``prepare_threshold`` (``jobs.db.server_binding_cursor``), or where the caller
    knows the connection keeps its session (``prepare``: a worker whose LISTEN probe came back,
    ``jobs.worker.notify.Listener.keeps_sessions``); else Django's.

    Prepared, the claim is planned once per session: after five custom plans PostgreSQL keeps
    a generic one, which reads the same indexes (``EXPLAIN ANALYZE`` of a claim beside 10,000
    waiting rows, with statistics fresh or lagging, 100 keys or none: planning 0.1 ms against
    3.5, execution no slower). Planned afresh, the claim of a keyed drain spent more time in
    the planner than running (docs/performance.md). Without a threshold nothing changes:
    PgBouncer in transaction mode (before 1.21) cannot route named prepared statements.
    """
    connection.ensure_connection()
    driver = connection.connection
    if prepare and hasattr(driver, "prepare_threshold") and driver.prepare_threshold is None:
        # This connection only (the worker's claim thread's), where Django's cursors bind on
        # the client (unless OPTIONS set server_side_binding) and psycopg prepares none of
        # theirs. Planned afresh, the claim took 3.4 ms of 5.4: most of an idle worker's pickup
        # (docs/performance.md).
        driver.prepare_threshold = 0
    if getattr(driver, "prepare_threshold", None) is None:  # psycopg2: none
        return connection.cursor()
    # A deferred import: the PostgreSQL driver is an optional dependency.
    from django.db.backends.postgresql.base import ServerBindingCursor

    return server_binding_cursor(connection, ServerBindingCursor)


def claim_tasks(cursor, connection, **values) -> list[tuple]:
    """Claim due rows (``values``: the keywords of ``common.claim_params``).

    Returns ``(id, attempts, name, backend, row JSON text, waited_for)`` per task, highest
    priority first.
    """
    sql = claim_sql(connection, len(values["queues"]))
    cursor.execute(sql, claim_params(connection, **values))
    return cursor.fetchall()


def claim_params(connection, **values) -> list:
    """The parameters of ``claim_sql``: ``common.claim_params``, after the due condition's
    twice more (``_claim_keys`` reads it three times where ``common.claim_keys`` reads it once)."""
    params = common.claim_params(connection, **values)
    due = params[: 2 + len(values["queues"])]
    return [*due, *due, *params]


def is_busy(exc: Exception) -> bool:
    """Whether ``exc`` says the database was busy with another writer (never, here)."""
    return False


# Outcomes of many attempts --------------------------------------------------------------------

# How the rows of an attempts UPDATE come apart (see ``common.attempts_update_sql``).
_JSON = {
    "picks": {
        "uuid": "(e->>{n})::uuid",
        "integer": "(e->>{n})::integer",
        "text": "e->>{n}",
        "jsonb": "NULLIF(e->{n}, 'null'::jsonb)",  # JSON null: no result, SQL NULL
        "timestamptz": "(e->>{n})::timestamptz",
    },
    "source": "jsonb_array_elements(%s::jsonb) AS e",
    "to_json": {"uuid": str, "timestamptz": datetime.isoformat},
}


def succeed_attempts(connection, transition, rows, *, now, unwaited=False) -> tuple[str, list]:
    """See ``common.succeed_attempts``."""
    return common.succeed_attempts(
        connection, transition, rows, now=now, unwaited=unwaited, **_JSON
    )


def release_attempts(connection, transition, rows, *, now) -> tuple[str, list]:
    """See ``common.release_attempts``."""
    return common.release_attempts(connection, transition, rows, now=now, **_JSON)


# Inserting ------------------------------------------------------------------------------------


def inserts(connection, set_by_enqueue) -> common.Inserts:
    """The INSERTs of enqueue; ``many`` takes the constant columns, then ids and payloads."""
    built = common.Inserts(connection, set_by_enqueue)
    built.native_params = True
    # A deferred import: the PostgreSQL driver is an optional dependency.
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    if is_psycopg3:  # psycopg2 binds on the client only
        from django.db.backends.postgresql.base import ServerBindingCursor

        built.server_binding = ServerBindingCursor
    # Many rows: the ids and the payloads travel as two newline-separated texts, split by the
    # server. JSON text from json.dumps never holds a raw newline, and one long string costs
    # the driver one escape, where an array of 5,000 costs 5,000.
    many = ", ".join(
        {"id": "u.id::uuid", "payload": "u.payload::jsonb"}.get(field.name)
        or built.literals.get(field.name, "%s")
        for field in Task._meta.concrete_fields
    )
    built.many = (
        f"INSERT INTO {built.table} ({built.columns}) SELECT {many} FROM unnest("
        "string_to_array(%s, E'\\n'), string_to_array(%s, E'\\n')) AS u(id, payload)"
    )
    return built


def insert_many(cursor, connection, built: common.Inserts, constant: dict, rows):
    """INSERT ``rows`` of (id, payload JSON text) in one statement, other columns from
    ``constant`` (by field name)."""
    ids = "\n".join(task_id.hex for task_id, _ in rows)
    payloads = "\n".join(text for _, text in rows)
    # The parameters in the order of their placeholders: columns first, then unnest's.
    params = [constant[f.name] for f in built.variable if f.name not in ("id", "payload")]
    cursor.execute(built.many, [*params, ids, payloads])


# Reading --------------------------------------------------------------------------------------


def percentiles_sql(inner: str, start: str, end: str) -> str | None:
    """Per queue of the rows of ``inner`` (a query with ``queue``, ``start`` and ``end``):
    ``(queue, p50, p95, count)`` of ``end - start`` in seconds, by ``percentile_cont``."""
    seconds = f"EXTRACT(EPOCH FROM ({end} - {start}))"
    return f"""
        SELECT queue,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY {seconds}),
               percentile_cont(0.95) WITHIN GROUP (ORDER BY {seconds}),
               count(*)
        FROM ({inner}) AS finished
        GROUP BY queue
    """


# The exception class of the latest attempt: the last entry of the error_details array.
LAST_EXCEPTION = "(error_details -> -1 ->> 'exception')"


# The failed attempts of a task (jobs.sql.errors): one row per entry of error_details, which
# jobs always writes as an array (anything else, from another tool, has no entries).
ERROR_ENTRIES = """CROSS JOIN LATERAL jsonb_array_elements(
    CASE jsonb_typeof(task.error_details) WHEN 'array' THEN task.error_details ELSE '[]' END
) AS entry(value)"""


def entry_field(name: str) -> str:
    """A text field of the entry of ``ERROR_ENTRIES`` (NULL in an entry that is no object)."""
    return f"(entry.value ->> '{name}')"


def planner_rows(cursor, sql: str, params) -> int | None:
    """How many rows the planner expects the query ``sql`` to return."""
    cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
    plan = cursor.fetchone()[0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])


def listen_sql(channel: str) -> str:
    """Subscribe this session to ``channel`` (an identifier, never user input)."""
    return f"LISTEN {channel}"


def unlisten_sql(channel: str) -> str:
    """Unsubscribe this session from ``channel`` (an identifier, never user input)."""
    return f"UNLISTEN {channel}"


# A NOTIFY sent by the application (a waiting task made due now), as the trigger sends it on an
# insert or a requeue: delivered when the transaction commits. Parameters: channel, queue.
NOTIFY_SQL = "SELECT pg_notify(%s, %s)"


# Proof of life: a session-level advisory lock (jobs.worker.session) ---------------------------

# Run on the worker's own direct connection, never through a pooler. Parameter: the key.
SESSION_LOCK_SQL = "SELECT pg_try_advisory_lock(%s)"
SESSION_UNLOCK_SQL = "SELECT pg_advisory_unlock(%s)"
# The ping, sent with libpq's asynchronous calls so that its wait has a deadline: the backend
# that answers; another one than the lock's means the session is not the one holding it.
SESSION_PING = b"SELECT pg_backend_pid()"


def session_key_sql(connection) -> str:
    """Set a worker's key, if the row still has the key the worker last wrote (a rescuer that
    judged it dead removed the row). Parameters: new key, worker id, old key (or None)."""
    table = connection.ops.quote_name(Worker._meta.db_table)
    return (
        f"UPDATE {table} SET session_key = %s WHERE id = %s AND session_key IS NOT DISTINCT FROM %s"
    )


def session_peers_sql(connection) -> str:
    """The other live workers holding a key: rows of (id, key, last heartbeat, whether the key
    is held now). Parameter: the asking worker's id.

    A bigint key of ``pg_advisory_lock`` shows in ``pg_locks`` as its high 32 bits in
    ``classid``, its low 32 bits in ``objid`` and ``objsubid`` 1, in the database it was taken
    in. ``pg_locks`` is read once per statement (a function scan, materialized).
    """
    table = connection.ops.quote_name(Worker._meta.db_table)
    return f"""
        WITH held AS (
            SELECT (classid::bigint << 32) | objid::bigint AS key FROM pg_locks
            WHERE locktype = 'advisory' AND objsubid = 1 AND granted
              AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
        )
        SELECT id, session_key, last_heartbeat_at, session_key IN (SELECT key FROM held)
        FROM {table}
        WHERE stopped_at IS NULL AND session_key IS NOT NULL AND id <> %s
    """
