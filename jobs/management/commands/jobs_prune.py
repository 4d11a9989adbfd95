"""``manage.py jobs_prune``: delete finished tasks older than their status's retention."""

from datetime import timedelta

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from jobs import pruning
from jobs.management.argtypes import positive_int


def keep_option(value: str):
    """Parse ``STATUS=DAYS`` (DAYS may be a decimal, or ``forever``)."""
    status, sep, days = value.partition("=")
    if not sep or status not in pruning.PRUNABLE:
        raise CommandError(
            f"--keep takes STATUS=DAYS with STATUS one of {', '.join(pruning.PRUNABLE)}; "
            f"got {value!r}."
        )
    if days == "forever":
        return status, None
    try:
        age = timedelta(days=float(days))
    except ValueError:
        raise CommandError(f"--keep {value!r}: DAYS must be a number or 'forever'.") from None
    if age <= timedelta(0):
        raise CommandError(f"--keep {value!r}: DAYS must be above 0.")
    return status, age


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
            default=[],
            metavar="STATUS=DAYS",
            help="Override the retention of one status, e.g. --keep failed=90 or "
            "--keep failed=forever. Repeatable.",
        )
        parser.add_argument(
            "--batch-size",
            type=positive_int,
            default=None,
            help="Rows per DELETE (default JOBS_PRUNE_BATCH_SIZE).",
        )

    def handle(self, *args, dry_run=False, keep=(), batch_size=None, **options):
        overrides = dict(keep_option(value) for value in keep)
        try:
            report = pruning.prune(overrides=overrides, batch_size=batch_size, dry_run=dry_run)
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from None
        verb = "would prune" if dry_run else "pruned"
        counts = " ".join(f"{status}={count}" for status, count in report.counts.items())
        self.stdout.write(f"{verb} {report.total} tasks: {counts}")
