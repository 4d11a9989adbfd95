"""Helpers shared by test modules."""

from django.utils import timezone

from jobs import claiming, executor
from jobs.wire import Claimed, encode_task


def run_next():
    """Claim the next due task, as a worker would, run it here, and return it refreshed."""
    (task,) = claiming.claim("test-worker", 1, lease_seconds=30, now=timezone.now())
    executor.run(task)
    task.refresh_from_db()
    return task


def claimed_from_task(task) -> Claimed:
    """A task as a worker holds it once claimed (the row encoded as a child gets it)."""
    return Claimed(task.pk, task.attempts, task.worker_id, task.name, task.backend,
                   encode_task(task))  # fmt: skip


def claim_for_dispatch(worker_id, limit, **options) -> list:
    """Claim as a worker's supervisor does, recording nothing."""
    claimed, _ = claiming.claim_and_record(worker_id, limit, [], **options)
    return claimed
