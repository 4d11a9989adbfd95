"""What a schedule can run: a task declared with ``@jobs.task`` or Django's ``@task``.

A schedule records its task by name, its dotted path (the name its task rows carry). The task is
found again by that name whenever a slot is due, so a task removed since is reported then, for
that schedule alone.

A Django task whose backend is not a ``jobs.backends.DatabaseBackend`` is refused: a schedule's
once-per-slot guarantee is the jobs table's unique idempotency key, which another backend's
tasks never reach.
"""

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from jobs.backends import DatabaseBackend, jobs_api_backend
from jobs.exceptions import UnknownTaskError
from jobs.tasks.definition import JOBS_API, JobsTask
from jobs.tasks.django_api import DjangoTask, TaskException, task_backends
from jobs.tasks.registry import get_task


def name_of(task) -> str:
    """Return the name a schedule records for ``task`` (a task, or a task's name)."""
    if isinstance(task, str):
        return task
    if isinstance(task, DjangoTask):
        jobs_backend(task)  # refused at registration, not at its first slot
        return task.module_path
    raise ImproperlyConfigured(
        f"{task!r} is not a task: a schedule runs a @jobs.task, a Django @task or a task's name."
    )


def resolve(name: str) -> JobsTask:
    """Return the task a schedule named ``name`` runs.

    Raise UnknownTaskError when ``name`` names none (removed or renamed since), and
    ImproperlyConfigured when it names a Django task that no jobs backend stores.
    """
    try:
        task = get_task(name)
    except UnknownTaskError:
        try:
            found = import_string(name)
        except ImportError:
            raise UnknownTaskError(f"No task is importable as {name!r}.") from None
        if isinstance(found, DjangoTask):  # of another backend: say so
            jobs_backend(found)
        raise
    jobs_backend(task)  # its backend may have changed in settings.TASKS since
    return task


def jobs_backend(task: DjangoTask) -> DatabaseBackend:
    """Return the jobs backend that stores ``task``; refuse a task of another backend."""
    if task.backend == JOBS_API:
        return jobs_api_backend()
    try:
        backend = task_backends[task.backend]
    except Exception as exc:  # the alias is not (or no longer) in settings.TASKS
        raise ImproperlyConfigured(
            f"The Django task {task.module_path!r} uses the task backend {task.backend!r}, "
            f"which cannot be loaded ({exc})."
        ) from None
    if not isinstance(backend, DatabaseBackend):
        kind = f"{type(backend).__module__}.{type(backend).__qualname__}"
        raise ImproperlyConfigured(
            f"The Django task {task.module_path!r} cannot be scheduled: its task backend "
            f"{task.backend!r} is {kind}, not jobs.backends.DatabaseBackend, so jobs would "
            "neither store nor run its tasks. Declare it with @task(backend=...) naming an alias "
            "of jobs.backends.DatabaseBackend in settings.TASKS."
        )
    return backend


def bound(task: JobsTask, *, queue: str | None, priority: int | None) -> JobsTask:
    """Return ``task`` with a schedule's queue and priority, if it sets them.

    Raise ImproperlyConfigured when its backend refuses them (a priority beyond Django's
    range, a queue not in the backend's ``QUEUES``).
    """
    try:
        return task.using(queue_name=queue, priority=priority)  # None: the task's own
    except TaskException as exc:
        raise ImproperlyConfigured(
            f"The task {task.module_path!r} cannot run with queue={queue!r}, "
            f"priority={priority!r}: {exc}"
        ) from None


def check_declared(name: str, *, queue: str | None, priority: int | None) -> str | None:
    """Raise ImproperlyConfigured if ``name`` is a task a schedule cannot run; return what to
    warn of when it names no task at all (the worker would skip the schedule at every slot).

    For the system check of ``JOBS_SCHEDULES``: a name that imports as nothing is a warning, not
    an error, since the module may arrive with a later deploy and an error would stop
    ``migrate``.
    """
    try:
        found = import_string(name)
    except ImportError as exc:
        try:
            get_task(name)  # registered under a name that does not import: fine
        except UnknownTaskError:
            return f"the task {name!r} imports as nothing ({exc}); the worker will skip it."
        return None
    if not isinstance(found, DjangoTask):
        kind = type(found).__name__
        return (
            f"{name!r} is a {kind}, not a task (@jobs.task or Django's @task); the worker will "
            "skip it."
        )
    jobs_backend(found)
    if isinstance(found, JobsTask):
        bound(found, queue=queue, priority=priority)
    return None
