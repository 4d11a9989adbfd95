"""Retry and cancel over a selection of tasks, set-based, with a report of what happened.

Each action is one conditional update per chunk of rows (``jobs.transitions``), so a task that
a worker finishes while the action runs is either moved or reported skipped, never overwritten.
The skip reasons come from one grouped count of the selected rows the action did not touch,
read after the update: they describe what really stopped each row, races included.

A selection is walked in chunks of ``CHUNK_SIZE`` ids in primary-key order (keyset, not
OFFSET), so an action over 100,000 tasks holds one chunk of ids and rows in memory at a time.
"""

from dataclasses import dataclass, field

from django.db.models import Count, Q
from django.utils import timezone

from jobs import states, transitions
from jobs.models import Task
from jobs.states import Status

# Ids per statement: few enough for SQLite's parameter limit and for the rows that the signals of
# one chunk load, many enough that 100,000 tasks take 100 round trips.
CHUNK_SIZE = 1000

RETRY_REASONS: dict[str, str] = {
    Status.PENDING: "already waiting",
    Status.RETRYING: "already waiting to retry",
    Status.RUNNING: "already running",
    Status.SUCCEEDED: "already succeeded",
}
CANCEL_REASONS: dict[str, str] = {
    Status.SUCCEEDED: "already succeeded",
    Status.FAILED: "already failed",
    Status.CANCELLED: "already cancelled",
}
RUN_NOW_REASONS: dict[str, str] = {
    Status.RUNNING: "already running",
    Status.SUCCEEDED: "already succeeded",
    Status.FAILED: "already failed",
    Status.CANCELLED: "already cancelled",
}
RUN_NOW = "set to run now"  # the verb of its report
# A row in a source status that the update did not move was changed by a worker in between.
RACED = "changed by a worker meanwhile"


@dataclass(frozen=True)
class ActionReport:
    """What an action did: how many rows moved, and why the others did not."""

    done: int
    verb: str  # "requeued", "cancelled"
    requested: int = 0  # running tasks asked to stop (cancel only)
    skipped: dict[str, int] = field(default_factory=dict)

    @property
    def skipped_count(self) -> int:
        return sum(self.skipped.values())

    def message(self) -> str:
        """Say it in one line: "48 tasks requeued; 2 skipped: already running"."""
        parts = [f"{_tasks(self.done)} {self.verb}"]
        if self.requested:
            parts.append(f"{_tasks(self.requested, 'running task')} asked to stop")
        if self.skipped:
            if len(self.skipped) == 1:
                reasons = next(iter(self.skipped))
            else:
                # The commonest reason first; ties by name, so the wording is stable.
                ordered = sorted(self.skipped.items(), key=lambda item: (-item[1], item[0]))
                reasons = ", ".join(f"{n:,} {reason}" for reason, n in ordered)
            parts.append(f"{self.skipped_count:,} skipped: {reasons}")
        return "; ".join(parts)


def _tasks(n: int, noun: str = "task") -> str:
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def retry(queryset, *, now=None) -> ActionReport:
    """Requeue the failed and cancelled tasks of ``queryset``; report the others with reasons."""
    now = now or timezone.now()
    done = sum(transitions.requeue_many(chunk, now=now) for chunk in chunks(queryset))
    skipped = _reasons(queryset, now, states.REQUEUE.sources, RETRY_REASONS)
    return ActionReport(done=done, verb="requeued", skipped=skipped)


def cancel(queryset, *, now=None, by=None) -> ActionReport:
    """Cancel waiting tasks, ask running ones to stop; report finished ones with reasons.
    ``by``: the operator acting (the owner's page says who cancelled)."""
    now = now or timezone.now()
    cancelled = requested = 0
    for chunk in chunks(queryset):
        counts = transitions.cancel_many(chunk, now=now, by=by)
        cancelled, requested = cancelled + counts.cancelled, requested + counts.requested
    reasons: dict[str, str] = {**CANCEL_REASONS, "stop requested": "cancellation already requested"}
    skipped = _reasons(queryset, now, states.CANCELLABLE, reasons)
    verb = "cancelled"  # not a status: the verb of the report
    return ActionReport(done=cancelled, verb=verb, requested=requested, skipped=skipped)


def run_now(queryset, *, now=None) -> ActionReport:
    """Make the waiting tasks due later due now; report the others (already due, running,
    finished) with reasons."""
    now = now or timezone.now()
    done = sum(transitions.run_now_many(chunk, now=now) for chunk in chunks(queryset))
    skipped: dict[str, int] = {}
    for status, n, _ in _by_status(queryset.exclude(updated_at=now)):
        # A waiting task not moved was due already (or claimed and released meanwhile).
        _add(skipped, RUN_NOW_REASONS.get(status, "already due"), n)
    return ActionReport(done=done, verb=RUN_NOW, skipped=skipped)


def chunks(queryset, size: int = CHUNK_SIZE):
    """Yield the rows of ``queryset`` as querysets of at most ``size`` ids, in key order."""
    ids = queryset.order_by("pk").values_list("pk", flat=True)
    last = None
    while True:
        batch = list((ids if last is None else ids.filter(pk__gt=last))[:size])
        if not batch:
            return
        yield Task.objects.filter(pk__in=batch)
        last = batch[-1]


def plan(verb: str, queryset) -> ActionReport:
    """Say what ``retry`` ("requeued"), ``cancel`` ("cancelled") or ``run_now`` would do, in one
    grouped count (two for run now: the tasks due later, then the others).

    The report of an action not yet run: ``done`` and ``requested`` are the tasks it would move
    and ask to stop, ``skipped`` the others, with the reasons the action would give.
    """
    if verb == RUN_NOW:
        return _plan_run_now(queryset)
    moves = (states.REQUEUE if verb == "requeued" else states.CANCEL).sources
    done = requested = 0
    skipped: dict[str, int] = {}
    for status, n, stopping in _by_status(queryset):
        if status in moves:
            done += n
        elif verb == "cancelled" and status in states.CANCELLABLE:  # not a status: a verb
            requested += n - stopping
            _add(skipped, "cancellation already requested", stopping)
        else:
            reasons = RETRY_REASONS if verb == "requeued" else CANCEL_REASONS
            _add(skipped, reasons.get(status, f"already {status}"), n)
    return ActionReport(done=done, verb=verb, requested=requested, skipped=skipped)


def _plan_run_now(queryset) -> ActionReport:
    later = Q(status__in=sorted(states.CLAIM.sources), run_after__gt=timezone.now())
    skipped: dict[str, int] = {}
    for status, n, _ in _by_status(queryset.exclude(later)):
        _add(skipped, RUN_NOW_REASONS.get(status, "already due"), n)
    return ActionReport(done=queryset.filter(later).count(), verb=RUN_NOW, skipped=skipped)


def _by_status(queryset):
    """Rows of (status, how many, how many asked to stop) of ``queryset``: one grouped count."""
    return (
        queryset.order_by()
        .values_list("status")
        .annotate(n=Count("*"), stopping=Count("pk", filter=Q(cancel_requested_at__isnull=False)))
    )


def _reasons(queryset, now, sources, reasons) -> dict[str, int]:
    # Rows this action moved carry updated_at == now; the rest of the selection was skipped.
    found: dict[str, int] = {}
    for status, n, stopping in _by_status(queryset.exclude(updated_at=now)):
        if status == Status.RUNNING and "stop requested" in reasons:
            # cancel_many asks once; a task already asked is skipped, others raced.
            _add(found, reasons["stop requested"], stopping)
            _add(found, RACED, n - stopping)
        elif status in sources:
            _add(found, RACED, n)
        else:
            _add(found, reasons.get(status, f"already {status}"), n)
    return found


def _add(found, reason, n):
    if n:
        found[reason] = found.get(reason, 0) + n
