"""What the executor runs: a task's code and policy, resolved from its record.

One way for every task, however it was declared (``@jobs.task`` or Django's ``@task`` for a
jobs backend): both are a ``JobsTask``, found by the name its row carries. Django's task signals
are sent for tasks of a backend of ``settings.TASKS``; a context, where the task takes one, is
Django's ``TaskContext`` and jobs' (``jobs.execution.django_context``).
"""

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobs.backends import (
    DatabaseBackend,
    attempt_result,
    forget_attempt_result,
    load_task,
    send_finished,
)
from jobs.execution.django_context import DjangoTaskContext
from jobs.tasks.definition import JOBS_API, JobsTask
from jobs.tasks.django_api import task_backends, task_started
from jobs.tasks.retry import Backoff

if TYPE_CHECKING:
    from jobs.models import Task


@dataclass
class Runnable:
    """A task resolved from its record."""

    call: Callable[["Task"], object]
    backoff: Backoff
    transient: tuple = ()
    timeout: float | None = None
    # Called when the attempt starts, and after its outcome is recorded (Django Tasks signals).
    on_start: Callable[["Task"], object] | None = None
    on_finish: Callable[["Task"], object] | None = None
    # ``call`` returns a coroutine: the worker's child awaits it on its event loop, beside others.
    is_async: bool = False


# (name, backend) -> (the task, its Runnable): a worker resolves every task it runs.
_runnables: dict[tuple[str, str], tuple[JobsTask, Runnable]] = {}


def runnable_for(row: "Task") -> Runnable:
    """Return how the executor runs ``row``; raise UnknownTaskError if its code is not found."""
    task = load_task(row)
    cached = _runnables.get((row.name, row.backend))
    if cached is None or cached[0] is not task:  # first use, or the task was redefined
        cached = _runnables[(row.name, row.backend)] = (task, _runnable_of(task, row.backend))
    return cached[1]


def _runnable_of(task: JobsTask, backend: str) -> Runnable:
    # task.using(...) per (priority, queue): the same for every row that has them.
    bound: dict[tuple[int, str], JobsTask] = {}

    def result_of(row):  # one per attempt, as Django's own backends send (attempt_result)
        key = (row.priority, row.queue)
        if key not in bound:
            bound[key] = task.using(priority=row.priority, queue_name=row.queue, backend=backend)
        return attempt_result(row, task, bound[key])

    func = task.func  # a coroutine function returns a coroutine: see Runnable.is_async

    def call(row):
        if task.takes_context:
            return func(DjangoTaskContext(result_of(row), row), *row.args, **row.kwargs)
        return func(*row.args, **row.kwargs)

    on_start = on_finish = None
    if backend != JOBS_API:  # Django's signals, for the backends of settings.TASKS
        try:
            sender = type(task_backends[backend])
        except Exception:  # the alias was removed from settings.TASKS since the enqueue
            sender = DatabaseBackend

        def on_start(row):
            task_started.send(sender, task_result=result_of(row))

        def on_finish(row):
            result = result_of(row)
            forget_attempt_result(row)  # its last use
            send_finished(sender, result)

    return Runnable(
        call=call,
        backoff=task.resolved_backoff(),
        transient=task.transient,
        timeout=task.resolved_timeout(),
        on_start=on_start,
        on_finish=on_finish,
        is_async=inspect.iscoroutinefunction(task.func),
    )
