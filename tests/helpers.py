"""Helpers shared by test modules."""

import contextlib
import re
import threading

from django.contrib.auth.models import Permission
from django.db import connection, transaction
from django.utils import timezone

from jobs.db import retry_on_database_error
from jobs.execution import executor
from jobs.models import Task
from jobs.worker import claiming
from jobs.worker.pool import ChildPool
from jobs.worker.wire import Claimed, encode_task
from tests.factories import UserFactory


def retry(operation, what, **options):
    """Retried on database faults, as a worker's parts are given it (without its limits)."""
    return retry_on_database_error(operation, what=what, model=Task, **options)


def claim(worker_id: str, limit: int, *, queues=None, lease_seconds: float, now=None) -> list:
    """Claim up to ``limit`` due tasks as a worker does; return them as model instances, highest
    priority first (a worker never needs the instances: they cost a query more)."""
    claimed, _ = claiming.claim_and_record(
        worker_id, limit, [], queues=queues, lease_seconds=lease_seconds, now=now
    )
    tasks = Task.objects.in_bulk([task.id for task in claimed])
    return [tasks[task.id] for task in claimed]


def run_next():
    """Claim the next due task, as a worker would, run it here, and return it refreshed."""
    (task,) = claim("test-worker", 1, lease_seconds=30, now=timezone.now())
    executor.run(task)
    task.refresh_from_db()
    return task


def claimed_from_task(task) -> Claimed:
    """A task as a worker holds it once claimed (the row encoded as a child gets it)."""
    return Claimed(task.pk, task.attempts, task.worker_id, task.name, task.backend,
                   encode_task(task))  # fmt: skip


@contextlib.contextmanager
def in_another_transaction(work, *, timeout=30):
    """Run ``work()`` in a transaction of another connection (a thread's) and keep it open,
    with the rows it locked or wrote uncommitted, until the block ends; yield what ``work``
    returned. An error in the thread is raised here."""
    ready, release = threading.Event(), threading.Event()
    outcome: dict = {}

    def hold():
        try:
            with transaction.atomic():
                outcome["value"] = work()
                ready.set()
                release.wait(timeout)
        except BaseException as exc:
            outcome["error"] = exc
        finally:
            ready.set()
            connection.close()

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert ready.wait(timeout), "the other transaction did not start"
        if "error" in outcome:
            raise outcome["error"]
        yield outcome["value"]
    finally:
        release.set()
        thread.join(timeout)
    if "error" in outcome:  # its commit
        raise outcome["error"]


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


def pool_retry(operation, what, **options):
    """The retry a worker gives its pool, for a pool built alone in a test."""
    return retry_on_database_error(operation, what=what, model=Task, **options)


def new_pool(successes, *, stopping=False, concurrency=1, max_memory_bytes=None):
    """A pool of children built alone; reported successes are appended to ``successes``."""
    return ChildPool(
        concurrency, max_tasks=None, max_memory_bytes=max_memory_bytes, retry=pool_retry,
        on_success=successes.append, stopping=lambda: stopping, before_fork=lambda: [],
    )  # fmt: skip


def insert_many_rows(count: int, *, status: str):
    """Insert ``count`` tasks of ``status`` in one statement (PostgreSQL's generate_series),
    then ANALYZE: a table as large as a planner test needs, beyond what factories make in time.
    A finished status gets ``attempts`` 1 and ``finished_at``; every other column its default."""
    from django.db import connection

    table = Task._meta.db_table
    finished = status in ("succeeded", "failed", "cancelled")
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {table} (id, name, backend, queue, priority, status, payload, summary,
                attempts, max_attempts, run_after, progress_current, progress_message,
                last_error, error_details, worker_id, created_at, updated_at, finished_at)
            SELECT gen_random_uuid(), 'tests.testapp.tasks.add', '', 'default', 0, %s,
                '{{}}', '', %s, 3, now(), 0, '', '', '[]', '', now(), now(),
                CASE WHEN %s THEN now() END
            FROM generate_series(1, %s)
            """,
            [status, 1 if finished else 0, finished, count],
        )
        cursor.execute(f"ANALYZE {table}")


def offered_buttons(page: str) -> set[str]:
    """The action URLs of a task page's buttons that show (a hidden one waits for its state)."""
    found = re.findall(
        r'<li data-live-action="\w+"( hidden)?>\s*<form method="post" action="([^"]+)"', page
    )
    return {url for hidden, url in found if not hidden}
