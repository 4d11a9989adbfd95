"""What the executor runs: a task's code, resolved from its record, whichever way it was defined.

Its own module because both ways of defining a task build one: the registry's ``@task``
(``jobs.execution.executor``) and Django Tasks (``jobs.backends``). Neither imports the other at
module level through it, so the two stay free of an import cycle.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobs.tasks.retry import Backoff

if TYPE_CHECKING:  # jobs.backends imports this module, and must load without jobs' models
    from jobs.models import Task


@dataclass
class Runnable:
    """A task resolved from its record, whichever way it was defined."""

    call: Callable[["Task"], object]
    backoff: Backoff
    transient: tuple = ()
    timeout: float | None = None
    # Called when the attempt starts, and after its outcome is recorded (Django Tasks signals).
    on_start: Callable[["Task"], object] | None = None
    on_finish: Callable[["Task"], object] | None = None
