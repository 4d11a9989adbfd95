"""Why a task waits: the one place that says it, for the admin, the dashboard and the owner.

A waiting task (pending or retrying) is not taken by a worker for one or more of these reasons:
it is due later (``run_after`` in the future: a delay, a snooze or a retry's backoff), its
concurrency key already has ``concurrency_limit`` running tasks, its queue is paused, or its task
type is paused (``jobs.maintenance.pausing``). It may also have a deadline (``expires_at``) after
which it never starts. ``why_waiting`` reads one task (at most two queries: the running count
of its key, the pauses of its queue and its type), ``why_waiting_many`` a page of tasks
(two queries in all, whatever the number of rows), ``held_by_keys`` the dashboard's figures.

Two kinds of words: the operator's (``operator_lines``, ``compact_text``) name the key; the
owner's (``owner_message``) never do, since a key may hold another customer's id.
"""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Max
from django.utils import timezone

from jobs.humanize import moment_text, seconds_text
from jobs.maintenance import pausing
from jobs.models import Task
from jobs.states import CLAIMABLE, Status

# Not statuses: the reasons' codes, as the status view's JSON spells them.
DUE_LATER = "due_later"
CONCURRENCY = "concurrency"
QUEUE_PAUSED = "queue_paused"
TASK_TYPE_PAUSED = "task_type_paused"


@dataclass(frozen=True)
class Waiting:
    """Why one waiting task is not running (``reasons``, in the order they are shown)."""

    now: datetime
    due_at: datetime | None = None  # run_after, when still to come
    retry: bool = False  # due later because a retry waits out its backoff
    key: str | None = None  # the concurrency key, when it holds the task
    running: int = 0
    limit: int | None = None
    queue: str = ""
    queue_paused: bool = False
    name: str = ""
    task_type_paused: bool = False
    expires_at: datetime | None = None

    @property
    def held(self) -> bool:
        return self.key is not None

    @property
    def reasons(self) -> list[str]:
        found = [DUE_LATER] if self.due_at else []
        found += [CONCURRENCY] if self.held else []
        found += [QUEUE_PAUSED] if self.queue_paused else []
        return found + ([TASK_TYPE_PAUSED] if self.task_type_paused else [])

    @property
    def paused(self) -> bool:
        return self.queue_paused or self.task_type_paused


def _reason(task: Task, now, running: dict[str, int], paused: set[str], paused_types: set[str]
            ) -> Waiting | None:  # fmt: skip
    if task.status not in CLAIMABLE:
        return None
    key, limit = task.concurrency_key, task.concurrency_limit
    count = running.get(key, 0) if key is not None else 0
    held = key is not None and limit is not None and count >= limit
    due_later = task.run_after is not None and task.run_after > now
    return Waiting(
        now=now,
        due_at=task.run_after if due_later else None,
        retry=due_later and task.status == Status.RETRYING,
        key=key if held else None,
        running=count,
        limit=limit if held else None,
        queue=task.queue,
        queue_paused=task.queue in paused,
        name=task.name,
        task_type_paused=task.name in paused_types,
        expires_at=task.expires_at,
    )


def _running_by_key(keys) -> dict[str, int]:
    keys = sorted({key for key in keys if key is not None})
    if not keys:
        return {}
    rows = (
        Task.objects.filter(status=Status.RUNNING, concurrency_key__in=keys)
        .values_list("concurrency_key")
        .annotate(count=Count("id"))
        .order_by()
    )
    return dict(rows)


def _waiting(tasks) -> list[Task]:
    return [task for task in tasks if task.status in CLAIMABLE]


def why_waiting(task: Task, *, now=None) -> Waiting | None:
    """Return why ``task`` waits, or None if it is not waiting (at most two queries)."""
    return why_waiting_many([task], now=now).get(task.pk)


def why_waiting_many(tasks, *, now=None) -> dict:
    """Return ``{pk: Waiting}`` for the waiting ones of ``tasks``: two queries at most in all."""
    now = now or timezone.now()
    waiting = _waiting(tasks)
    if not waiting:
        return {}
    running = _running_by_key(task.concurrency_key for task in waiting)
    paused, paused_types = pausing.paused_of(
        {task.queue for task in waiting}, {task.name for task in waiting}
    )
    found = {task.pk: _reason(task, now, running, paused, paused_types) for task in waiting}
    return {pk: reason for pk, reason in found.items() if reason is not None}


def shown_key(key: str) -> str:
    """A key as the operator reads it: a NUL, a newline or any unprintable character escaped
    (``\\x00``), so that nothing hides in it; HTML is escaped by whoever renders it."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in key)


@dataclass(frozen=True)
class HeldKey:
    key: str
    waiting: int
    running: int
    limit: int

    @property
    def shown(self) -> str:
        return shown_key(self.key)


@dataclass(frozen=True)
class HeldByKeys:
    """Due waiting tasks held by their concurrency key, apart from those waiting for a worker."""

    held: int
    keys: list[HeldKey]  # the keys holding the most tasks, most first


def held_by_keys(*, now=None, top: int = 10) -> HeldByKeys:
    """Count due waiting tasks whose key is at its limit; two grouped queries.

    A held key has at least one running task, so the waiting rows are read only for the keys of
    running tasks (as many as the workers run at once), never for every key in the table.
    """
    now = now or timezone.now()
    running = dict(
        Task.objects.filter(status=Status.RUNNING, concurrency_key__isnull=False)
        .values_list("concurrency_key")
        .annotate(count=Count("id"))
        .order_by()
    )
    if not running:
        return HeldByKeys(held=0, keys=[])
    rows = (
        Task.objects.due(now)
        .filter(concurrency_key__in=sorted(running))
        .values_list("concurrency_key")
        .annotate(count=Count("id"), limit=Max("concurrency_limit"))
        .order_by()
    )
    keys = [
        HeldKey(key=key, waiting=count, running=running[key], limit=limit)
        for key, count, limit in rows
        if limit is not None and running[key] >= limit
    ]
    keys.sort(key=lambda held: (-held.waiting, held.key))
    return HeldByKeys(held=sum(held.waiting for held in keys), keys=keys[:top])


# Words ------------------------------------------------------------------------------------------


def _in(at, now) -> str:
    return seconds_text(max(0, round((at - now).total_seconds())))


def due_text(waiting: Waiting) -> str:
    at = waiting.due_at
    assert at is not None
    what = "Retry due" if waiting.retry else "Due"
    return f"{what} at {moment_text(at)} (in {_in(at, waiting.now)})"


def expiry_text(waiting: Waiting) -> str:
    at = waiting.expires_at
    assert at is not None
    if at <= waiting.now:
        return f"Expired at {moment_text(at)}: will be cancelled, never started"
    return f"Expires in {_in(at, waiting.now)} (at {moment_text(at)})"


def operator_lines(waiting: Waiting) -> list[str]:
    """The admin's lines, key included (plain text: the caller escapes it)."""
    lines = [due_text(waiting)] if waiting.due_at else []
    if waiting.held:
        key = shown_key(waiting.key or "")
        lines.append(f"Held by concurrency key {key}: {waiting.running} running of {waiting.limit}")
    if waiting.queue_paused:
        lines.append(f"Queue {waiting.queue} paused")
    if waiting.task_type_paused:
        lines.append(f"Task type {waiting.name} paused")
    if waiting.expires_at:
        lines.append(expiry_text(waiting))
    return lines or ["Due: waiting for a free worker"]


def compact_text(waiting: Waiting) -> str:
    """The changelist's short note: "held by account:42 (1/1)", "queue paused", …"""
    if waiting.queue_paused:
        return "queue paused"
    if waiting.task_type_paused:
        return "task type paused"
    if waiting.held:
        return f"held by {shown_key(waiting.key or '')} ({waiting.running}/{waiting.limit})"
    if waiting.due_at:
        return f"waiting until {moment_text(waiting.due_at)}"
    return ""


def owner_message(waiting: Waiting) -> str:
    """The owner's words: no key, no other task's detail."""
    if waiting.due_at and not waiting.retry:
        text = f"Waiting until {moment_text(waiting.due_at)}."
    elif waiting.due_at:
        text = f"Will try again at {moment_text(waiting.due_at)}."
    elif waiting.held:
        text = "Waiting: another task of the same kind is running; this one starts after it."
    elif waiting.queue_paused:
        text = "Waiting: processing is paused for now."
    elif waiting.task_type_paused:
        text = "Waiting: this kind of task is paused for now; it starts once it is resumed."
    else:
        text = "Waiting to start…"
    return text


def owner_expiry(waiting: Waiting) -> str:
    at = waiting.expires_at
    return f"Will be cancelled if not started by {moment_text(at)}." if at else ""
