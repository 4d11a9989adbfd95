"""Signals sent over a task's life; each receiver gets ``task`` (a jobs.models.Task).

Sent once the change is committed (``transaction.on_commit``), with ``send_robust``: a failing
receiver is logged and never breaks the worker or the request that caused the change.

- ``task_enqueued``: a new task was recorded (not sent when an idempotency key matched).
- ``task_started``: a worker started an attempt.
- ``task_succeeded``, ``task_failed``, ``task_cancelled``: the task reached that final status.
- ``task_retried``: an attempt failed and another is scheduled (``error`` is the ErrorRecord).
- ``task_requeued``: an operator or owner put a failed or cancelled task back in the queue.
- ``task_finished``: any final status; receives ``status`` too. For hooks such as "notify the
  owner when their long task is done".
"""

import logging
from functools import partial

from django.db import transaction
from django.dispatch import Signal

from jobs.states import Status

logger = logging.getLogger(__name__)

# Caching, as Django's model signals do: the receivers of a sender are looked up once, not at
# every send (a worker sends several signals per task).
task_enqueued = Signal(use_caching=True)
task_started = Signal(use_caching=True)
task_succeeded = Signal(use_caching=True)
task_retried = Signal(use_caching=True)
task_failed = Signal(use_caching=True)
task_cancelled = Signal(use_caching=True)
task_requeued = Signal(use_caching=True)
task_finished = Signal(use_caching=True)

# Keyed by the str a status is (a TextChoices member), so a task's status string finds it.
_FINAL: dict[str, Signal] = {
    Status.SUCCEEDED: task_succeeded,
    Status.FAILED: task_failed,
    Status.CANCELLED: task_cancelled,
}
# The statuses reached again by a task that is not finished, and the signal of each.
_AGAIN: dict[str, Signal] = {Status.RETRYING: task_retried, Status.PENDING: task_requeued}


def _send(signal, task, **kwargs):
    for receiver, response in signal.send_robust(sender=type(task), task=task, **kwargs):
        if isinstance(response, Exception):
            logger.error(
                "signal receiver failed receiver=%s task_id=%s error=%r",
                getattr(receiver, "__qualname__", receiver),
                task.pk,
                response,
                exc_info=response,
            )


def send_on_commit(signal, task, **kwargs):
    """Send ``signal`` for ``task`` once the current transaction commits (now, in autocommit)."""
    if signal.has_listeners(type(task)):
        transaction.on_commit(partial(_send, signal, task, **kwargs))


def has_listeners(status) -> bool:
    """Whether any receiver waits for the signals of ``status`` (to skip needless reads)."""
    # The app registry: projects import this module from their apps.py, before models load.
    from jobs.models import Task

    status = str(status)
    wanted = [_AGAIN[status]] if status in _AGAIN else [_FINAL.get(status), task_finished]
    return any(signal is not None and signal.has_listeners(Task) for signal in wanted)


def send_status(task, **kwargs):
    """Send the signals for the status ``task`` has just reached."""
    status = str(task.status)
    if status in _FINAL:
        send_on_commit(_FINAL[status], task, **kwargs)
        send_on_commit(task_finished, task, status=status, **kwargs)
    elif status in _AGAIN:
        send_on_commit(_AGAIN[status], task, **kwargs)
