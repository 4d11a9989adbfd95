"""Helpers shared by test modules."""

from django.utils import timezone

from jobs import claiming, executor


def run_next():
    """Claim the next due task, as a worker would, run it here, and return it refreshed."""
    (task,) = claiming.claim("test-worker", 1, lease_seconds=30, now=timezone.now())
    executor.run(task)
    task.refresh_from_db()
    return task
