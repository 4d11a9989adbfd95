"""The task state machine: statuses, and which transition may start from which status.

This table is the whole truth about lifecycles; ``jobs.transitions`` and ``jobs.worker.claiming``
apply it as conditional updates and never write a status that is not listed here.
"""

from dataclasses import dataclass

from django.db import models


class Status(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    RETRYING = "retrying", "Retrying"
    CANCELLED = "cancelled", "Cancelled"
    # Waiting for other tasks (its dependencies, or its batch: ``jobs.workflows``): not
    # claimable, so in none of the claim's partial indexes; released to ``pending`` in the
    # transaction that records the last outcome it waits for.
    BLOCKED = "blocked", "Blocked"


class WorkflowStatus(models.TextChoices):
    """A workflow's (``jobs.models.Workflow``): running until every member has finished, then
    succeeded, or failed (a member failed or was cancelled); cancelled as a whole."""

    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


TERMINAL = frozenset({Status.SUCCEEDED, Status.FAILED, Status.CANCELLED})
# Statuses a worker may claim from, once ``run_after`` has passed.
CLAIMABLE = frozenset({Status.PENDING, Status.RETRYING})


@dataclass(frozen=True)
class Transition:
    name: str
    sources: frozenset
    target: Status


def _transition(name, sources, target):
    return Transition(name, frozenset(sources), target)


CLAIM = _transition("claim", CLAIMABLE, Status.RUNNING)
SUCCEED = _transition("succeed", {Status.RUNNING}, Status.SUCCEEDED)
FAIL = _transition("fail", {Status.RUNNING}, Status.FAILED)
RETRY_LATER = _transition("retry_later", {Status.RUNNING}, Status.RETRYING)
CANCEL = _transition("cancel", CLAIMABLE | {Status.BLOCKED}, Status.CANCELLED)
# A running task that noticed a cancellation request (or was stopped because of one).
CANCEL_RUNNING = _transition("cancel_running", {Status.RUNNING}, Status.CANCELLED)
REQUEUE = _transition("requeue", {Status.FAILED, Status.CANCELLED}, Status.PENDING)
# A worker shutting down hands an unfinished task back, so another worker takes it at once.
RELEASE = _transition("release", {Status.RUNNING}, Status.PENDING)
# A running task that asked to run later (``jobs.Snooze``): waiting again, its attempt undone.
SNOOZE = _transition("snooze", {Status.RUNNING}, Status.PENDING)
# A waiting task whose deadline (``expires_at``) passed before it started: it never runs.
EXPIRE = _transition("expire", CLAIMABLE, Status.CANCELLED)
# Workflows (``jobs.workflows``): a task enqueued to wait for others is blocked from its insert;
# released once they have finished as it needs; a batch's callback that ran, or was not to run,
# is blocked again when the batch is retried, to decide at its next completion.
UNBLOCK = _transition("unblock", {Status.BLOCKED}, Status.PENDING)
REARM = _transition("rearm", TERMINAL, Status.BLOCKED)
# A running task whose lease expired: its worker is gone.
RESCUE = _transition("rescue", {Status.RUNNING}, Status.RETRYING)
RESCUE_EXHAUSTED = _transition("rescue_exhausted", {Status.RUNNING}, Status.FAILED)


# Statuses an operator or owner may cancel: waiting ones at once (CANCEL), running ones at their
# next checkpoint (CANCEL_RUNNING). The status view, the admin's actions and the API use this one.
CANCELLABLE = CANCEL.sources | CANCEL_RUNNING.sources
# Statuses a failed attempt leaves behind, whose ``last_error`` the owner may read.
WITH_ERROR = frozenset({Status.FAILED, Status.RETRYING, Status.CANCELLED})
