"""Declaring tasks with ``@jobs.task``, and finding any task again by the name its rows carry.

Every ``JobsTask`` registers itself when it is made, however it was declared (``@jobs.task``, or
Django's ``@task`` for a jobs backend), under its dotted path: the name its rows carry, by which
the worker, schedules and the admin find it again. Free of jobs' models (see
``jobs.tasks.definition``).
"""

import contextlib
import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.utils.module_loading import import_string

from jobs.conf import jobs_settings
from jobs.exceptions import UnknownTaskError
from jobs.tasks.retry import Backoff

if TYPE_CHECKING:
    from jobs.tasks.definition import JobsTask

logger = logging.getLogger(__name__)

_registry: dict[str, "JobsTask"] = {}


def register(task: "JobsTask"):
    """Record ``task`` under its dotted path, unless it is a copy of the registered one.

    ``using()`` and unpickling make copies of a task (the same function): the one declared
    stays registered. Another function under the same path (a module reloaded) replaces it.
    """
    name = task.module_path
    existing = _registry.get(name)
    if existing is not None:
        if existing.func is task.func:
            return
        logger.warning("task redefined name=%s", name)
    _registry[name] = task


def task(
    function=None,
    *,
    queue: str | None = None,
    queue_name: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    backoff: Backoff | None = None,
    timeout: float | None = None,
    transient: tuple = (),
    takes_context: bool = False,
    concurrency_key: str | None = None,
    concurrency_limit: int | None = None,
    rate_limit: str | None = None,
    unique_key: str | None = None,
    unique_while: str | None = None,
    unique_for: float | timedelta | None = None,
    on_duplicate: str | None = None,
    expires_in: float | timedelta | None = None,
    run_after: Any = None,
    delay: Any = None,
):
    """Declare a task; use as ``@task`` or ``@task(queue="emails", max_attempts=5, ...)``.

    Returns a ``JobsTask``, the object Django's ``@task`` returns for a jobs backend, stored in
    jobs' table without an entry in ``settings.TASKS``. ``transient`` names exception types that
    mean "try again later" for this task, on top of connection errors and timeouts;
    ``takes_context`` passes a context (progress, steps, cancellation) as the first argument,
    which must be named ``context``. ``concurrency_key`` and ``concurrency_limit``: at most that
    many tasks of the key run at once; ``rate_limit`` ("10/s"): at most that many starts of
    the task per period; ``unique_key``, ``unique_while``, ``unique_for`` and
    ``on_duplicate``: one task per key while waiting, active, or for a period, and what a
    duplicate does; ``expires_in``: a task not started within that many seconds of its enqueue
    never starts (all in docs/howto/flow-control.md). A priority is from -100 to
    100, as in Django; ``queue`` and ``queue_name`` (Django's word) are the same option.
    ``run_after`` and ``delay`` are refused: when a task is due is an option of one call.
    """
    for option, value in (("run_after", run_after), ("delay", delay)):
        if value is not None:
            raise when_is_per_call(option)
    if queue is not None and queue_name is not None and queue != queue_name:
        raise ValueError("Pass either queue or queue_name (the same option), not both.")
    queue = queue or queue_name
    from jobs.tasks.definition import JOBS_API, JobsTask  # a cycle: it imports this module

    def declare(func):
        return JobsTask(
            func=func,
            backend=JOBS_API,
            queue_name=queue or jobs_settings.DEFAULT_QUEUE,
            priority=jobs_settings.DEFAULT_PRIORITY if priority is None else priority,
            takes_context=takes_context,
            max_attempts=max_attempts,
            backoff=backoff,
            timeout=timeout,
            transient=transient,
            concurrency_key=concurrency_key,
            concurrency_limit=concurrency_limit,
            rate_limit=rate_limit,
            unique_key=unique_key,
            unique_while=unique_while,
            unique_for=unique_for,
            on_duplicate=on_duplicate,
            expires_in=expires_in,
        )

    return declare(function) if function is not None else declare


def default_backoff() -> Backoff:
    return Backoff(
        base=jobs_settings.BACKOFF_BASE,
        factor=jobs_settings.BACKOFF_FACTOR,
        maximum=jobs_settings.BACKOFF_MAX,
        jitter=jobs_settings.BACKOFF_JITTER,
    )


def get_task(name: str) -> "JobsTask":
    """Return the task named ``name`` (its dotted path), importing its module if need be."""
    if name not in _registry:
        with contextlib.suppress(ImportError):
            import_string(name)
    try:
        return _registry[name]
    except KeyError:
        raise UnknownTaskError(
            f"No task is registered as {name!r}. Check the name, and that the module defining "
            "it is imported by the worker (a tasks.py in an installed app is found on its own)."
        ) from None


def registered_names() -> list[str]:
    return sorted(_registry)


def when_is_per_call(option):
    """The error for ``@jobs.task(run_after=...)``: a due time belongs to one call, not to
    every call the declaration makes (a fixed datetime would soon be in the past)."""
    from jobs.tasks.definition import TaskOptionError  # a cycle: it imports this module

    return TaskOptionError(
        f"{option} is an option of one call, not of the task's declaration: pass it when "
        f"enqueueing, with my_task.using({option}=...).enqueue(...)."
    )
