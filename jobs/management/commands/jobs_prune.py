"""``manage.py jobs_prune``: delete finished tasks older than their status's retention."""

import argparse
from datetime import timedelta

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from jobs import limits
from jobs.maintenance import pruning
from jobs.management.argtypes import number, shown

batch_size = number(int, at_least=1, at_most=limits.MAX_BATCH_SIZE)
retention_days = number(float, above=0, at_most=limits.MAX_RETENTION_DAYS)


def keep_option(value: str):
    """Parse ``STATUS=DAYS`` (DAYS may be a decimal, or ``forever``); an argparse ``type``."""
    status, sep, days = value.partition("=")
    if not sep or status not in pruning.PRUNABLE:
        raise argparse.ArgumentTypeError(
            f"--keep takes STATUS=DAYS with STATUS one of {', '.join(pruning.PRUNABLE)}; "
            f"got {shown(value)}."
        )
    if days == "forever":
        return status, None
    try:
        return status, timedelta(days=retention_days(days))
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(
            f"DAYS of {status} must be a number or 'forever': {exc}"
        ) from None


class Command(BaseCommand):
    help = (
        "Delete succeeded, failed and cancelled tasks older than their retention "
        "(JOBS_PRUNE_AFTER), in short batches. Pending, retrying and running tasks are never "
        "touched."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--dry-run", action="store_true", help="Count what would be deleted; delete nothing."
        )
        parser.add_argument(
            "--keep",
            action="append",
            type=keep_option,
            default=[],
            metavar="STATUS=DAYS",
            help="Override the retention of one status, e.g. --keep failed=90 or "
            f"--keep failed=forever (DAYS at most {limits.MAX_RETENTION_DAYS:,}). Repeatable.",
        )
        parser.add_argument(
            "--batch-size",
            type=batch_size,
            default=None,
            help=f"Rows per DELETE (default JOBS_PRUNE_BATCH_SIZE; at most "
            f"{limits.MAX_BATCH_SIZE:,}).",
        )

    def handle(self, *args, dry_run=False, keep=(), batch_size=None, **options):
        overrides = dict(keep)
        try:
            report = pruning.prune(overrides=overrides, batch_size=batch_size, dry_run=dry_run)
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from None
        verb = "would prune" if dry_run else "pruned"
        counts = " ".join(f"{status}={count}" for status, count in report.counts.items())
        self.stdout.write(f"{verb} {report.total} tasks: {counts}")
