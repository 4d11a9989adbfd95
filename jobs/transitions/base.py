"""The guarded UPDATE every transition is made of, and the settling of what waits for a task
that reached a final status (``jobs.workflows``).
"""

import logging
import uuid

from django.db import connections, router, transaction
from django.db.models import Q

from jobs import signals, sql, states
from jobs.models import Task

logger = logging.getLogger(__name__)

CANCELLED_MESSAGE = "Cancelled."


def _apply(transition: states.Transition, queryset, values: dict, now) -> int:
    """Move every row of ``queryset`` that is in an allowed source status; return how many."""
    values = {"status": transition.target, "updated_at": now, **values}
    return queryset.filter(status__in=sorted(transition.sources)).update(**values)


def _apply_many(transition: states.Transition, queryset, values: dict, now, *, moved_rows=None):
    """Like ``_apply``; return how many rows moved (``_move_many``)."""
    return len(_move_many(transition, queryset, values, now, moved_rows=moved_rows))


def _move_many(transition: states.Transition, queryset, values: dict, now, *, moved_rows=None):
    """Like ``_apply``, then send the signals of every row that moved (if anyone listens);
    return the ids of the rows it moved, as its UPDATE returns them (never found again by a
    column it set: another process may have set it too, at the same instant).

    A row moved to a final status settles what waits for it (``jobs.workflows``) in the same
    transaction; or, given a list ``moved_rows``, adds its workflow columns there for the
    caller to settle (``jobs.workflows.settling`` walks a cascade as a loop, not a recursion).
    """
    ids = list(queryset.filter(status__in=sorted(transition.sources)).values_list("pk", flat=True))
    moved: list = []
    final = transition.target in states.TERMINAL
    for start in range(0, len(ids), 5000):  # SQLite caps the parameters of one statement
        chunk = ids[start : start + 5000]
        if final:
            with transaction.atomic(using=_using()):
                these = _update_returning(transition, chunk, values, now)
                rows = _participants(Task.objects.filter(pk__in=these))
                if moved_rows is None:
                    _settle(rows, now)
                else:
                    moved_rows.extend(rows)
        else:
            these = _update_returning(transition, chunk, values, now)
        moved += these
        if these and signals.has_listeners(transition.target):
            for task in Task.objects.filter(pk__in=these):
                signals.send_status(task)
    return moved


def _update_returning(transition: states.Transition, ids, values: dict, now) -> list:
    """Move the rows ``ids`` that are in an allowed source status; return the ids it moved."""
    return _update_rows_returning(transition, Task.objects.filter(pk__in=ids), values, now)


def _update_rows_returning(transition: states.Transition, queryset, values: dict, now) -> list:
    """Move the rows of ``queryset`` that are in an allowed source status, in one statement;
    return the ids it moved."""
    rows = queryset.filter(status__in=sorted(transition.sources))
    values = {"status": transition.target, "updated_at": now, **values}
    statement, params = sql.common.update_returning_ids(rows, values, using=_using())
    with connections[_using()].cursor() as cursor:
        cursor.execute(statement, params)
        return [_as_uuid(row[0]) for row in cursor.fetchall()]


def _apply_to_attempt(transition, task: Task, values: dict, now, *, send=True) -> bool:
    """Apply ``transition`` to the attempt of ``task`` that this process claimed, if still its.

    To a final status, in one transaction with settling what waits for it (``jobs.workflows``):
    its workflow columns are read again after the UPDATE, which holds the row, so a dependent
    enqueued while it ran is seen.
    """
    rows = Task.objects.filter(pk=task.pk, attempts=task.attempts, worker_id=task.worker_id)
    if transition.target in states.TERMINAL:
        with transaction.atomic(using=_using()):
            applied = _apply(transition, rows, values, now) == 1
            if applied:
                _settle(_participants(Task.objects.filter(pk=task.pk)), now)
    else:
        applied = _apply(transition, rows, values, now) == 1
    if applied:
        task.status = transition.target
        for name, value in values.items():
            if not hasattr(value, "resolve_expression"):
                setattr(task, name, value)
        if send:
            signals.send_status(task)
    else:
        logger.warning(
            "transition refused transition=%s task_id=%s attempt=%s worker_id=%s",
            transition.name,
            task.pk,
            task.attempts,
            task.worker_id,
        )
    return applied


def _using() -> str:
    return router.db_for_write(Task)


def _run(statement, transition, rows, now) -> list:
    """Run the attempts UPDATE ``statement`` builds for ``transition`` and ``rows``; return the
    ids it moved."""
    return [row[0] for row in _run_rows(statement, transition, rows, now)]


def _run_rows(statement, transition, rows, now) -> list:
    """Like ``_run``; return the rows its statement returns."""
    sql_text, params = statement(connections[_using()], transition, rows, now=now)
    with connections[_using()].cursor() as cursor:
        cursor.execute(sql_text, params)
        return cursor.fetchall()


# The columns a settling reads of each task that reached a final status (jobs.workflows), as
# the statement recording successes returns them (``jobs.sql.common.SUCCEEDED_COLUMNS``).
_WORKFLOW_COLUMNS = ("pk", "workflow_id", "workflow_role", "has_dependents")
_IN_WORKFLOW = Q(workflow__isnull=False) | Q(has_dependents=True)


def _participants(queryset) -> list[tuple]:
    """The rows of ``queryset`` that a workflow or a dependent waits for."""
    return list(queryset.filter(_IN_WORKFLOW).values_list(*_WORKFLOW_COLUMNS))


def _settle(rows, now):
    """Release, cancel or complete what waits for ``rows`` (just final), in this transaction."""
    waited_for = [row for row in rows if row[1] is not None or row[3]]
    if waited_for:
        from jobs.workflows import settling  # a cycle: it calls this module

        settling.settle(waited_for, now=now)


def _as_uuid(task_id) -> uuid.UUID:
    # PostgreSQL returns ids as UUIDs, SQLite as hex strings.
    return task_id if isinstance(task_id, uuid.UUID) else uuid.UUID(str(task_id))
