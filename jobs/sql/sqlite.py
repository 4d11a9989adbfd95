"""The statements as SQLite runs them: one writer at a time, JSON functions, no planner to ask.

The same names as ``jobs.sql.postgresql`` (see ``jobs.sql``). SQLite stores ids as hex, JSON as
text and datetimes as Django writes them; it cannot sort what an UPDATE returns nor run one in a
CTE, so a claim's rows are sorted here and recording runs as its own statement.
"""

import json
import sqlite3
import uuid
from contextlib import contextmanager
from typing import Any

from django.db.models import JSONField

from jobs import states
from jobs.models import RateWindow, Task
from jobs.sql import common

NAME = "sqlite"
LISTENS = False  # workers poll
# One writer at a time: a claim in a thread of its own would only contend for the lock
# (jobs.worker.claimer runs it inline), and a busy database is waited for (``is_busy``).
ONE_WRITER = True
# This Python's sqlite3 library is the database: its version and functions are checked.
CHECK_LIBRARY = True
SESSION_LOCKS = False  # no sessions to prove a worker alive: the pid (one host) and the lease


# Claiming -------------------------------------------------------------------------------------

# Each claimed row as JSON, as row_to_json gives it on PostgreSQL.
_ROW_JSON = "json_object({})".format(
    ", ".join(
        f"'{field.attname}', "
        + (f"json({field.column})" if isinstance(field, JSONField) else str(field.column))
        for field in Task._meta.concrete_fields
    )
)


# The waiting keyed rows' index, named: SQLite, without statistics, reads them through the status
# index otherwise (``common.claim_keys``).
_KEYED = "INDEXED BY jobs_task_key_claimable_idx"


def _window(period: str) -> str:
    """The start of the window of ``period`` seconds at the parameter (now), epoch seconds."""
    return f"(CAST(strftime('%%s', %s) AS INTEGER) / {period}) * {period}"


def _rate_room(connection) -> str:
    """A rate key's room left in its window (one writer: nothing counts meanwhile); parameter:
    now."""
    windows = connection.ops.quote_name(RateWindow._meta.db_table)
    return f"""rate_limit - coalesce((
        SELECT w.started FROM {windows} AS w
        WHERE w.{connection.ops.quote_name("key")} = rate_hopeful.rate_key
            AND w.period = rate_hopeful.rate_period
            AND w.window_start >= {_window("rate_hopeful.rate_period")}
    ), 0)"""


def _rate_ctes(connection, queue_count: int) -> str:
    return common.rate_ctes(
        connection, queue_count, lateral=False, window=_window, room=_rate_room(connection),
        indexed_by="INDEXED BY jobs_task_rate_claimable_idx",
    )  # fmt: skip


def claim_sql(connection, queue_count: int) -> str:
    """Claim due rows; parameters: ``claim_params``.

    Returns ``(id, attempts, name, backend, priority, run_after, created_at, row)`` per claimed
    task, in no
    order (``claim_tasks`` sorts them). SQLite runs the whole statement under its single writer
    lock: nothing to skip.
    """
    sources = common.quoted_statuses(states.CLAIM.sources)
    table = common.task_table(connection)
    due = common.due_condition(connection, queue_count)
    # One writer at a time: the running tasks of a key are counted with nothing changing them.
    # ``walk`` takes each key's due rows in claim order, from the key's next row (``first_id``)
    # to as many as its room, one index probe each (the row after the previous one in claim
    # order: ``priority`` descends, the rest ascend). A window function numbering each key's
    # due rows instead read every waiting row of every key with room, at each claim (10,000
    # rows over 100 keys: most of the keyed claim's 4.5 ms of CPU per task). ``rooms`` is
    # computed once: inlined, its count ran again for every row read. The UPDATE finds its rows
    # by primary key: ``+status`` keeps the guard off the status index, through which SQLite
    # otherwise read every waiting row.
    keys = common.claim_keys(connection, queue_count, indexed_by=_KEYED)
    return f"""
        WITH RECURSIVE {keys},
        rooms AS MATERIALIZED (
            SELECT claim_key, first_id, claim_limit - (
                SELECT count(*) FROM {table}
                WHERE concurrency_key = hopeful.claim_key AND status = '{states.Status.RUNNING}'
            ) AS room
            FROM hopeful
        ),
        walk(claim_key, id, place, room) AS (
            SELECT claim_key, first_id, 1, room FROM rooms WHERE room > 0
            UNION ALL
            SELECT walk.claim_key, (
                SELECT later.id FROM {table} AS later {_KEYED}
                WHERE later.concurrency_key = walk.claim_key AND {due}
                    AND (later.priority < prev.priority OR (later.priority = prev.priority
                        AND (later.run_after, later.created_at, later.id)
                            > (prev.run_after, prev.created_at, prev.id)))
                ORDER BY {common.CLAIM_ORDER} LIMIT 1
            ), walk.place + 1, walk.room
            FROM walk JOIN {table} AS prev ON prev.id = walk.id
            WHERE walk.place < walk.room
        ),
        allowed AS (SELECT id FROM walk WHERE id IS NOT NULL),
        {_rate_ctes(connection, queue_count)},
        candidates AS ({common.claim_candidates(connection, queue_count)}),
        picked AS ({common.claim_pick(connection, queue_count)})
        UPDATE {common.task_table(connection)} SET {common.CLAIM_ASSIGNMENTS}
        WHERE id IN (SELECT id FROM picked) AND +status IN ({sources})
        RETURNING id, attempts, name, backend, priority, run_after, created_at, {_ROW_JSON},
            workflow_id, has_dependents
    """


@contextmanager
def claim_lock(connection):
    """Hold SQLite's write lock around a claim made outside a transaction (``BEGIN IMMEDIATE``).

    In autocommit the claim's UPDATE would wait for another writer inside the statement, after
    its parameters, the start time among them, were taken: a dependent released by that writer's
    commit would then seem to have started before what it waited for had finished. Taking the
    lock first puts the wait before the stamp. In a transaction, nothing: it holds the lock or
    takes it at its first write, as its owner decides.
    """
    if connection.in_atomic_block or not connection.get_autocommit():
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            cursor.execute("ROLLBACK")
            raise
        cursor.execute("COMMIT")


def claim_cursor(connection, *, prepare: bool = False):
    """The cursor to claim with: Django's (SQLite caches each statement it compiles)."""
    return connection.cursor()


claim_params = common.claim_params  # the parameters of ``claim_sql``, in order


def claim_tasks(cursor, connection, **values) -> list[tuple]:
    """Claim due rows (``values``: the keywords of ``common.claim_params``).

    Returns ``(id, attempts, name, backend, row JSON text, waited_for)`` per task, highest
    priority first (``waited_for``: ``common.WAITED_FOR``, worked out here: SQLite 3.40 read
    ``workflow_id IS NULL`` in this RETURNING as false for a NULL ``workflow_id``).
    """
    sql = claim_sql(connection, len(values["queues"]))
    cursor.execute(sql, claim_params(connection, **values))
    rows = cursor.fetchall()
    # Highest priority first, then longest due, then enqueue order (``common.claim_pick``;
    # datetimes as stored sort as they read, and so do the ids' hex texts).
    rows.sort(key=lambda row: (-row[4], row[5], row[6], row[0]))
    return [
        (uuid.UUID(task_id), attempts, name, backend, text, workflow_id is not None or bool(has))
        for task_id, attempts, name, backend, _, _, _, text, workflow_id, has in rows
    ]


def is_busy(exc: Exception) -> bool:
    """Whether ``exc`` says the database was busy with another writer: wait and try again."""
    return "locked" in str(exc)


# Outcomes of many attempts --------------------------------------------------------------------

_JSON: dict[str, Any] = {
    "picks": dict.fromkeys(common.SUCCESS, "json_extract(e.value, '$[{n}]')"),
    "source": "json_each(%s) AS e",
    "to_json": {"uuid": lambda value: value.hex, "jsonb": json.dumps},
}


def _with_datetimes(connection) -> dict:
    # Datetimes go in as Django writes them, so the guard compares like with like.
    adapt = connection.ops.adapt_datetimefield_value
    return {**_JSON, "to_json": {**_JSON["to_json"], "timestamptz": adapt}}


def succeed_attempts(connection, transition, rows, *, now, unwaited=False) -> tuple[str, list]:
    """See ``common.succeed_attempts``."""
    options = _with_datetimes(connection)
    return common.succeed_attempts(
        connection, transition, rows, now=now, unwaited=unwaited, **options
    )


def release_attempts(connection, transition, rows, *, now) -> tuple[str, list]:
    """See ``common.release_attempts``."""
    options = _with_datetimes(connection)
    return common.release_attempts(connection, transition, rows, now=now, **options)


# Inserting ------------------------------------------------------------------------------------


def inserts(connection, set_by_enqueue) -> common.Inserts:
    """The INSERTs of enqueue; ``many`` is ``one``, run once per row by ``insert_many``."""
    return common.Inserts(connection, set_by_enqueue)


def insert_many(cursor, connection, built: common.Inserts, constant: dict, rows):
    """INSERT ``rows`` of (id, payload JSON text), other columns from ``constant`` (by field
    name): one compiled statement, run per row."""
    prepared = {
        field.name: field.get_db_prep_save(constant[field.name], connection)
        for field in built.variable
        if field.name not in ("id", "payload")
    }
    cursor.executemany(
        built.many,
        [
            [
                task_id.hex if field.name == "id" else text if field.name == "payload"
                else prepared[field.name]
                for field in built.variable
            ]
            for task_id, text in rows
        ],
    )  # fmt: skip


# Reading --------------------------------------------------------------------------------------


def percentiles_sql(inner: str, start: str, end: str) -> str | None:
    """None: SQLite has no ``percentile_cont`` (``jobs.metrics.durations`` interpolates)."""
    return None


# The exception class of the latest attempt: the last entry of the error_details array.
LAST_EXCEPTION = "json_extract(error_details, '$[#-1].exception')"


# The failed attempts of a task (jobs.sql.errors): one row per entry of error_details, which
# jobs always writes as an array (anything else, from another tool, has no entries). Fields are
# read by the entry's path in the whole value: json_extract of an entry that is a bare string
# would fail ("malformed JSON"); by path, it is NULL.
ERROR_ENTRIES = """, json_each(
    CASE json_type(task.error_details) WHEN 'array' THEN task.error_details ELSE '[]' END
) AS entry"""


def entry_field(name: str) -> str:
    """A text field of the entry of ``ERROR_ENTRIES`` (NULL in an entry that is no object)."""
    return f"json_extract(task.error_details, entry.fullkey || '.{name}')"


def planner_rows(cursor, sql: str, params) -> int | None:
    """None: SQLite's planner gives no row estimate."""
    return None


def listen_sql(channel: str) -> str:
    raise NotImplementedError("SQLite has no LISTEN; workers poll (LISTENS is False)")


def unlisten_sql(channel: str) -> str:
    raise NotImplementedError("SQLite has no LISTEN; workers poll (LISTENS is False)")


# Proof of life: SQLite has no sessions (SESSION_LOCKS is False) -------------------------------

SESSION_LOCK_SQL = SESSION_UNLOCK_SQL = ""
SESSION_PING = b""


def session_key_sql(connection) -> str:
    raise NotImplementedError("SQLite has no advisory locks (SESSION_LOCKS is False)")


def session_peers_sql(connection) -> str:
    raise NotImplementedError("SQLite has no advisory locks (SESSION_LOCKS is False)")


# The library ----------------------------------------------------------------------------------

MINIMUM_VERSION = (3, 35)  # UPDATE ... RETURNING


def has_json() -> bool:
    """Whether this Python's SQLite has the JSON functions a worker's statements use."""
    connection = sqlite3.connect(":memory:")
    try:
        connection.execute("SELECT json_extract(json_object('a', 1), '$.a')")
    except sqlite3.OperationalError:
        return False
    finally:
        connection.close()
    return True
