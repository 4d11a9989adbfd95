"""``manage.py jobs_health``: exit 0 when the queue is healthy, 1 with a one-line reason if not.

For cron, systemd (``ExecStartPre``/timers) and Kubernetes exec probes. Exit 2 means the check
could not run at all (the database is unreachable), which a probe should treat as a failure too.
"""

import json
import sys

from django.core.management.base import BaseCommand
from django.db import DatabaseError

from jobs import health
from jobs.management.argtypes import number

OK, UNHEALTHY, UNKNOWN = 0, 1, 2
NON_NEGATIVE = number(float, at_least=0)


class Command(BaseCommand):
    help = (
        "Check the queue: oldest waiting age, failure rate over a window, worker heartbeats. "
        "Print one line; exit 0 if healthy, 1 if not, 2 if the check could not run."
    )
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--max-wait", type=NON_NEGATIVE, metavar="SECONDS")
        parser.add_argument("--max-failure-rate", type=NON_NEGATIVE, metavar="FRACTION")
        parser.add_argument("--window", type=NON_NEGATIVE, metavar="SECONDS")
        parser.add_argument("--min-tasks", type=number(int, at_least=0), metavar="N")
        parser.add_argument("--heartbeat", type=NON_NEGATIVE, metavar="SECONDS")
        parser.add_argument(
            "--queue", action="append", default=[], help="Only judge this queue. Repeatable."
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
        except DatabaseError as exc:
            first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            self.stdout.write(f"UNKNOWN: database unreachable: {first_line}")
            sys.exit(UNKNOWN)
        if options["json"]:
            self.stdout.write(json.dumps(verdict.as_dict()))
        else:
            self.stdout.write(verdict.reason)
        if not verdict.ok:
            sys.exit(UNHEALTHY)
