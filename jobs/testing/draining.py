"""Running tasks inside a test, through the worker's own claim and executor.

``drain`` claims due tasks as a worker's supervisor does (``claim_and_record``), runs each
through ``jobs.execution.executor.run`` as a worker's child does, and records the successes in
the next claim, as the supervisor does. Only the process differs: everything runs here, one task
after another. ``immediately`` runs each task as it is enqueued, through ``drain``.
"""

import contextlib
import json
import logging
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connections, router
from django.utils import timezone

from jobs.execution import executor
from jobs.models import Task
from jobs.states import Status
from jobs.tasks import enqueueing
from jobs.transitions import Success
from jobs.worker.claiming import claim_and_record
from jobs.worker.wire import task_from_values

logger = logging.getLogger(__name__)

#: The worker id stamped on the tasks a test runs.
WORKER_ID = "jobs.testing"
# Tasks claimed at once: every task due at a round's start, unless there are more.
BATCH = 1000
# Long enough that no rescue takes a task back while a test runs it.
LEASE_SECONDS = 3600.0
DEFAULT_MAX_ROUNDS = 100
# How deep tasks enqueued by tasks may nest in immediate mode before the enqueue is refused.
MAX_IMMEDIATE_DEPTH = 20


# The outcomes of an attempt, each counted by an attribute of Drained of its name.
OUTCOMES = (Status.SUCCEEDED, Status.FAILED, Status.RETRYING, Status.CANCELLED)


class DrainError(AssertionError):
    """Tasks were still due after ``max_rounds`` rounds: tasks that enqueue tasks for ever."""


@dataclass
class Drained:
    """What a ``drain`` did: the outcome of each attempt it ran, and the tasks it ran.

    ``succeeded``, ``failed``, ``retrying`` and ``cancelled`` count attempts (a task retried
    twice then successful counts two ``retrying`` and one ``succeeded``); ``tasks`` holds each
    task run, once, as its row is now, in the order they first ran. ``snoozed`` counts attempts
    that asked to run later (``jobs.Snooze``), outside ``counts`` and ``total``: they are given
    back, not used.
    """

    succeeded: int = 0
    failed: int = 0
    retrying: int = 0
    cancelled: int = 0
    snoozed: int = 0
    rounds: int = 0
    tasks: list[Task] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        """The outcomes as a dict, ``{"succeeded": 2, "failed": 0, ...}``, to compare at once."""
        return {str(outcome): getattr(self, outcome) for outcome in OUTCOMES}

    @property
    def total(self) -> int:
        """The attempts run."""
        return sum(self.counts.values())

    def _add(self, outcome: str, count: int = 1):
        setattr(self, str(outcome), getattr(self, str(outcome)) + count)


def drain(
    queues: Iterable[str] | None = None,
    *,
    with_scheduled: bool = False,
    until_empty: bool = True,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
    now: datetime | None = None,
) -> Drained:
    """Run the due tasks here, as a worker would, and return what happened.

    A round claims the tasks due at its start (in ``queues`` only, if given) and runs them, one
    after the other, in the order a worker takes them (highest priority, then longest due).
    Tasks those tasks enqueue, and retries, are for the next round: with ``until_empty`` (the
    default), rounds go on until nothing is due; ``max_rounds`` guards against tasks that
    enqueue tasks for ever (``DrainError``). ``until_empty=False`` runs one round.

    A retry is scheduled in the future, so it is not due at once: ``with_scheduled=True`` makes
    every waiting task due at each round's start (delayed ones too), which drives retries to
    success or to their last attempt. ``now`` claims as at that time instead of the clock's.

    Inside a transaction (a test's, say), the on-commit callbacks a task's attempt registers
    (``jobs.signals``, Django Tasks' signals, the task's own) run when the attempt ends, as a
    worker's commit would run them. Timeouts are not enforced here: a worker's supervisor
    enforces them by ending the process that runs the task.
    """
    if isinstance(queues, str):
        queues = [queues]
    if queues is not None:
        given = queues
        queues = list(queues) if isinstance(queues, Iterable) else None
        if queues is None or not all(isinstance(one, str) for one in queues):
            raise TypeError(f"queues must be a queue name, a list of them, or None, not {given!r}.")
    queues = sorted(set(queues)) if queues is not None else None
    if queues == [] or (queues and "" in queues):
        # No task has an empty queue name (enqueue refuses it): this would run nothing, silently.
        raise ValueError(
            f"queues {queues!r} names no queue: name at least one queue, or pass None for every "
            "queue."
        )
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
        raise ValueError(f"max_rounds must be a whole number of at least 1, not {max_rounds!r}.")
    if now is not None and (not isinstance(now, datetime) or timezone.is_naive(now)):
        # A naive time would be read in the default time zone, with a warning, not refused.
        raise ValueError(f"now must be an aware datetime (timezone.now()), or None, not {now!r}.")
    drained = Drained()
    ran: dict = {}  # id -> None, in the order first run
    successes: list[Success] = []
    while True:
        at = now or timezone.now()
        limit = BATCH if drained.rounds < max_rounds and (until_empty or not drained.rounds) else 0
        if with_scheduled and limit:
            _make_due(queues, at)
        claimed, recorded = claim_and_record(
            WORKER_ID, limit, successes, queues=queues, lease_seconds=LEASE_SECONDS, now=at
        )
        # A success whose row the database refused was failed instead (succeed_many).
        drained._add(Status.SUCCEEDED, len(recorded))
        drained._add(Status.FAILED, len(successes) - len(recorded))
        successes = []
        if not claimed:
            break
        drained.rounds += 1
        for one in claimed:
            ran[one.id] = None
            successes.extend(_run(json.loads(one.row), drained))
    # With scheduled tasks, every waiting task would be due in the next round.
    left = _due(queues, None if with_scheduled else (now or timezone.now()))
    if until_empty and drained.rounds >= max_rounds and left:
        raise DrainError(
            f"Tasks are still due after {max_rounds} rounds of drain(): do tasks enqueue tasks "
            f"for ever? Still due: {_describe(left)}. Raise max_rounds if the chain is meant "
            "to be that long."
        )
    rows = Task.objects.in_bulk(list(ran))
    drained.tasks = [rows[task_id] for task_id in ran if task_id in rows]
    return drained


def _run(values: dict, drained: Drained) -> list[Success]:
    """Run one claimed task as a worker's child does; a success is left for the next claim."""
    task = task_from_values(values)
    with _as_committed(router.db_for_write(Task)):
        outcome = executor.run(task, defer_success=True)
    if outcome.deferred:
        return [Success(task.pk, task.attempts, WORKER_ID, outcome.result, timezone.now())]
    drained._add(str(outcome.kind))
    return []


@contextlib.contextmanager
def _as_committed(using: str) -> Iterator[None]:
    """Run the on-commit callbacks registered inside the block when it ends, as if committed.

    Only inside a transaction (in autocommit they run at once anyway); they are taken off the
    transaction's list, so an enclosing ``captureOnCommitCallbacks`` does not run them twice.
    """
    connection = connections[using]
    if not connection.in_atomic_block:
        yield
        return
    start = len(connection.run_on_commit)
    try:
        yield
    finally:
        while len(connection.run_on_commit) > start:  # a callback may register another
            hooks = connection.run_on_commit[start:]
            del connection.run_on_commit[start:]
            for hook in hooks:
                # (savepoint ids, callback, robust) as Django stores them; its stubs say 2.
                entry: tuple = tuple(hook)
                callback, robust = entry[1], entry[2]
                if robust:
                    try:
                        callback()
                    except Exception:
                        logger.exception("on-commit callback failed callback=%r", callback)
                else:
                    callback()


def _waiting(queues):
    waiting = Task.objects.claimable()
    return waiting.filter(queue__in=queues) if queues else waiting


def _make_due(queues, at: datetime):
    # Only run_after changes: the status stays the transitions' to write.
    _waiting(queues).filter(run_after__gt=at).update(run_after=at)


def _due(queues, at: datetime | None) -> list[Task]:
    """A few of the tasks due at ``at`` (at any time if None), first due first."""
    waiting = _waiting(queues) if at is None else _waiting(queues).filter(run_after__lte=at)
    return list(waiting.order_by("-priority", "run_after")[:5])


def _describe(tasks: list[Task]) -> str:
    return "; ".join(f"{task.name} {task.args!r} {task.kwargs!r}" for task in tasks)


# Immediate mode -------------------------------------------------------------------------------

_depth: ContextVar[int] = ContextVar("jobs_testing_immediate_depth", default=0)


def _run_enqueued(tasks: list[Task]):
    """Run the tasks just enqueued that are due, through ``drain`` (their queues' due tasks)."""
    now = timezone.now()
    queues = sorted({task.queue for task in tasks if task.run_after <= now})
    if not queues:
        return  # delayed: drain(with_scheduled=True) runs them
    depth = _depth.get()
    if depth >= MAX_IMMEDIATE_DEPTH:
        raise DrainError(
            f"Tasks enqueued tasks {MAX_IMMEDIATE_DEPTH} deep in immediate mode: do tasks "
            f"enqueue tasks for ever? This enqueue: {_describe(tasks)}."
        )
    token = _depth.set(depth + 1)
    try:
        drain(queues, until_empty=False)
        _run_released({task.workflow_id for task in tasks if task.workflow_id is not None})
    finally:
        _depth.reset(token)
    for task in tasks:  # the caller gets the row as the run left it
        task.refresh_from_db()


def _run_released(workflows: set):
    """Run what the runs released in ``workflows`` (a batch's callbacks, a dependent whose
    dependency just finished): no enqueue tells of them, but a worker would take them now."""
    for _ in range(DEFAULT_MAX_ROUNDS):
        if not workflows:
            return
        released = Task.objects.filter(
            workflow_id__in=workflows, status=Status.PENDING, run_after__lte=timezone.now()
        )
        queues = sorted(set(released.values_list("queue", flat=True)))
        if not queues or not drain(queues, until_empty=False).total:
            return  # nothing due, or held (a key at its limit, a pause): a drain() decides


@contextlib.contextmanager
def immediately() -> Iterator[None]:
    """Run each task when it is enqueued, before ``enqueue`` returns; also a decorator.

    For ``@jobs.task`` tasks and Django ``@task`` tasks of the jobs backend alike: the row is
    inserted, then claimed and run through ``drain``, so retries, signals and the record are
    a worker's. ``enqueue`` returns the row as the run left it. A task that fails does not
    raise at the enqueue: its row says ``failed`` or ``retrying`` (the retry waits for
    ``drain(with_scheduled=True)``), as do tasks enqueued with a delay. A task enqueued
    inside a transaction runs inside it. Tasks that enqueue tasks run them nested, up to
    ``MAX_IMMEDIATE_DEPTH`` deep.
    """
    enqueueing.enqueue_hooks.append(_run_enqueued)
    try:
        yield
    finally:
        enqueueing.enqueue_hooks.remove(_run_enqueued)
