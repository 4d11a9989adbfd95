"""History: the finished tasks of the last hour, day or week, read from the rollups alone.

The figures are the rollups' (``jobs.metrics.rollups``, written by
``jobs.maintenance.rollups``), so they outlive the task rows pruning deletes, and they cost
what the buckets cost: at most 60 minute buckets, or 168 hour buckets, per queue and task name.
The hour is read in minute slots, the day and the week in hour slots: hour buckets where they
are written, the minute buckets of the hours not yet added up otherwise. The rollups lag
``now`` by ``SETTLE`` (two minutes) or more: ``rolled_until`` says how far they go.
"""

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from jobs.metrics.rollups import Figures, rolled_until
from jobs.metrics.window import now_or_current
from jobs.models import TaskRollup

MINUTE, HOUR = 60, 3600
# Period: (its length, the seconds of one slot); the first is the default.
PERIODS = {
    "hour": (timedelta(hours=1), MINUTE),
    "day": (timedelta(days=1), HOUR),
    "week": (timedelta(weeks=1), HOUR),
}


@dataclass
class History:
    """The rollups of a period: ``per_queue[q][i]`` and ``per_name[n][i]`` add up the slot
    starting at ``slots[i]``; ``rolled_until`` is where the rollups end (None: none yet)."""

    period: str
    slots: list[datetime]
    slot_seconds: int
    rolled_until: datetime | None
    per_queue: dict[str, list[Figures]] = field(default_factory=dict)
    per_name: dict[str, list[Figures]] = field(default_factory=dict)

    def total(self, series: dict[str, list[Figures]] | None = None) -> list[Figures]:
        """Return each slot summed over every queue (or over the lists of ``series``)."""
        found = [Figures() for _ in self.slots]
        for figures in (self.per_queue if series is None else series).values():
            for slot, one in zip(found, figures, strict=True):
                slot.add(one)
        return found

    @staticmethod
    def summed(figures: list[Figures]) -> Figures:
        """Return the figures of a whole series, the slots added up."""
        total = Figures()
        for one in figures:
            total.add(one)
        return total


def history(period: str = "hour", *, now=None, name: str | None = None) -> History:
    """Read the rollups of the last ``period`` ("hour", "day" or "week") before ``now``, of
    every task name or of ``name`` alone; the last slot is the one ``now`` is in."""
    length, slot = PERIODS[period]
    now = now_or_current(now).astimezone(UTC)
    end = datetime.fromtimestamp((now.timestamp() // slot + 1) * slot, UTC)
    start = end - length
    count = int(length.total_seconds()) // slot
    found = History(
        period=period,
        slots=[start + timedelta(seconds=slot * i) for i in range(count)],
        slot_seconds=slot,
        rolled_until=rolled_until(MINUTE),
    )
    rows = TaskRollup.objects.all() if name is None else TaskRollup.objects.filter(name=name)
    if slot == MINUTE:
        sources = [rows.filter(span=MINUTE, bucket_at__gte=start, bucket_at__lt=end)]
    else:
        hours = rolled_until(HOUR)
        split = min(max(hours, start), end) if hours is not None else start
        sources = [
            rows.filter(span=HOUR, bucket_at__gte=start, bucket_at__lt=split),
            rows.filter(span=MINUTE, bucket_at__gte=split, bucket_at__lt=end),
        ]
    for source in sources:
        for row in source.order_by().iterator(chunk_size=2000):
            index = int((row.bucket_at - start).total_seconds() // slot)
            for key, series in ((row.queue, found.per_queue), (row.name, found.per_name)):
                if key not in series:  # not setdefault: its default would be built every row
                    series[key] = [Figures() for _ in range(count)]
                series[key][index].add(row)
    return found
