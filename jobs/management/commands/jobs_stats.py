"""``manage.py jobs_stats``: a table per queue from ``jobs.metrics``, or the same as JSON."""

import json
from datetime import timedelta

from django.core.management.base import BaseCommand

from jobs import metrics
from jobs.management.argtypes import positive_seconds
from jobs.metrics import STATUSES
from jobs.states import Status

COLUMNS = [
    *STATUSES,
    "oldest_wait",
    "last_min",
    "per_min",
    "failure_rate",
    "workers",
]


def age(seconds) -> str:
    """Return ``seconds`` as a short human age: 45s, 12m, 3h, 2d."""
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def rows(snapshot) -> list[dict]:
    """Return one plain dict per queue: the numbers the table and the JSON show."""
    result = []
    for queue in snapshot.queues:
        serving = [w for w in snapshot.workers if not w.queues or queue.queue in w.queues]
        result.append(
            {
                "queue": queue.queue,
                "counts": queue.counts,
                "oldest_waiting_seconds": queue.oldest_waiting,
                "throughput_per_minute": round(queue.throughput_per_minute, 3),
                "finished_last_minute": queue.finished_last_minute,
                "failure_rate": queue.outcomes.failure_rate,
                "finished": {
                    Status.SUCCEEDED.value: queue.outcomes.succeeded,
                    Status.FAILED.value: queue.outcomes.failed,
                    Status.CANCELLED.value: queue.outcomes.cancelled,
                },
                "live_workers": len(serving),
                "paused": queue.paused,
            }
        )
    return result


class Command(BaseCommand):
    help = (
        "Show per queue: tasks by status, oldest waiting age, throughput (tasks finished per "
        "minute), failure rate over the window, and live workers serving it."
    )

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")
        parser.add_argument(
            "--window",
            type=positive_seconds,
            default=None,
            metavar="SECONDS",
            help="Window of the failure rate (default JOBS_METRICS_WINDOW_SECONDS; at most a "
            "year).",
        )

    def handle(self, *args, window=None, **options):
        snapshot = metrics.snapshot(window=None if window is None else timedelta(seconds=window))
        table = rows(snapshot)
        if options["json"]:
            self.stdout.write(self.as_json(snapshot, table))
        else:
            self.stdout.write(self.as_table(snapshot, table))

    @staticmethod
    def as_json(snapshot, table) -> str:
        document = {
            "now": snapshot.now.isoformat(),
            "window_seconds": snapshot.window.total_seconds(),
            "live_workers": len(snapshot.workers),
            "queues": table,
        }
        return json.dumps(document, indent=2)

    @staticmethod
    def as_table(snapshot, table) -> str:
        header = ["queue", *COLUMNS]
        lines = [header]
        for row in table:
            rate = row["failure_rate"]
            name = row["queue"] + (" (paused)" if row["paused"] else "")
            lines.append(
                [
                    name,
                    *(str(row["counts"][status]) for status in STATUSES),
                    age(row["oldest_waiting_seconds"]),
                    str(row["finished_last_minute"]),
                    f"{row['throughput_per_minute']:.1f}",
                    "-" if rate is None else f"{rate:.1%}",
                    str(row["live_workers"]),
                ]
            )
        widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
        text = [
            "  ".join(
                cell.ljust(width) if i == 0 else cell.rjust(width)
                for i, (cell, width) in enumerate(zip(line, widths, strict=True))
            )
            for line in lines
        ]
        minutes = snapshot.window.total_seconds() / 60
        text.append(
            f"{len(snapshot.workers)} live workers; failure rate over the last {minutes:.0f} min, "
            "finished in the last minute (last_min) and a minute on average over the last 60 "
            "(per_min, the current minute included)"
        )
        if not table:
            text.insert(1, "(no tasks)")
        return "\n".join(text)
