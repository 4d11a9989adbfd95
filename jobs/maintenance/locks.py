"""Leases over maintenance duties that one worker at a time should run (pruning, rollups, the
fleet's maintenance leader: ``jobs.worker.maintenance_runner``)."""

from datetime import timedelta

from django.db.models import Q

from jobs.models import MaintenanceLock


def acquire_lock(name: str, holder: str, *, now, hold_seconds: float, every_seconds=0.0) -> bool:
    """Take the lease ``name`` for ``holder`` if it is free and its duty is due; say if taken.

    One conditional UPDATE decides, so of several workers trying at once exactly one wins.
    """
    MaintenanceLock.objects.get_or_create(name=name)
    free = MaintenanceLock.objects.filter(name=name).exclude(locked_until__gt=now)
    if every_seconds:
        free = free.exclude(last_finished_at__gt=now - timedelta(seconds=every_seconds))
    taken = free.update(holder=holder, locked_until=now + timedelta(seconds=hold_seconds))
    return taken == 1


def release_lock(name: str, holder: str, *, finished_at=None) -> None:
    """Give the lease back; with ``finished_at``, record that the duty was done then."""
    values = {"locked_until": None}
    if finished_at is not None:
        values["last_finished_at"] = finished_at
    MaintenanceLock.objects.filter(name=name, holder=holder).update(**values)


def hold_lock(name: str, holder: str, *, now, hold_seconds: float) -> bool:
    """Renew ``holder``'s lease ``name``, or take it if it is free; say if ``holder`` has it.

    Like ``acquire_lock``, one conditional UPDATE decides; unlike it, the holder renews its own
    lease before it lapses, so a lease held this way moves only when its holder stops renewing.
    """
    lock, _ = MaintenanceLock.objects.get_or_create(name=name)
    if lock.holder != holder and lock.locked_until is not None and lock.locked_until > now:
        # Another's, and live: read, not written, so the fleet's workers never queue for the
        # row's lock behind the leader's renewal.
        return False
    mine_or_free = MaintenanceLock.objects.filter(
        Q(holder=holder) | Q(locked_until__isnull=True) | Q(locked_until__lte=now), name=name
    )
    held = mine_or_free.update(holder=holder, locked_until=now + timedelta(seconds=hold_seconds))
    return held == 1
