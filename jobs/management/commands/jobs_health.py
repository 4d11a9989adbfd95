"""``manage.py jobs_health``: exit 0 when the queue is healthy, 1 with a one-line reason if not.

For cron, systemd (``ExecStartPre``/timers) and Kubernetes exec probes. Exit 2 means the check
could not judge (the database is unreachable, a setting is broken, any other error, or an
option argparse refused), which a probe should treat as a failure too. Never 1 for that: 1
always means "checked, and unhealthy".
"""

import json
import sys

from django.core.management.base import BaseCommand
from django.db import DatabaseError

from jobs import limits
from jobs.management.argtypes import non_negative_seconds, number, queue_name
from jobs.web import health

OK, UNHEALTHY, UNKNOWN = 0, 1, 2


class Command(BaseCommand):
    help = (
        "Check the queue: oldest waiting age, failure rate over a window, worker heartbeats. "
        "Print one line; exit 0 if healthy, 1 if not, 2 if it could not judge."
    )
    requires_system_checks = []

    def add_arguments(self, parser):
        seconds = {"type": non_negative_seconds, "metavar": "SECONDS"}
        parser.add_argument("--max-wait", **seconds)
        parser.add_argument(
            "--max-failure-rate", type=number(float, at_least=0, at_most=1), metavar="FRACTION"
        )
        parser.add_argument("--window", **seconds)
        parser.add_argument(
            "--min-tasks", type=number(int, at_least=0, at_most=limits.MAX_COUNT), metavar="N"
        )
        parser.add_argument("--heartbeat", **seconds)
        parser.add_argument(
            "--queue",
            action="append",
            default=[],
            type=queue_name,
            help="Only judge this queue. Repeatable.",
        )
        parser.add_argument("--json", action="store_true", help="Print the verdict as JSON.")

    def handle(self, *args, **options):
        thresholds = health.Thresholds(
            max_wait=options["max_wait"],
            max_failure_rate=options["max_failure_rate"],
            window=options["window"],
            min_tasks=options["min_tasks"],
            heartbeat=options["heartbeat"],
        )
        try:
            verdict = health.check(thresholds, queues=options["queue"])
        except Exception as exc:  # whatever it is, the probe must read "could not judge"
            first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            what = "database unreachable" if isinstance(exc, DatabaseError) else "check failed"
            reason = f"UNKNOWN: {what}: {first_line}"
            if options["json"]:
                reason = json.dumps({"status": "unknown", "reason": reason, "problems": []})
            self.stdout.write(reason)
            sys.exit(UNKNOWN)
        if options["json"]:
            self.stdout.write(json.dumps(verdict.as_dict()))
        else:
            self.stdout.write(verdict.reason)
        if not verdict.ok:
            sys.exit(UNHEALTHY)
