"""Helpers shared by test modules."""

from django.contrib.auth.models import Permission
from django.utils import timezone

from jobs.execution import executor
from jobs.worker import claiming
from jobs.worker.wire import Claimed, encode_task
from tests.factories import UserFactory


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


def staff(*codenames, username="staff"):
    """A staff user holding only the named permissions of the jobs app."""
    user = UserFactory(username=username, is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="jobs", codename__in=codenames)
    )
    return user
