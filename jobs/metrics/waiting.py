"""Why a task waits: the one place that says it, for the admin, the dashboard and the owner.

A waiting task (pending or retrying) is not taken by a worker for one or more of these reasons:
it is due later (``run_after`` in the future: a delay, a snooze or a retry's backoff), its
concurrency key already has ``concurrency_limit`` running tasks, its rate key has started its
limit in the current window (until the window ends), its queue is paused, or its task type is
paused (``jobs.maintenance.pausing``). It may also have a deadline (``expires_at``) after which
it never starts. ``why_waiting`` reads one task (at most three queries: the running count of its
key, its rate window, the pauses of its queue and its type), ``why_waiting_many`` a page of
tasks (three queries in all, whatever the number of rows), ``held_by_keys`` and
``held_by_rates`` the dashboard's figures.

Two kinds of words: the operator's (``operator_lines``, ``compact_text``) name the key; the
owner's (``owner_message``) never do, since a key may hold another customer's id.
"""

import math
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, F, Max
from django.utils import timezone

from jobs.humanize import moment_text, seconds_text
from jobs.maintenance import pausing
from jobs.models import RateWindow, Task
from jobs.states import CLAIMABLE, Status
from jobs.tasks.rates import Rate

# Not statuses: the reasons' codes, as the status view's JSON spells them.
DUE_LATER = "due_later"
CONCURRENCY = "concurrency"
RATE_LIMITED = "rate_limited"
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
    # The rate key, when its window is full: until when, and the limit.
    rate_key: str | None = None
    rate_until: datetime | None = None
    rate: Rate | None = None
    rate_started: int = 0

    @property
    def held(self) -> bool:
        return self.key is not None

    @property
    def rate_limited(self) -> bool:
        return self.rate_until is not None

    @property
    def reasons(self) -> list[str]:
        found = [DUE_LATER] if self.due_at else []
        found += [CONCURRENCY] if self.held else []
        found += [RATE_LIMITED] if self.rate_limited else []
        found += [QUEUE_PAUSED] if self.queue_paused else []
        return found + ([TASK_TYPE_PAUSED] if self.task_type_paused else [])

    @property
    def paused(self) -> bool:
        return self.queue_paused or self.task_type_paused


def full_window(window: RateWindow | None, count: int, period: int, now) -> bool:
    """Whether ``window`` leaves a task of ``count`` per ``period`` no room at ``now``, as the
    claim decides it (``jobs.sql``): the same period, not behind now's window, full."""
    if window is None or window.period != period:
        return False
    current = math.floor(now.timestamp() / period) * period
    return window.window_start >= current and window.started >= count


def _reason(task: Task, now, running: dict[str, int], paused: set[str], paused_types: set[str],
            windows) -> Waiting | None:  # fmt: skip
    if task.status not in CLAIMABLE:
        return None
    window = windows.get(task.rate_key) if task.rate_key is not None else None
    rate = None
    if task.rate_limit is not None and task.rate_period is not None:
        rate = Rate(task.rate_limit, task.rate_period)
    rate_full = rate is not None and full_window(window, rate.count, rate.period, now)
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
        rate_key=task.rate_key if rate_full else None,
        rate_until=window.opens_at if rate_full and window else None,
        rate=rate if rate_full else None,
        rate_started=window.started if rate_full and window else 0,
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


def _windows(keys) -> dict[str, RateWindow]:
    keys = sorted({key for key in keys if key is not None})
    if not keys:
        return {}
    return RateWindow.objects.in_bulk(keys)


def _waiting(tasks) -> list[Task]:
    return [task for task in tasks if task.status in CLAIMABLE]


def why_waiting(task: Task, *, now=None) -> Waiting | None:
    """Return why ``task`` waits, or None if it is not waiting (at most three queries)."""
    return why_waiting_many([task], now=now).get(task.pk)


def why_waiting_many(tasks, *, now=None) -> dict:
    """Return ``{pk: Waiting}`` for the waiting ones of ``tasks``: three queries at most in all."""
    now = now or timezone.now()
    waiting = _waiting(tasks)
    if not waiting:
        return {}
    running = _running_by_key(task.concurrency_key for task in waiting)
    paused, paused_types = pausing.paused_of(
        {task.queue for task in waiting}, {task.name for task in waiting}
    )
    windows = _windows(task.rate_key for task in waiting)
    found = {
        task.pk: _reason(task, now, running, paused, paused_types, windows) for task in waiting
    }
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


@dataclass(frozen=True)
class HeldRate:
    key: str
    waiting: int
    started: int
    rate: Rate
    until: datetime

    @property
    def shown(self) -> str:
        return shown_key(self.key)

    @property
    def until_text(self) -> str:
        return f"rate limited until {moment_text(self.until)}"


@dataclass(frozen=True)
class HeldByRates:
    """Due waiting tasks held back by a full rate window, apart from those waiting for a worker."""

    held: int
    keys: list[HeldRate]  # the keys holding the most tasks, most first


def held_by_rates(*, now=None, top: int = 10) -> HeldByRates:
    """Count due waiting tasks whose rate key's window is full; two queries.

    Only windows that end after ``now`` and are full can hold tasks back, so the waiting rows
    are counted for those keys alone (one row per key, not per task).
    """
    now = now or timezone.now()
    windows = {
        window.key: window
        for window in RateWindow.objects.filter(started__gte=F("rate_limit"))
        .annotate(opens=F("window_start") + F("period"))
        .filter(opens__gt=now.timestamp())
    }
    if not windows:
        return HeldByRates(held=0, keys=[])
    rows = (
        Task.objects.due(now)
        .filter(rate_key__in=sorted(windows))
        .values_list("rate_key", "rate_limit", "rate_period")
        .annotate(count=Count("id"))
        .order_by()
    )
    counts: dict[str, tuple[int, Rate]] = {}
    for key, count, period, waiting in rows:
        window = windows[key]
        if count is None or period is None or not full_window(window, count, period, now):
            continue
        seen = counts.get(key, (0, Rate(count, period)))
        counts[key] = (seen[0] + waiting, seen[1])
    keys = [
        HeldRate(key, waiting, windows[key].started, rate, windows[key].opens_at)
        for key, (waiting, rate) in counts.items()
    ]
    keys.sort(key=lambda held: (-held.waiting, held.key))
    return HeldByRates(held=sum(held.waiting for held in keys), keys=keys[:top])


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


def rate_text(waiting: Waiting) -> str:
    """Say the operator's line: "Rate limited until … (in 2 s): rate key partner:7, 10 started
    of 10 a second"."""
    at, rate = waiting.rate_until, waiting.rate
    assert at is not None
    assert rate is not None
    key = shown_key(waiting.rate_key or "")
    return (
        f"Rate limited until {moment_text(at)} (in {_in(at, waiting.now)}): rate key {key}, "
        f"{waiting.rate_started:,} started of {rate.words}"
    )


def operator_lines(waiting: Waiting) -> list[str]:
    """The admin's lines, key included (plain text: the caller escapes it)."""
    lines = [due_text(waiting)] if waiting.due_at else []
    if waiting.held:
        key = shown_key(waiting.key or "")
        lines.append(f"Held by concurrency key {key}: {waiting.running} running of {waiting.limit}")
    if waiting.rate_limited:
        lines.append(rate_text(waiting))
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
    if waiting.rate_limited:
        return f"rate limited until {moment_text(waiting.rate_until)}"
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
    elif waiting.rate_limited and waiting.rate is not None:
        text = (
            f"Waiting: tasks like this one are limited to {waiting.rate.words}; this one "
            f"starts at {moment_text(waiting.rate_until)} or soon after."
        )
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
