"""The errors page's statement: every failed attempt of a window, grouped, in one query.

The attempts are the entries of ``error_details`` (one per failed attempt, ``jobs.error_records``),
unnested by the database: ``jsonb_array_elements`` on PostgreSQL, ``json_each`` on SQLite; each
dialect gives its ``ERROR_ENTRIES`` (the join) and ``entry_field`` (a text field of one entry).
An entry's moment is compared as text: ``at`` is ISO 8601 in UTC to the microsecond
(``jobs.error_records.moment_entry``), which sorts as the moments do, and text never fails to
compare, whatever an odd row holds (a cast of a malformed ``at`` would fail the whole page).
"""

from jobs.states import TERMINAL, Status

# Where an attempt of the window can be: a task finished in the window (the (status,
# finished_at) index), or one not finished (retrying, running, or pending again after a requeue
# or a release): the cost is the window's traffic plus the tasks waiting now, not the table's.
UNFINISHED = sorted({Status.PENDING, Status.RETRYING, Status.RUNNING})
FINISHED = sorted(TERMINAL)

COLUMNS = (
    "name",
    "exception",
    "origin",
    "tasks",
    "attempts",
    "first_at",
    "last_at",
    "last_task_id",
    "last_message",
    "last_traceback",
)


def error_groups_sql(connection, dialect, *, by_name: bool = False) -> tuple[str, list]:
    """The statement returning ``COLUMNS``, one row per (task name, exception class, origin),
    the most attempts first; its parameters but the window's are filled in: add
    ``[start, start_text, end_text, limit]`` (``start`` a datetime, for ``finished_at``), with
    the task name before ``limit`` if ``by_name`` (the ``(name, ...)`` index narrows the rows)."""
    quote = connection.ops.quote_name
    table = quote("jobs_task")

    def field(name: str) -> str:
        return dialect.entry_field(name)

    unfinished = ", ".join(["%s"] * len(UNFINISHED))
    finished = ", ".join(["%s"] * len(FINISHED))
    # Old entries have no origin (recorded before it was): they group by their exception alone.
    sql = f"""
        WITH attempts AS (
            SELECT task.id AS task_id, task.name AS name,
                   COALESCE({field("exception")}, '') AS exception,
                   COALESCE({field("origin")}, '') AS origin,
                   {field("at")} AS at,
                   COALESCE({field("message")}, '') AS message,
                   COALESCE({field("traceback")}, '') AS traceback
            FROM {table} AS task {dialect.ERROR_ENTRIES}
            WHERE (task.status IN ({unfinished})
                   OR (task.status IN ({finished}) AND task.finished_at >= %s))
              AND {field("at")} >= %s AND {field("at")} <= %s
              {"AND task.name = %s" if by_name else ""}
        ),
        grouped AS (
            SELECT name, exception, origin, COUNT(DISTINCT task_id) AS tasks,
                   COUNT(*) AS attempts, MIN(at) AS first_at, MAX(at) AS last_at
            FROM attempts
            GROUP BY name, exception, origin
            ORDER BY attempts DESC, last_at DESC, name, exception, origin
            LIMIT %s
        ),
        latest AS (
            SELECT task_id, name, exception, origin, message, traceback,
                   ROW_NUMBER() OVER (
                       PARTITION BY name, exception, origin ORDER BY at DESC, task_id
                   ) AS place
            FROM attempts
        )
        SELECT grouped.name, grouped.exception, grouped.origin, grouped.tasks,
               grouped.attempts, grouped.first_at, grouped.last_at,
               latest.task_id, latest.message, latest.traceback
        FROM grouped JOIN latest
          ON latest.place = 1 AND latest.name = grouped.name
             AND latest.exception = grouped.exception AND latest.origin = grouped.origin
        ORDER BY grouped.attempts DESC, grouped.last_at DESC, grouped.name,
                 grouped.exception, grouped.origin
    """
    return sql, [*UNFINISHED, *FINISHED]


def has_exception_sql(connection, dialect) -> str:
    """A condition on a task row, with one parameter (an exception class): true when one of its
    attempts raised that exception. For the task list's filter, beside a name: an index on the
    name narrows the rows, and this reads only theirs."""
    table = connection.ops.quote_name("jobs_task")
    return f"""EXISTS (
        SELECT 1 FROM {table} AS task {dialect.ERROR_ENTRIES}
        WHERE task.id = {table}.id AND {dialect.entry_field("exception")} = %s
    )"""
