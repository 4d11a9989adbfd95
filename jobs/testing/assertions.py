"""Asserting what a test enqueued: ``enqueued``, ``assert_enqueued``, ``assert_not_enqueued``."""

import json

from jobs.models import Task
from jobs.states import Status
from jobs.tasks.django_api import DjangoTask
from jobs.tasks.payload import encode_payload

ANY = object()  # a criterion not given: any value matches

# The tasks listed when an assertion fails, at most.
SHOWN = 20


def enqueued(
    task=None,
    *,
    args=None,
    kwargs=None,
    owner=ANY,
    queue: str | None = None,
    status=None,
) -> list[Task]:
    """The task rows matching every criterion given, oldest first.

    ``task`` is a task (declared with ``@jobs.task`` or Django's ``@task``) or its dotted path.
    ``args`` (a list or tuple) and ``kwargs`` (a dict) match the stored arguments exactly, as
    JSON (a tuple is a list). ``owner`` is a user, a user's id, or None for tasks nobody owns.
    ``status`` is one status or a list of them; rows of every status match by default, so a
    task already run still counts as enqueued.
    """
    rows = Task.objects.order_by("created_at", "id")
    if task is not None:
        name, backend = _name_of(task)
        rows = rows.filter(name=name)
        if backend is not None:
            rows = rows.filter(backend=backend)
    if queue is not None:
        rows = rows.filter(queue=queue)
    if owner is not ANY:
        rows = rows.filter(owner=None) if owner is None else rows.filter(owner=_pk(owner))
    if status is not None:
        statuses = [status] if isinstance(status, str) else list(status)
        unknown = [one for one in statuses if one not in Status.values]
        if unknown:  # a typo would match nothing, and assert_not_enqueued would always pass
            raise ValueError(
                f"status {unknown[0]!r} is not a task status: one of {', '.join(Status.values)}."
            )
        rows = rows.filter(status__in=statuses)
    expected = _stored(args, kwargs)
    return [row for row in rows if _matches(row, expected)]


def assert_enqueued(task=None, *, count: int | None = None, **criteria) -> list[Task]:
    """Assert that tasks matching the criteria (see ``enqueued``) were enqueued; return them.

    With ``count``, exactly that many; without, at least one. A failure lists what was
    enqueued, so the difference shows.
    """
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
        # "1" would never equal a length, and -1 would read "Expected -1 tasks": a test's typo.
        raise ValueError(f"count must be a whole number from 0, or None, not {count!r}.")
    found = enqueued(task, **criteria)
    if (len(found) != count) if count is not None else not found:
        wanted = "no" if count == 0 else (f"{count}" if count is not None else "at least one")
        raise AssertionError(
            f"Expected {wanted} task{'s' if count not in (None, 0, 1) else ''} matching "
            f"{_criteria(task, criteria)}, found {len(found)}.\n{_listing(task)}"
        )
    return found


def assert_not_enqueued(task=None, **criteria):
    """Assert that no task matching the criteria (see ``enqueued``) was enqueued."""
    assert_enqueued(task, count=0, **criteria)


def _name_of(task) -> tuple[str, str | None]:
    """The stored name of ``task`` (its dotted path), and its backend alias (None: any)."""
    if isinstance(task, str):
        return task, None
    if not isinstance(task, DjangoTask):
        raise TypeError(f"Pass a task or a task's name, not {task!r}.")
    return task.module_path, task.backend


def _pk(owner):
    return getattr(owner, "pk", owner)


def _stored(args, kwargs):
    """The given arguments as the payload stores them (JSON), or None where not given."""
    if args is None and kwargs is None:
        return None, None
    _payload, text = encode_payload([] if args is None else args, {} if kwargs is None else kwargs)
    stored = json.loads(text)
    return (
        None if args is None else stored["args"],
        None if kwargs is None else stored["kwargs"],
    )


def _matches(row: Task, expected) -> bool:
    args, kwargs = expected
    return (args is None or row.args == args) and (kwargs is None or row.kwargs == kwargs)


def _criteria(task, criteria: dict) -> str:
    shown = [f"task={_name_of(task)[0]!r}"] if task is not None else []
    for key, value in criteria.items():
        if value is ANY or (value is None and key != "owner"):
            continue  # not given
        shown.append(f"{key}={_pk(value) if key == 'owner' else value!r}")
    return ", ".join(shown) or "anything"


def _listing(task) -> str:
    """The tasks enqueued, of ``task`` if given, else all, one a line (the last ``SHOWN``)."""
    rows = Task.objects.order_by("-created_at", "-id")
    if task is not None:
        rows = rows.filter(name=_name_of(task)[0])
    total = rows.count()
    if not total:
        return "Nothing was enqueued" + (" of that task." if task is not None else ".")
    lines = [
        f"  {row.name} args={row.args!r} kwargs={row.kwargs!r} queue={row.queue!r} "
        f"owner={row.owner_id!r} status={row.status}"
        for row in reversed(rows[:SHOWN])
    ]
    more = f" (the last {SHOWN} shown)" if total > SHOWN else ""
    return f"Enqueued{' of that task' if task is not None else ''}: {total}{more}\n" + "\n".join(
        lines
    )
