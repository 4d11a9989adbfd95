"""Database counters of retries, failures and rescues, kept up by receivers of jobs' signals.

Signals are sent once the transition has committed, so a counter counts what really happened;
a counter write that fails is logged by the signal machinery and never fails the task.
"""

from django.db import IntegrityError, transaction
from django.db.models import F

from jobs import signals
from jobs.models import EventCounter, Task

RETRIED, FAILED, RESCUED = "retried", "failed", "rescued"  # not a status: event names
EVENTS = (RETRIED, FAILED, RESCUED)
# What ``transitions.rescue_expired`` and ``rescue_dead`` record as the error of a task whose
# worker vanished.
WORKER_LOST = "jobs.exceptions.WorkerLost"


def increment(event: str, queue: str, by: int = 1) -> None:
    """Add ``by`` to the counter of ``event`` in ``queue``, creating it at first use."""
    if EventCounter.objects.filter(event=event, queue=queue).update(value=F("value") + by):
        return
    try:
        with transaction.atomic():
            EventCounter.objects.create(event=event, queue=queue, value=by)
    except IntegrityError:  # another process created it first: add to theirs
        EventCounter.objects.filter(event=event, queue=queue).update(value=F("value") + by)


def totals() -> dict[str, dict[str, int]]:
    """Return ``{event: {queue: total}}`` for every event, queues with no events left out."""
    found: dict[str, dict[str, int]] = {event: {} for event in EVENTS}
    for event, queue, value in EventCounter.objects.values_list("event", "queue", "value"):
        found.setdefault(event, {})[queue] = value
    return found


def _was_rescued(task) -> bool:
    details = task.error_details or []
    return bool(details) and details[-1].get("exception") == WORKER_LOST


def on_retried(sender, task, **kwargs):
    increment(RETRIED, task.queue)
    if _was_rescued(task):
        increment(RESCUED, task.queue)


def on_failed(sender, task, **kwargs):
    increment(FAILED, task.queue)
    if _was_rescued(task):
        increment(RESCUED, task.queue)


def connect():
    """Connect the receivers (from ``JobsConfig.ready``); connecting twice is harmless."""
    signals.task_retried.connect(
        on_retried, sender=Task, dispatch_uid="jobs.metrics.counters.retried"
    )
    signals.task_failed.connect(on_failed, sender=Task, dispatch_uid="jobs.metrics.counters.failed")
