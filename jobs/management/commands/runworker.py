import logging

from django.core.checks import Tags
from django.core.management.base import BaseCommand, CommandError

from jobs import limits
from jobs.conf import jobs_settings
from jobs.management.argtypes import (
    concurrency,
    interval_seconds,
    non_negative_seconds,
    number,
    queue_caps,
)
from jobs.worker.lifecycle import Worker

tasks_per_child = number(int, at_least=1, at_most=limits.MAX_TASKS_PER_CHILD)
memory_per_child = number(int, at_least=1, at_most=limits.MAX_MEMORY_PER_CHILD_MIB)


class Command(BaseCommand):
    # The checks that concern a worker. The others (URLs, templates, admin, static files,
    # security) would import the project's URLconf and views, about 6 MiB that this process and
    # its children would hold for nothing; `manage.py check` and the web process still run them.
    requires_system_checks = [Tags.models, Tags.compatibility, Tags.caches, Tags.signals, "jobs"]
    help = "Run a jobs worker: claim due tasks and run them until stopped (SIGTERM/SIGINT)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--queues",
            type=queue_caps,
            default=None,
            help="Comma-separated queues to serve (default: all queues), each with an optional "
            "cap, the most of its tasks this worker runs at once: imports:2,emails:8,default.",
        )
        parser.add_argument(
            "--concurrency",
            type=concurrency,
            default=None,
            help="Tasks run at once, one child process each (default: JOBS_CONCURRENCY; at "
            "most JOBS_MAX_CONCURRENCY, 256 unless raised).",
        )
        parser.add_argument(
            "--burst",
            action="store_true",
            help="Run the tasks that are due, then exit 0.",
        )
        parser.add_argument(
            "--poll-interval",
            type=interval_seconds,
            default=None,
            help="Seconds between looks for due tasks when idle (default: JOBS_POLL_INTERVAL).",
        )

        parser.add_argument(
            "--grace",
            type=non_negative_seconds,
            default=None,
            help="Seconds running tasks get to finish after SIGTERM/SIGINT before they are "
            "stopped and handed back (default: JOBS_SHUTDOWN_GRACE).",
        )
        parser.add_argument(
            "--max-tasks-per-child",
            type=tasks_per_child,
            default=None,
            help="Replace a child process after this many tasks (default: never).",
        )
        parser.add_argument(
            "--max-memory-per-child",
            type=memory_per_child,
            default=None,
            metavar="MIB",
            help="Stop a task whose process grows past this resident size, and replace the "
            "process (default: no limit).",
        )

    def handle(self, *args, queues, concurrency, burst, poll_interval, verbosity, **options):
        if verbosity > 0 and not logging.getLogger("jobs").handlers and not logging.root.handlers:
            logging.basicConfig(
                level=logging.DEBUG if verbosity > 1 else logging.INFO,
                format="%(asctime)s %(levelname)s %(name)s %(message)s",
            )
        caps = {name: cap for name, cap in queues or () if cap is not None}
        most = concurrency or jobs_settings.CONCURRENCY
        for name, cap in caps.items():
            if cap > most:
                raise CommandError(
                    f"--queues: the cap of the queue {name!r} is {cap}, above the worker's "
                    f"concurrency ({most}, the most tasks it runs at once): lower the cap or "
                    "raise --concurrency.",
                    returncode=2,  # a usage error, as every other refused value (exit 2)
                )
        worker = Worker(
            queues=[name for name, _ in queues] if queues else None,
            queue_caps=caps,
            concurrency=concurrency,
            burst=burst,
            poll_interval=poll_interval,
            grace=options["grace"],
            max_tasks_per_child=options["max_tasks_per_child"],
            max_memory_per_child=options["max_memory_per_child"],
        )
        exit_code = worker.run()
        if exit_code:
            raise SystemExit(exit_code)
