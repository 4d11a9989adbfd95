"""Deleting finished tasks once they are older than their status's retention.

Deletion goes in small batches, each its own short transaction, and each DELETE re-checks the
status and age it selected on: a task requeued between the select and the delete is kept. Only
``succeeded``, ``failed`` and ``cancelled`` tasks are ever deleted.
"""

import logging
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import cast

from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from jobs import limits
from jobs.conf import DEFAULTS, jobs_settings
from jobs.maintenance import rollups
from jobs.maintenance.locks import acquire_lock as acquire_lock
from jobs.maintenance.locks import release_lock as release_lock
from jobs.models import RateWindow, Task, UniqueHold
from jobs.states import TERMINAL

logger = logging.getLogger(__name__)

PRUNABLE = sorted(str(status) for status in TERMINAL)
LOCK_NAME = "prune"


@dataclass
class PruneReport:
    """What one pruning pass deleted (or, in a dry run, would delete), by status."""

    counts: dict = field(default_factory=dict)
    complete: bool = True  # False when a batch limit stopped the pass with rows left

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def retention(overrides=None) -> dict:
    """Return ``{status: timedelta or None}``: defaults, ``JOBS_PRUNE_AFTER``, ``overrides``.

    Raise ImproperlyConfigured naming the bad entry, so a typo never deletes the wrong rows.
    """
    setting = jobs_settings.PRUNE_AFTER
    if not isinstance(setting, dict):
        raise ImproperlyConfigured(
            f"JOBS_PRUNE_AFTER must be a dict of retentions by status, got {setting!r}."
        )
    # Statuses the project's setting leaves out keep the default retention.
    default = cast(dict, DEFAULTS["PRUNE_AFTER"])  # conf.DEFAULTS holds a dict there
    configured = {**default, **setting, **(overrides or {})}
    result = {}
    for status, value in configured.items():
        if status not in PRUNABLE:
            raise ImproperlyConfigured(
                f"JOBS_PRUNE_AFTER has {status!r}; only finished statuses can be pruned: "
                f"{', '.join(PRUNABLE)}."
            )
        result[status] = _as_timedelta(status, value)
    return result


def _as_timedelta(status, value):
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    # Past a hundred years "now - age" leaves the datetime range; NaN and infinity never compare.
    if not limits.is_seconds(seconds, most=limits.MAX_RETENTION_SECONDS):
        raise ImproperlyConfigured(
            f"JOBS_PRUNE_AFTER[{status!r}] must be None (keep for ever), a timedelta or "
            f"{limits.seconds_expected(most=limits.MAX_RETENTION_SECONDS)} "
            f"({limits.MAX_RETENTION_DAYS:,} days), got {value!r}."
        )
    return value if isinstance(value, timedelta) else timedelta(seconds=seconds)


def prunable(status: str, age: timedelta, now, *, rolled=None):
    """Return the tasks of ``status`` that finished more than ``age`` before ``now`` and before
    ``rolled``, the moment until which the rollups have counted every task (their minute mark,
    ``jobs.maintenance.rollups``, unless given): pruning never erases history not yet written."""
    rolled = rolled or rollups.rolled_until(rollups.MINUTE)
    if rolled is None:
        return Task.objects.none()
    return Task.objects.filter(status=status, finished_at__lt=min(now - age, rolled))


def prune(
    *, now=None, overrides=None, batch_size=None, dry_run=False, max_batches=None
) -> PruneReport:
    """Delete finished tasks past their retention, ``batch_size`` rows per transaction.

    With ``dry_run`` only count. With ``max_batches``, stop after that many deletes and report
    ``complete=False`` if rows were left.
    """
    now = now or timezone.now()
    batch_size = batch_size or jobs_settings.PRUNE_BATCH_SIZE
    rolled = None
    if dry_run:
        rolled = rollups.settled(now)  # what the pass would have counted by then
    elif max_batches is None:
        # An unbounded pass (jobs_prune) counts what it may delete first; the bounded one of
        # the maintenance round follows the round's own rollup step.
        rollups.catch_up(now=now)
    report = PruneReport()
    batches = 0
    for status, age in retention(overrides).items():
        if age is None:
            continue
        candidates = prunable(status, age, now, rolled=rolled)
        if dry_run:
            report.counts[status] = candidates.count()
            continue
        deleted = 0
        while True:
            if max_batches is not None and batches >= max_batches:
                report.complete = report.complete and not candidates.exists()
                break
            ids = list(candidates.order_by("finished_at").values_list("pk", flat=True)[:batch_size])
            if not ids:
                break
            with transaction.atomic():
                # Re-checked here: a task requeued since the select is not finished any more.
                _, per_model = prunable(status, age, now, rolled=rolled).filter(pk__in=ids).delete()
            batches += 1
            # Tasks only: rows of other models that cascaded with them are not counted.
            deleted += per_model.get(Task._meta.label, 0)
            if len(ids) < batch_size:
                break
        report.counts[status] = deleted
    if not dry_run:
        # Holds of unique keys whose period is over (unique_for): an expired hold frees its key
        # either way; a hold taken again meanwhile has a later expiry and is kept.
        UniqueHold.objects.filter(expires_at__lte=now).delete()
    if report.total and not dry_run:
        logger.info(
            "tasks pruned %s complete=%s",
            " ".join(f"{status}={count}" for status, count in report.counts.items()),
            str(report.complete).lower(),
        )
    return report


# Automatic pruning, at most one worker at a time -------------------------------------------------


def auto_prune(holder: str | None = None, *, now=None) -> int:
    """Run a bounded pruning pass if ``JOBS_AUTO_PRUNE`` is on, no one else is, and it is due.

    Return how many tasks were deleted. A pass stopped by ``JOBS_PRUNE_MAX_BATCHES`` is not
    recorded as finished, so the next maintenance round carries on where it stopped.
    """
    if not jobs_settings.AUTO_PRUNE:
        return 0
    now = now or timezone.now()
    # Unique per pass, so a pass whose lease expired can never release a later holder's.
    holder = f"{holder or 'maintenance'}:{uuid.uuid4().hex[:8]}"
    # The lease outlives a slow pass by far; the batches keep each pass short anyway.
    if not acquire_lock(
        LOCK_NAME,
        holder,
        now=now,
        hold_seconds=600,
        every_seconds=jobs_settings.PRUNE_INTERVAL,
    ):
        return 0
    report = None
    try:
        report = prune(now=now, max_batches=jobs_settings.PRUNE_MAX_BATCHES)
    finally:
        done = report is not None and report.complete
        release_lock(LOCK_NAME, holder, finished_at=now if done else None)
    return report.total


# A rate window ended this long ago says nothing a claim reads (a new window starts afresh); the
# margin leaves alone the window of a worker whose clock is behind.
RATE_WINDOW_KEPT = timedelta(hours=1)


def prune_rate_windows(*, now=None) -> int:
    """Delete the rate windows (``RateWindow``) that ended over an hour ago; return how many.

    One row per rate key ever used, so per-customer keys would otherwise pile up. A claim that
    counts a key meanwhile inserts its row again (the trigger's upsert).
    """
    now = now or timezone.now()
    ended_before = (now - RATE_WINDOW_KEPT).timestamp()
    old = RateWindow.objects.annotate(ends=F("window_start") + F("period"))
    return old.filter(ends__lt=ended_before).delete()[0]
