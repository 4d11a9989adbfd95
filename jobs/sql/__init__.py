"""The only code that writes SQL text; one module per database where the statements differ.

``dialect(connection)`` picks the module of the connection's database, the one place that asks
which database it is. Each such module (``postgresql``, ``sqlite``) defines the same names, so
that another database (MariaDB, say) is one more module and one more line in ``_DIALECTS``:

- flags: ``NAME``, ``LISTENS`` (LISTEN/NOTIFY wakes workers), ``ONE_WRITER`` (one writer at a
  time: claims run inline and wait out a busy database), ``CHECK_LIBRARY`` (this Python's
  library is the database: the system checks look at its version);
- claiming: ``claim_sql`` (its parameters: ``claim_params``), ``claim_lock``, ``claim_cursor``,
  ``claim_tasks``, ``is_busy``;
- outcomes: ``succeed_attempts`` (``unwaited=True``: only the tasks nothing waits for),
  ``release_attempts``;
- enqueue: ``inserts``, ``insert_many``;
- reading: ``percentiles_sql``, ``LAST_EXCEPTION``, ``planner_rows``, ``listen_sql``.

Each statement returns one kind of row, which its docstring names. What every database writes
alike is in ``common``. Migrations keep their own SQL, as Django has them. A statement
that changes a status writes the sources (its guard) and the target of a transition of
``jobs.states``; only ``jobs.transitions`` and ``jobs.worker.claiming`` run such statements, and
so decide which transition runs; ``tests/db/test_transitions.py`` checks it.
"""

from types import ModuleType

from django.db import connections

from jobs.sql import postgresql, sqlite

_DIALECTS = {"postgresql": postgresql, "sqlite": sqlite}


def dialect(connection) -> ModuleType:
    """The module of statements for ``connection`` (a connection or a database alias)."""
    if isinstance(connection, str):
        connection = connections[connection]
    try:
        return _DIALECTS[connection.vendor]
    except KeyError:
        raise NotImplementedError(
            f"jobs has no statements for the {connection.vendor!r} database; "
            f"it supports {', '.join(sorted(_DIALECTS))}."
        ) from None
