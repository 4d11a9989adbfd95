"""Distinct errors of a window, for the admin's errors page: one grouped query per page."""

import uuid
from datetime import UTC, datetime

from django.db import connections, router

from jobs import sql
from jobs.error_records import moment_entry
from jobs.metrics.results import ErrorGroup
from jobs.metrics.window import as_window, now_or_current
from jobs.models import Task
from jobs.sql import errors as statements


def error_groups(
    *, now=None, window=None, limit: int = 100, name: str | None = None
) -> list[ErrorGroup]:
    """Group the failed attempts of the window by task name, exception class and origin.

    Every attempt counts, retried ones too (an entry of ``error_details`` whose ``at`` is in
    ``[now - window, now]``), with the number of tasks they belong to; the most attempts
    first, at most ``limit`` groups, each with its latest attempt's message and traceback.
    With ``name``, the errors of that task name only (its page in the admin).
    """
    now, window = now_or_current(now), as_window(window)
    start = now - window
    connection = connections[router.db_for_read(Task)]
    text, params = statements.error_groups_sql(
        connection, sql.dialect(connection), by_name=name is not None
    )
    params += [start, moment_entry(start), moment_entry(now), *([name] if name is not None else [])]
    params.append(limit)
    with connection.cursor() as cursor:
        cursor.execute(text, params)
        rows = cursor.fetchall()
    return [
        ErrorGroup(
            name=name,
            exception=exception,
            origin=origin,
            tasks=tasks,
            attempts=attempts,
            first_at=_moment(first_at),
            last_at=_moment(last_at),
            # PostgreSQL returns a UUID, SQLite 32 hex digits: the same canonical text.
            last_task_id=str(uuid.UUID(str(task_id))),
            last_message=message,
            last_traceback=traceback,
        )
        for (
            name,
            exception,
            origin,
            tasks,
            attempts,
            first_at,
            last_at,
            task_id,
            message,
            traceback,
        ) in rows
    ]


def _moment(text) -> datetime | None:
    # An entry's "at" as jobs writes it; None for anything else a row may hold.
    try:
        moment = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
