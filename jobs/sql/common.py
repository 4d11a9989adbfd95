"""The statements every database writes alike, and the pieces the per-database modules share.

Nothing here runs a statement: each function returns SQL text (with ``%s`` placeholders) and,
where its parameters are more than the caller's own values, the parameters in their order.
"""

import json
from datetime import datetime

from django.db.models import UniqueConstraint

from jobs import states
from jobs.models import QueuePause, RateWindow, Task, TaskPause, UniqueHold


def task_table(connection) -> str:
    return connection.ops.quote_name(Task._meta.db_table)


def quoted_statuses(statuses) -> str:
    """The statuses as SQL string literals, sorted: ``'pending', 'retrying'``."""
    return ", ".join(f"'{status}'" for status in sorted(statuses))


# Status changes of many rows -----------------------------------------------------------------


def update_returning_ids(queryset, values: dict, *, using: str) -> tuple[str, list]:
    """``(sql, params)``: the UPDATE ``queryset.update(**values)`` runs, ``RETURNING`` the ids
    of the rows it moved (PostgreSQL; SQLite from 3.35, which ``jobs.checks`` requires).

    The rows an UPDATE moved, as it moved them: found again afterwards by a column it set
    (``updated_at = now``), they would include another process's rows stamped at the same
    instant. ``queryset`` filters its own table only (no join), as ``jobs.transitions`` builds it.

    A shortcut into Django's internals (``UpdateQuery``, its compiler's ``as_sql``), as
    ``QuerySet.update`` builds its statement, so every value (an expression, a user, None) is
    written as Django writes it; guarded by tests/db/test_django_shortcuts.py.
    """
    from django.db import connections
    from django.db.models.sql import UpdateQuery

    query = queryset.query.chain(UpdateQuery)
    query.add_update_values(values)
    statement, params = query.get_compiler(using).as_sql()
    connection = connections[using]
    column = connection.ops.quote_name("id")  # Task's primary key
    return f"{statement} RETURNING {task_table(connection)}.{column}", list(params)


# Claiming -------------------------------------------------------------------------------------


def due_condition(connection, queue_count: int) -> str:
    """The condition of a due row of the claimed queues, none paused, of no paused task type,
    not expired; parameters: now, now, *queues.

    A row past its ``expires_at`` is never started, whether or not maintenance has cancelled it
    yet (``jobs.transitions.expire_waiting``). The test is on the row, after the index has found
    it: rows without a deadline pass at the first comparison.

    One queue is compared with ``=``, which the per-queue claim index serves in order; with
    ``IN`` and statistics that lag behind a burst of enqueues, PostgreSQL was seen to sort every
    waiting row of the queue instead (10 ms for 20,000 rows, at each claim).
    """
    paused = connection.ops.quote_name(QueuePause._meta.db_table)
    paused_types = connection.ops.quote_name(TaskPause._meta.db_table)
    queue_filter = ""
    if queue_count == 1:
        queue_filter = "AND queue = %s"
    elif queue_count:
        queue_filter = f"AND queue IN ({', '.join(['%s'] * queue_count)})"
    return f"""status IN ({quoted_statuses(states.CLAIM.sources)}) AND run_after <= %s
        AND (expires_at IS NULL OR expires_at > %s)
        {queue_filter} AND queue NOT IN (SELECT queue FROM {paused})
        AND name NOT IN (SELECT name FROM {paused_types})"""


CLAIM_ORDER = "priority DESC, run_after, created_at, id"


def claim_keys(connection, queue_count: int, *, indexed_by: str = "") -> str:
    """CTEs ending in ``hopeful``: the concurrency keys a claim tries, each with the limit of
    its next due row. Parameters: now, now, *queues, limit. SQLite's (PostgreSQL's, with one
    probe per key, is ``jobs.sql.postgresql._claim_keys``).

    ``keys`` skips from key to key in the partial index of waiting keyed rows, one probe per
    key (a loose index scan, as a recursive CTE: the statement starts ``WITH RECURSIVE``),
    rather than reading every waiting row; with no keyed task it reads an empty index, whatever
    the backlog of other tasks. ``firsts`` is each key's next due row. ``hopeful`` keeps the
    keys that seemed to have room in this statement's snapshot, their next rows best first, as
    many as the claim can take (``limit``): a key at its limit is passed over, so it never holds
    back the others, and no more keys are locked and counted than can be used.
    ``hopeful`` also carries the id of each key's next row (``first_id``).

    ``indexed_by`` follows each read of the waiting keyed rows (SQLite: without statistics, its
    planner read every waiting row through the status index at each step of the loose scan,
    100 keys times 10,000 rows: 2 to 4 s a claim).
    """
    table = task_table(connection)
    keyed = f"{table} {indexed_by}"
    waiting = f"status IN ({quoted_statuses(states.CLAIM.sources)})"
    due = due_condition(connection, queue_count)

    def next_due(columns: str) -> str:
        return f"""
            SELECT {columns} FROM {keyed}
            WHERE concurrency_key = keys.claim_key AND {due}
            ORDER BY {CLAIM_ORDER} LIMIT 1
        """

    # SQLite has no LATERAL: the next row's id, then the row by its id.
    firsts = f"""firsts AS (
        SELECT ids.claim_key, task.* FROM (
            SELECT claim_key, ({next_due("id")}) AS first_id
            FROM keys WHERE claim_key IS NOT NULL
        ) AS ids JOIN {table} AS task ON task.id = ids.first_id
    )"""
    return f"""
        keys(claim_key) AS (
            SELECT min(concurrency_key) FROM {keyed}
            WHERE concurrency_key IS NOT NULL AND {waiting}
            UNION ALL
            SELECT (
                SELECT min(concurrency_key) FROM {keyed}
                WHERE concurrency_key > keys.claim_key AND {waiting}
            ) FROM keys WHERE keys.claim_key IS NOT NULL
        ),
        {firsts},
        {hopeful(connection)}
    """


def hopeful(connection) -> str:
    """The CTE ``hopeful`` of ``claim_keys``, from ``firsts``; parameter: limit."""
    return f"""hopeful AS (
            SELECT first.claim_key, first.concurrency_limit AS claim_limit, first.id AS first_id
            FROM firsts AS first
            WHERE first.concurrency_limit > (
                SELECT count(*) FROM {task_table(connection)}
                WHERE concurrency_key = first.claim_key AND status = '{states.Status.RUNNING}'
            )
            ORDER BY first.priority DESC, first.run_after, first.created_at, first.id
            LIMIT %s
        )"""


def keyed_pick(connection, queue_count: int) -> str:
    """The due rows of one key (``rooms.claim_key``), best first: the first ``rooms.room`` of
    them may start. Parameters: now, now, *queues."""
    return f"""
        SELECT id FROM {task_table(connection)}
        WHERE concurrency_key = rooms.claim_key AND {due_condition(connection, queue_count)}
        ORDER BY {CLAIM_ORDER}
    """


def claim_candidates(connection, queue_count: int) -> str:
    """The rows a claim may take: the best ``limit`` without a concurrency key (their claim
    index holds no keyed row), and the keyed rows the CTE ``allowed`` lets start (per database:
    the first of each key, up to the room it has left). Parameters: now, now, *queues, limit.

    Rows with a rate key are the CTE ``rate_allowed``'s (``rate_ctes``).

    A CTE of its own, computed once: as a subquery of the pick, PostgreSQL was seen to run it
    again for every row it scanned (5 s for one claim of 3,500 waiting rows).
    """
    table = task_table(connection)
    return f"""
        SELECT id FROM (
            SELECT id FROM {table}
            WHERE {due_condition(connection, queue_count)} AND concurrency_key IS NULL
                AND rate_key IS NULL
            ORDER BY {CLAIM_ORDER} LIMIT %s
        ) AS plain
        UNION ALL SELECT id FROM allowed
        UNION ALL SELECT id FROM rate_allowed
    """


def claim_pick(connection, queue_count: int) -> str:
    """The rows a claim takes among the ``candidates`` CTE, best first; parameters: now,
    now, *queues, limit. SQLite's pick; PostgreSQL's, which locks each row it takes, is in
    ``jobs.sql.postgresql._claim_ctes``, with the same conditions and order (a condition added
    here belongs there too).

    Ties of priority and due time go in enqueue order (``created_at``, then ``id``, which
    ``enqueue_many`` hands out in its calls' order): a rule, not the order of the heap. The due
    condition is checked again here (on PostgreSQL, on the row as locked), so that a row another
    claim took meanwhile is passed over.
    """
    # The rows are found from the candidates, by primary key (``CROSS JOIN`` keeps that order of
    # the loops): as ``id IN (SELECT id FROM candidates)``, SQLite read every waiting row of the
    # queue through its status index and looked each up in the candidates (75 to 120 ms for a
    # claim of 700 beside 10,000 waiting).
    return f"""
        SELECT id FROM (
            SELECT task.* FROM candidates CROSS JOIN {task_table(connection)} AS task
                ON task.id = candidates.id
        )
        WHERE {due_condition(connection, queue_count)}
        ORDER BY {CLAIM_ORDER}
        LIMIT %s
    """


def rate_ctes(
    connection, queue_count: int, *, lateral: bool, window, room: str, indexed_by: str = ""
) -> str:
    """CTEs ending in ``rate_allowed``: the due rows with a rate key that this claim may start,
    at most the room each key has left in its window. Parameters: now, now, *queues (the keys'
    next rows), now, limit (``rate_hopeful``), now (``room``), now, now, *queues.

    As ``claim_keys`` for concurrency keys: ``rate_keys`` skips from key to key in the partial
    index of waiting rows with a rate key (an empty index when no task has one), ``rate_firsts``
    is each key's next due row, whose limit and period apply, and ``rate_hopeful`` keeps the keys
    whose window had room in this statement's snapshot, best first, as many as the claim can
    take. ``room`` (per database) is the room left as the claim decides it, over
    ``rate_hopeful``'s columns and one parameter, now; ``window(period)`` is the start of the
    window of a period at one parameter, now. The starts are counted by a trigger as the claim
    sets rows running (migration 0019), in the claim's own statement. ``indexed_by`` follows
    each read of the task table (SQLite: its planner, without statistics, read every waiting
    row through the status index instead of the rate key's: 1.8 ms against 0.09 for 3,000).
    """
    table = task_table(connection)
    windows = connection.ops.quote_name(RateWindow._meta.db_table)
    waiting = f"status IN ({quoted_statuses(states.CLAIM.sources)})"
    due = due_condition(connection, queue_count)

    rated = f"{table} {indexed_by}"

    def due_of(key: str, columns: str, limit: str = "") -> str:
        return f"""
            SELECT {columns} FROM {rated} WHERE rate_key = {key} AND {due}
            ORDER BY {CLAIM_ORDER} {limit}
        """

    if lateral:  # PostgreSQL: one index probe per key, the row's columns at once
        row = due_of("rate_keys.rate_key", "rate_limit, rate_period, priority, run_after, "
                     "created_at, id", "LIMIT 1")  # fmt: skip
        firsts = f"""rate_firsts AS (
            SELECT rate_keys.rate_key, next_due.* FROM rate_keys
            CROSS JOIN LATERAL ({row}) AS next_due WHERE rate_keys.rate_key IS NOT NULL
        )"""
        allowed = f"""rate_allowed AS MATERIALIZED (
            SELECT rated.id FROM rate_rooms CROSS JOIN LATERAL (
                {due_of("rate_rooms.rate_key", "id")} LIMIT rate_rooms.room
            ) AS rated
            WHERE rate_rooms.room > 0
        )"""
        materialized = "MATERIALIZED"
    else:  # SQLite, which has no LATERAL: the next row's id, then the row by its id
        firsts = f"""rate_firsts AS (
            SELECT ids.rate_key, task.rate_limit, task.rate_period, task.priority,
                task.run_after, task.created_at, task.id FROM (
                SELECT rate_key, ({due_of("rate_keys.rate_key", "id", "LIMIT 1")}) AS first_id
                FROM rate_keys WHERE rate_key IS NOT NULL
            ) AS ids JOIN {table} AS task ON task.id = ids.first_id
        )"""
        allowed = f"""rate_allowed AS (
            SELECT id FROM (
                SELECT rated.id, rate_rooms.room, row_number() OVER (
                    PARTITION BY rate_rooms.rate_key ORDER BY {CLAIM_ORDER}
                ) AS place
                FROM rate_rooms JOIN {table} AS rated {indexed_by}
                    ON rated.rate_key = rate_rooms.rate_key
                WHERE rate_rooms.room > 0 AND {due}
            ) WHERE place <= room
        )"""
        materialized = ""
    return f"""
        rate_keys(rate_key) AS (
            SELECT min(rate_key) FROM {rated} WHERE rate_key IS NOT NULL AND {waiting}
            UNION ALL
            SELECT (
                SELECT min(rate_key) FROM {rated}
                WHERE rate_key > rate_keys.rate_key AND {waiting}
            ) FROM rate_keys WHERE rate_keys.rate_key IS NOT NULL
        ),
        {firsts},
        rate_hopeful AS (
            SELECT first.rate_key, first.rate_limit, first.rate_period FROM rate_firsts AS first
            WHERE first.rate_limit > coalesce((
                SELECT w.started FROM {windows} AS w
                WHERE w.{connection.ops.quote_name("key")} = first.rate_key
                    AND w.period = first.rate_period
                    AND w.window_start >= {window("first.rate_period")}
            ), 0)
            ORDER BY first.priority DESC, first.run_after, first.created_at, first.id
            LIMIT %s
        ),
        rate_rooms AS {materialized} (SELECT rate_key, {room} AS room FROM rate_hopeful),
        {allowed}
    """


# The claim's SET list; parameters: worker_id, started_at, updated_at, lease_expires_at.
CLAIM_ASSIGNMENTS = f"""
    status = '{states.CLAIM.target}', attempts = attempts + 1, worker_id = %s,
    started_at = %s, updated_at = %s, lease_expires_at = %s
"""


def claim_params(connection, *, now, queues, limit, worker_id, lease_expires_at) -> list:
    """The parameters of a claim, in the order its parts take them."""
    adapt = connection.ops.adapt_datetimefield_value
    due = [adapt(now), adapt(now), *queues]  # due_condition's
    assignments = [worker_id, adapt(now), adapt(now), adapt(lease_expires_at)]
    rates = [*due, adapt(now), limit, adapt(now), *due]  # rate_ctes'
    # claim_keys, keyed_pick, rate_ctes, claim_candidates, claim_pick, CLAIM_ASSIGNMENTS
    return [*due, limit, *due, *rates, *due, limit, *due, limit, *assignments]


# Outcomes of many attempts --------------------------------------------------------------------

# What each kind of value of an attempt row is, in order (``attempts_update_sql`` takes them apart).
ATTEMPT = ("uuid", "integer", "text")  # task id, attempts, worker_id
SUCCESS = (*ATTEMPT, "jsonb", "timestamptz")  # ... result, finished_at


def attempts_update_sql(
    connection, transition, *, kinds, picks, source, assignments, returning=("id",), also=""
) -> str:
    """One UPDATE applying ``transition`` to many attempts, guarded row by row (and by the
    condition ``also``, if given); ``RETURNING`` the columns ``returning`` (the id first).

    Its rows come as one JSON parameter, an array of arrays of values of ``kinds`` (task id,
    attempts, worker id, then the values ``assignments`` reads as ``v.<name>``); ``picks`` and
    ``source`` say how the database takes it apart (per database). Parameters: see
    ``attempts_params``.

    The rows travel as one JSON parameter that the database takes apart: one C-speed
    ``json.dumps`` here rather than a parameter adapted per value, and one statement text
    whatever the number of rows (SQLite caches a compiled statement per text; a VALUES list per
    row count filled its cache with large statements, 28 MiB in a worker).
    """
    table = task_table(connection)
    names = ["id", "attempts", "worker_id", "result", "finished_at"][: len(kinds)]
    selected = ", ".join(picks[kind].format(n=n) for n, kind in enumerate(kinds))
    return f"""
        WITH v({", ".join(names)}) AS (SELECT {selected} FROM {source})
        UPDATE {table} SET status = %s, updated_at = %s,
            {assignments.format(table=table)}
        FROM v
        WHERE {table}.id = v.id AND {table}.attempts = v.attempts
            AND {table}.worker_id = v.worker_id
            AND {table}.status IN ({quoted_statuses(transition.sources)})
            {f"AND {also.format(table=table)}" if also else ""}
        RETURNING {", ".join(f"{table}.{column}" for column in returning)}
    """


def attempts_params(connection, transition, rows, *, kinds, to_json, params, now) -> list:
    """The parameters of ``attempts_update_sql``: the rows as JSON (each value of a kind in
    ``to_json`` converted by it first), the target status, ``now``, then ``params``, the
    parameters of the assignments."""
    adapt = connection.ops.adapt_datetimefield_value
    converters = [to_json.get(kind) for kind in kinds]
    text = json.dumps(
        [
            [
                value if to is None or value is None else to(value)
                for to, value in zip(converters, row, strict=True)
            ]
            for row in rows
        ]
    )
    tail = [adapt(value) if isinstance(value, datetime) else value for value in params]
    return [text, transition.target, adapt(now), *tail]


SUCCEED_ASSIGNMENTS = "result = v.result, finished_at = v.finished_at, lease_expires_at = NULL"
RELEASE_ASSIGNMENTS = (
    "attempts = {table}.attempts - 1, run_after = %s, worker_id = '', lease_expires_at = NULL"
)


# What a recorded success returns: its id, and what its workflow needs to know (jobs.workflows:
# read by the statement that writes the outcome, so a dependent enqueued meanwhile is seen).
SUCCEEDED_COLUMNS = ("id", "workflow_id", "workflow_role", "has_dependents")


# The tasks nothing waits for: no workflow, no dependent. Their outcome has nothing to settle
# (jobs.workflows), so it needs no transaction around it. Read by the UPDATE on the row it
# moves: a dependent enqueued meanwhile holds the row (``create_waiting`` locks it), and the
# UPDATE, waiting for it, reads ``has_dependents`` as it committed it.
UNWAITED = "{table}.workflow_id IS NULL AND NOT {table}.has_dependents"
# Its opposite, as a claim returns it: a workflow or a dependent waits for the task's outcome,
# so that its success, recorded alone, goes straight to the transaction that settles it
# (``jobs.transitions.Success.waited_for``). A dependent enqueued after the claim is not seen:
# the success then goes to ``UNWAITED``'s statement first, which leaves it.
WAITED_FOR = "(workflow_id IS NOT NULL OR has_dependents)"


def succeed_attempts(connection, transition, rows, *, now, picks, source, to_json, unwaited=False):
    """``(sql, params)`` recording successful attempts, rows of ``SUCCESS``; the statement
    returns ``SUCCEEDED_COLUMNS`` of the rows it moved. With ``unwaited``, only those of the
    tasks nothing waits for (``UNWAITED``): it returns the ids it moved, and leaves the other
    rows alone. ``picks``, ``source``, ``to_json``: the database's (see
    ``attempts_update_sql``)."""
    also, returning = (UNWAITED, ("id",)) if unwaited else ("", SUCCEEDED_COLUMNS)
    sql = attempts_update_sql(
        connection, transition, kinds=SUCCESS, picks=picks, source=source,
        assignments=SUCCEED_ASSIGNMENTS, returning=returning, also=also,
    )  # fmt: skip
    params = attempts_params(
        connection, transition, rows, kinds=SUCCESS, to_json=to_json, params=(), now=now
    )
    return sql, params


def release_attempts(connection, transition, rows, *, now, picks, source, to_json):
    """``(sql, params)`` handing back attempts, rows of ``ATTEMPT``: claimable at ``now``, the
    attempt undone; the statement returns the ids it moved."""
    sql = attempts_update_sql(
        connection, transition, kinds=ATTEMPT, picks=picks, source=source,
        assignments=RELEASE_ASSIGNMENTS,
    )  # fmt: skip
    params = attempts_params(
        connection, transition, rows, kinds=ATTEMPT, to_json=to_json, params=[now], now=now
    )
    return sql, params


# Inserting ------------------------------------------------------------------------------------


def default_literal(field, value, connection) -> str:
    """Write ``value`` of ``field`` as an SQL literal, ready for a statement run with parameters.

    A shortcut into Django's internals: the schema editor's ``quote_value``, as migrations use
    it for defaults. It pays: an INSERT takes 61 µs on SQLite and 282 on PostgreSQL, against 72
    and 360 with every default a parameter (docs/performance.md, "Shortcuts into Django's
    internals"); guarded by tests/db/test_django_shortcuts.py, which reads hostile values back
    through both databases.
    ``quote_value`` leaves ``%`` alone, which the driver would read as a placeholder: doubled.
    """
    editor = connection.SchemaEditorClass(connection)  # its quote_value only, never entered
    return editor.quote_value(field.get_db_prep_save(value, connection)).replace("%", "%%")


class Inserts:
    """The INSERTs of enqueue for one database, built once: literals for the defaults.

    ``variable`` are the fields an enqueue sets, in the order of ``one``'s placeholders; every
    other column is its model default, written into the SQL as a literal.
    """

    def __init__(self, connection, set_by_enqueue):
        connection.ensure_connection()
        quote = connection.ops.quote_name
        fields = Task._meta.concrete_fields
        self.table = task_table(connection)
        self.columns = ", ".join(quote(field.column) for field in fields)
        self.variable = [field for field in fields if field.name in set_by_enqueue]
        self.literals = {
            field.name: default_literal(field, field.get_default(), connection)
            for field in fields
            if field.name not in set_by_enqueue
        }
        values = ", ".join(self.literals.get(field.name, "%s") for field in fields)
        self.one = f"INSERT INTO {self.table} ({self.columns}) VALUES ({values})"
        # With a key, a duplicate makes no row and no error (so no savepoint is needed to keep
        # the caller's transaction usable); the unique index still decides between two racers.
        self.one_with_key = (
            f"{self.one} ON CONFLICT (name, idempotency_key) "
            "WHERE idempotency_key IS NOT NULL DO NOTHING"
        )
        # With a unique key held while waiting or active: no target, so that both keys' indexes
        # decide (the unique key's, and the idempotency key's if the row has one too), and as
        # the partial index's condition would have to be written again, word for word, for
        # SQLite to match it. The primary key, the only other, is a fresh uuid4.
        self.one_unique = f"{self.one} ON CONFLICT DO NOTHING"
        self.many = self.one
        self.native_params = False  # whether the driver adapts uuid, str, int, datetime as is
        self.server_binding = None  # a cursor class that binds on the server, if any


_unique_held: dict[type, str] = {}  # by the class of the connection: one per database


def unique_held_condition(connection) -> str:
    """The condition of the rows holding their unique key (``jobs.models.UNIQUE_HELD``), as the
    partial unique index ``jobs_task_unique_while`` writes it; no parameters.

    Its values are literals, as in the index: SQLite uses a partial index only for a query
    whose condition has the index's own, and a parameter never matches a literal (the ORM's
    filter read every row of the task name instead). A shortcut into Django's internals: the
    constraint's ``_get_condition_sql``, as the schema editor writes the index; guarded by
    tests/db/test_unique_scopes.py, which reads the plan of the lookup on both databases.
    """
    built = _unique_held.get(type(connection))
    if built is None:
        constraint = next(
            c
            for c in Task._meta.constraints
            if isinstance(c, UniqueConstraint) and c.name == "jobs_task_unique_while"
        )
        editor = connection.SchemaEditorClass(connection)  # its quote_value only, never entered
        # Django's own, absent from its stubs (see the docstring).
        condition = constraint._get_condition_sql(Task, editor)  # type: ignore[attr-defined]
        built = condition.replace("%", "%%")
        _unique_held[type(connection)] = built
    return built


def take_unique_hold(connection) -> str:
    """Hold a unique key for a period, unless a hold of it has not expired yet; ``RETURNING
    task_id`` (one row: taken; none: held). Parameters: name, key, task_id, expires_at, now.

    One statement the database decides: racing enqueues of one key wait on the unique index for
    the first to commit, then find its hold unexpired (PostgreSQL re-reads the latest row for
    the ``DO UPDATE ... WHERE``; SQLite has one writer at a time).
    """
    table = connection.ops.quote_name(UniqueHold._meta.db_table)
    return f"""
        INSERT INTO {table} (name, {connection.ops.quote_name("key")}, task_id, expires_at)
        VALUES (%s, %s, %s, %s)
        ON CONFLICT (name, {connection.ops.quote_name("key")}) DO UPDATE
            SET task_id = excluded.task_id, expires_at = excluded.expires_at
            WHERE {table}.expires_at <= %s
        RETURNING task_id
    """


# Reading --------------------------------------------------------------------------------------


def distinct_values(connection, column: str) -> str:
    """Every distinct value of ``column`` of the task table, sorted; no parameters.

    SELECT DISTINCT reads every row; this walks the index from one value to the next instead,
    so it costs one index probe per distinct value.
    """
    table = task_table(connection)
    col = connection.ops.quote_name(column)
    return f"""
        WITH RECURSIVE t(v) AS (
            SELECT (SELECT {col} FROM {table} ORDER BY {col} LIMIT 1)
            UNION ALL
            SELECT (SELECT {col} FROM {table} WHERE {col} > t.v ORDER BY {col} LIMIT 1)
            FROM t WHERE t.v IS NOT NULL
        )
        SELECT v FROM t WHERE v IS NOT NULL
    """
