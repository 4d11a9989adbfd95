"""What a minute of finished tasks adds up to, per queue and task name: the rollups' figures.

The definitions are the live metrics' (``jobs.metrics``): a task counts in the minute its
``finished_at`` falls in, by how it ended; ``retried`` counts those that needed more than one
attempt; run and wait times count only attempts that ran to their end (``window.RAN``). Times
are kept as sums and as a histogram over ``BOUNDS``, so that the percentiles of any run of
buckets can be read back without the rows: ``percentile`` interpolates inside the bin the rank
falls in (as Prometheus' ``histogram_quantile`` does), so a figure read back lies in the same
bin as the exact ``percentile_cont`` of the rows, never farther off than that bin's width.
"""

import operator
from dataclasses import dataclass, field
from datetime import UTC, timedelta

from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, Sum
from django.db.models.functions import TruncMinute

from jobs.metrics.window import RAN
from jobs.models import RollupMark, Task
from jobs.states import Status

# Upper bounds of the histogram's bins, in seconds (1-2-5 steps, then minutes, hours, a day); a
# last bin holds what is above the last bound. Changing them needs new rollups: the stored
# counts are by position.
BOUNDS = (
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800,
    3600, 7200, 14400, 43200, 86400,
)  # fmt: skip
BINS = len(BOUNDS) + 1


@dataclass
class Figures:
    """The sum of some rollups: how many finished and how, and their times' sums and bins."""

    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    retried: int = 0
    ran: int = 0
    run_seconds: float = 0.0
    wait_seconds: float = 0.0
    run_bins: list[int] = field(default_factory=lambda: [0] * BINS)
    wait_bins: list[int] = field(default_factory=lambda: [0] * BINS)

    # The counts by how tasks ended are named after their statuses.
    COUNTS = (*(str(status) for status in (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)),
              "retried", "ran", "run_seconds", "wait_seconds")  # fmt: skip

    def add(self, other) -> "Figures":
        """Add ``other`` (Figures, a TaskRollup or a row dict of ``minute_figures``) in place."""
        if isinstance(other, dict):
            other = Figures(**{name: other.get(name) or 0 for name in self.COUNTS},
                            run_bins=other["run_bins"], wait_bins=other["wait_bins"])  # fmt: skip
        # Spelled out: the week's charts add some 8,000 rollups, and this is their loop.
        self.succeeded += other.succeeded
        self.failed += other.failed
        self.cancelled += other.cancelled
        self.retried += other.retried
        self.ran += other.ran
        self.run_seconds += other.run_seconds
        self.wait_seconds += other.wait_seconds
        # A row of other bounds would count in the wrong bins: left out.
        if len(other.run_bins) == BINS:
            self.run_bins = list(map(operator.add, self.run_bins, other.run_bins))
        if len(other.wait_bins) == BINS:
            self.wait_bins = list(map(operator.add, self.wait_bins, other.wait_bins))
        return self

    @property
    def finished(self) -> int:
        return self.succeeded + self.failed + self.cancelled

    @property
    def failure_rate(self) -> float | None:
        """Return failed / (succeeded + failed), as the live metrics do; None if none ran."""
        ended = self.succeeded + self.failed
        return self.failed / ended if ended else None

    def run_percentile(self, fraction: float) -> float | None:
        return percentile(self.run_bins, fraction)

    def wait_percentile(self, fraction: float) -> float | None:
        return percentile(self.wait_bins, fraction)


def rolled_until(span: int):
    """Return the mark of the buckets of ``span`` seconds (60 or 3600): every bucket before it
    is written (None: none yet)."""
    return RollupMark.objects.filter(span=span).values_list("rolled_until", flat=True).first()


def percentile(bins: list[int], fraction: float) -> float | None:
    """Read the ``fraction`` percentile back from a histogram's counts; None when it is empty.

    The rank ``fraction * count`` falls in one bin; the value is interpolated linearly between
    that bin's bounds (0 below the first). Above the last bound the last bound is returned: a
    lower limit, as no upper one is known.
    """
    total = sum(bins)
    if not total:
        return None
    rank = fraction * total
    below = 0
    for index, count in enumerate(bins):
        if count and below + count >= rank:
            if index == len(BOUNDS):
                return float(BOUNDS[-1])
            low = BOUNDS[index - 1] if index else 0.0
            return low + (BOUNDS[index] - low) * max(rank - below, 0) / count
        below += count
    return float(BOUNDS[-1])


def bin_of(seconds: float) -> int:
    """Return the index of the bin ``seconds`` counts in (a bound belongs to its own bin)."""
    for index, bound in enumerate(BOUNDS):
        if seconds <= bound:
            return index
    return len(BOUNDS)


def minute_figures(start, end) -> list[dict]:
    """Add up the tasks that finished in ``[start, end)``, by minute, queue and task name.

    One grouped query on the ``(status, finished_at)`` index. Each row has ``minute``,
    ``queue``, ``name`` and the fields of ``Figures``.
    """
    run = ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())
    wait = ExpressionWrapper(F("started_at") - F("run_after"), output_field=DurationField())
    rows = (
        Task.objects.finished()
        .filter(finished_at__gte=start, finished_at__lt=end)
        .annotate(minute=TruncMinute("finished_at", tzinfo=UTC), run=run, wait=wait)
    )
    sums = {
        **{str(s): Count("pk", filter=Q(status=s)) for s in Figures.COUNTS[:3]},
        "retried": Count("pk", filter=Q(attempts__gt=1)),
        "ran": Count("pk", filter=RAN),
        "run_total": Sum("run", filter=RAN),
        "wait_total": Sum("wait", filter=RAN),
    }
    for kind in ("run", "wait"):
        for i, bound in enumerate(BOUNDS):
            # Cumulative, as one filtered count each; made per bin below.
            upto = Q(**{f"{kind}__lte": timedelta(seconds=bound)})
            sums[f"{kind}_le{i}"] = Count("pk", filter=RAN & upto)
    found = []
    for row in rows.order_by().values("minute", "queue", "name").annotate(**sums):
        figures = {key: row[key] for key in ("minute", "queue", "name", *Figures.COUNTS[:5])}
        for kind in ("run", "wait"):
            total = row[f"{kind}_total"]
            figures[f"{kind}_seconds"] = total.total_seconds() if total is not None else 0.0
            cumulative = [row[f"{kind}_le{i}"] for i in range(len(BOUNDS))] + [row["ran"]]
            figures[f"{kind}_bins"] = [
                n - (cumulative[i - 1] if i else 0) for i, n in enumerate(cumulative)
            ]
        found.append(figures)
    return found
