"""The context a Django ``@task(takes_context=True)`` receives when jobs runs it.

One object that is both Django's ``TaskContext`` (``task_result``, ``attempt``) and jobs' own
(``jobs.execution.context.TaskContext``: progress, steps, cancellation checkpoints, ``once``,
``mark_result_public``), so a task written with Django's decorator drives the progress bar and
stops when its owner cancels it. Nothing is reimplemented here: the behaviour is jobs' context's.

Its own module because ``jobs.backends`` must import without jobs' models (see there), and
jobs' context needs them; ``jobs.backends`` imports this module where it runs a task.
"""

import time
from dataclasses import FrozenInstanceError

from jobs.backends import TaskContext as BaseDjangoTaskContext
from jobs.backends import TaskResult
from jobs.execution.context import TaskContext
from jobs.models import Task


class DjangoTaskContext(BaseDjangoTaskContext, TaskContext):
    """Passed as the first argument to Django tasks declared with ``takes_context=True``.

    Django's ``TaskContext`` is a frozen dataclass: its field ``task_result`` stays read-only,
    while the attributes jobs' context keeps (the task's row, the progress throttle) are set as
    on any object.
    """

    def __init__(self, task_result: TaskResult, task: Task, *, clock=time.monotonic):
        BaseDjangoTaskContext.__init__(self, task_result=task_result)
        TaskContext.__init__(self, task, clock=clock)

    def __setattr__(self, name, value):
        # A frozen dataclass refuses its fields and lets a subclass set other attributes, but
        # with slots=True (Django's) its __setattr__ calls super() with the class it replaced,
        # and raises TypeError for anything (Python 3.11 to 3.13 at least).
        if name in BaseDjangoTaskContext.__dataclass_fields__:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        object.__setattr__(self, name, value)

    # Both bases define it, Django's from task_result.attempts (one per recorded attempt), jobs'
    # from the row: jobs' is the count the status view and the admin show, and what guards this
    # attempt's writes. They differ when an earlier attempt left no error record (a cancelled
    # task, requeued).
    attempt = TaskContext.attempt
