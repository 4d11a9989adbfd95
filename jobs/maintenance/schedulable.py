"""What a schedule can run: a ``@jobs.task``, or a Django ``@task`` that a jobs backend stores.

A schedule records its task by name: a ``@jobs.task``'s registered name, or a Django task's
dotted path (its ``module_path``, the name its task rows carry). The task is found again by that
name whenever a slot is due, so a task removed since is reported then, for that schedule alone.

A Django task whose backend is not a ``jobs.backends.DatabaseBackend`` is refused: a schedule's
once-per-slot guarantee is the jobs table's unique idempotency key, which another backend's
tasks never reach.
"""

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from jobs.exceptions import UnknownTaskError
from jobs.models import Task
from jobs.tasks.registry import TaskDefinition, get_task


def _backends():
    """Return ``jobs.backends``, or None where Django Tasks is not installed.

    django.tasks (on Django 5.2, the django_tasks backport) is an optional dependency.
    """
    try:  # optional: needs django.tasks or the backport
        from jobs import backends
    except ImportError:
        return None
    return backends


def name_of(task) -> str:
    """Return the name a schedule records for ``task`` (a task, or a task's name)."""
    if isinstance(task, str):
        return task
    if isinstance(task, TaskDefinition):
        return task.name
    backends = _backends()
    if backends is not None and isinstance(task, backends.DjangoTask):
        jobs_backend(task)  # refused at registration, not at its first slot
        return task.module_path
    raise ImproperlyConfigured(
        f"{task!r} is not a task: a schedule runs a @jobs.task, a Django @task or a task's name."
    )


def django_task(name: str) -> Any:
    """Return the Django task importable as ``name``, or None if ``name`` names none."""
    backends = _backends()
    if backends is None:
        return None
    try:
        found = import_string(name)
    except ImportError:
        return None
    return found if isinstance(found, backends.DjangoTask) else None


def resolve(name: str) -> Any:
    """Return the task a schedule named ``name`` runs: a TaskDefinition or a Django task.

    Raise UnknownTaskError when ``name`` names neither (removed or renamed since), and
    ImproperlyConfigured when it names a Django task that no jobs backend stores.
    """
    try:
        return get_task(name)
    except UnknownTaskError as exc:
        found = django_task(name)
        if found is None:
            raise UnknownTaskError(f"{exc} Nor is a Django task importable as {name!r}.") from None
        jobs_backend(found)
        return found


def jobs_backend(task) -> Any:
    """Return the jobs DatabaseBackend that stores the Django task ``task``; refuse others."""
    backends = _backends()
    assert backends is not None  # only Django tasks get here
    try:
        backend = backends.task_backends[task.backend]
    except Exception as exc:  # the alias is not (or no longer) in settings.TASKS
        raise ImproperlyConfigured(
            f"The Django task {task.module_path!r} uses the task backend {task.backend!r}, "
            f"which cannot be loaded ({exc})."
        ) from None
    if not isinstance(backend, backends.DatabaseBackend):
        kind = f"{type(backend).__module__}.{type(backend).__qualname__}"
        raise ImproperlyConfigured(
            f"The Django task {task.module_path!r} cannot be scheduled: its task backend "
            f"{task.backend!r} is {kind}, not jobs.backends.DatabaseBackend, so jobs would "
            "neither store nor run its tasks. Declare it with @task(backend=...) naming an alias "
            "of jobs.backends.DatabaseBackend in settings.TASKS."
        )
    return backend


def bound(task, *, queue: str | None, priority: int | None) -> Any:
    """Return the Django task ``task`` with a schedule's queue and priority, if it sets them.

    Raise ImproperlyConfigured when its backend refuses them (a priority beyond Django's
    range, a queue not in the backend's ``QUEUES``).
    """
    try:  # Django >= 6.0
        from django.tasks.exceptions import TaskException
    except ImportError:  # Django 5.2 with the django-tasks backport
        from django_tasks.exceptions import TaskException  # type: ignore[assignment]
    try:
        return task.using(queue_name=queue, priority=priority)  # None: the task's own
    except TaskException as exc:
        raise ImproperlyConfigured(
            f"The Django task {task.module_path!r} cannot run with queue={queue!r}, "
            f"priority={priority!r}: {exc}"
        ) from None


def check_declared(name: str, *, queue: str | None, priority: int | None) -> None:
    """Raise ImproperlyConfigured if ``name`` is a Django task a schedule cannot run.

    For the system check of ``JOBS_SCHEDULES``: a name that imports as nothing is left for the
    worker to report (a ``@jobs.task`` may be registered under a name that is not its path).
    """
    task = django_task(name)
    if task is not None:
        jobs_backend(task)
        bound(task, queue=queue, priority=priority)


def enqueue_django(task, args, kwargs, *, queue, priority, summary, idempotency_key) -> Task:
    """Enqueue a Django task through its jobs backend, at most once per ``idempotency_key``."""
    backend = jobs_backend(task)
    return backend.store(
        bound(task, queue=queue, priority=priority),
        args,
        kwargs,
        summary=summary,
        idempotency_key=idempotency_key,
    )[0]
