"""The one task object: Django's ``Task`` carrying jobs' options.

``JobsTask`` is what ``@jobs.task`` returns and what Django's own ``@task`` returns for a
backend of ``jobs.backends.DatabaseBackend`` (its ``task_class``): the same class, enqueued,
scheduled, run, retried and shown the same way. On top of Django's fields (priority, queue,
``run_after``, context) it carries jobs' policy (attempts, backoff, transient errors, timeout)
and the options of one call, set with ``using()`` (owner, summary, idempotency key, delay);
uniqueness (a key held while waiting, while active, or for a period) may be either.

Free of jobs' models, like ``jobs.backends``, which must import before the app registry is
ready (see there).
"""

import math
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from jobs.conf import jobs_settings
from jobs.exceptions import PayloadError
from jobs.tasks import registry
from jobs.tasks.dependencies import ON_DEPENDENCY_FAILURE, dependency_ids
from jobs.tasks.django_api import DjangoTask, InvalidTask
from jobs.tasks.payload import check_delay, check_int, check_name
from jobs.tasks.rates import MAX_RATE_KEY_LENGTH, Rate, RateError, parse_rate, queue_key, queue_rate
from jobs.tasks.retry import Backoff

# The backend alias of tasks declared with ``@jobs.task``: jobs' table, through no entry of
# settings.TASKS (a project needs none to use jobs). Their rows carry it (``Task.backend``).
JOBS_API = ""

MAX_ATTEMPTS_RANGE = (1, 2**31 - 1)
MAX_CONCURRENCY_KEY_LENGTH = 200  # jobs.models.Task.concurrency_key's max_length
MAX_IDEMPOTENCY_KEY_LENGTH = 255  # jobs.models.Task.idempotency_key's max_length
MAX_UNIQUE_KEY_LENGTH = 255  # jobs.models.Task.unique_key's max_length
# unique_while: "waiting" (not started yet), "active" (waiting or running).
UNIQUE_WHILE = ("waiting", "active")
ON_DUPLICATE = ("return", "replace")
MAX_UNIQUE_FOR = timedelta(days=366)  # a longer period is a mistake, or idempotency_key's job


class TaskOptionError(InvalidTask, PayloadError):
    """A task's option refused: Django's ``InvalidTask``, and jobs' ``PayloadError`` (a
    ``TypeError`` and ``ValueError``), whichever a caller catches."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JobsTask(DjangoTask):
    """A task jobs stores and runs: Django's ``Task`` with jobs' options.

    Declared with ``@jobs.task(...)`` or Django's ``@task(...)`` (for a jobs backend), both
    taking the options below as keywords; ``using()`` sets them, and the options of one call,
    for the next enqueue. ``None`` means the default (``JOBS_DEFAULT_MAX_ATTEMPTS`` or the
    backend's ``OPTIONS["MAX_ATTEMPTS"]``, the backoff settings, ``JOBS_DEFAULT_TIMEOUT``).
    """

    max_attempts: int | None = None
    backoff: Backoff | None = None
    # Exception types that mean "try again later" for this task, on top of connection errors
    # and timeouts.
    transient: tuple[type[BaseException], ...] = ()
    timeout: float | None = None  # seconds an attempt may run before it is stopped
    # At most ``concurrency_limit`` tasks of ``concurrency_key`` run at once, on every worker
    # together. A limit alone limits the task itself (its key is its dotted path); a key alone
    # has a limit of 1. Usually set per call: ``using(concurrency_key=f"account:{id}")``.
    concurrency_key: str | None = None
    concurrency_limit: int | None = None
    # At most N starts per period of ``rate_key``, on every worker together (``rate_limit``:
    # "10/s", "100/m", read as a ``jobs.tasks.rates.Rate``). A limit alone limits the task itself
    # (its key is its dotted path); a key needs a limit. A queue's limit is ``JOBS_QUEUES``'.
    rate_limit: Rate | str | None = None
    rate_key: str | None = None
    # One task per key at a time, for a scope (``jobs.tasks.uniqueness``): while it waits
    # (``unique_while="waiting"``), while it waits or runs (``"active"``), or for a period from
    # the first enqueue (``unique_for``, seconds or a timedelta). A scope alone makes the key the
    # task's dotted path; a key alone is held while waiting. A duplicate gets the task holding
    # the key (``on_duplicate="return"``), or replaces its arguments and due time if it is still
    # waiting (``"replace"``: a debounce).
    unique_key: str | None = None
    unique_while: str | None = None
    unique_for: float | timedelta | None = None
    on_duplicate: str | None = None
    # A deadline: a task not started within ``expires_in`` seconds of its enqueue (or by
    # ``expires_at``, an aware datetime, usually per call) never starts; it ends ``cancelled``,
    # "expired". One or the other: setting one with ``using()`` clears the other.
    expires_in: float | timedelta | None = None
    expires_at: datetime | None = None
    # The options of one call (``using``): not part of the task's declaration.
    owner: Any = None
    summary: str = ""
    idempotency_key: str | None = None
    delay: float | timedelta | None = None
    # Workflows (jobs.workflows): the tasks this call waits for (rows, ids or Django results),
    # and what happens to it when one of them fails or is cancelled: "cancel" (the default) or
    # "run" (run anyway, once all have finished).
    depends_on: tuple = ()
    on_dependency_failure: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "transient", _checked_transient(self.transient))
        self._check_rate()
        try:  # jobs' value checks, each a PayloadError: refused here as a task option
            if self.max_attempts is not None:
                check_int(self.max_attempts, "max attempts", *MAX_ATTEMPTS_RANGE)
            if self.concurrency_key is not None:
                check_name(self.concurrency_key, "concurrency key", MAX_CONCURRENCY_KEY_LENGTH)
            if self.concurrency_limit is not None:
                check_int(self.concurrency_limit, "concurrency limit", *MAX_ATTEMPTS_RANGE)
            if self.delay is not None:
                check_delay(self.delay)
            if self.idempotency_key is not None:
                check_name(self.idempotency_key, "idempotency key", MAX_IDEMPOTENCY_KEY_LENGTH)
            if self.unique_key is not None:
                check_name(self.unique_key, "unique key", MAX_UNIQUE_KEY_LENGTH)
        except PayloadError as exc:
            raise TaskOptionError(str(exc)) from None
        self._check_uniqueness()
        self._check_dependencies()
        _check_expiry(self.expires_in, self.expires_at)
        if self.backoff is not None and not isinstance(self.backoff, Backoff):
            raise TaskOptionError(f"backoff must be a jobs.Backoff, not {self.backoff!r:.80}.")
        if self.timeout is not None and not _positive_seconds(self.timeout):
            raise TaskOptionError(f"timeout must be a positive number of seconds: {self.timeout!r}")
        if self.owner is not None:
            _check_owner(self.owner)
        DjangoTask.__post_init__(self)  # the backend's checks (Django's, and jobs')
        registry.register(self)

    def _check_rate(self):
        if self.rate_limit is not None:
            try:
                object.__setattr__(self, "rate_limit", parse_rate(self.rate_limit))
            except RateError as exc:
                raise TaskOptionError(str(exc)) from None
        if self.rate_key is not None:
            try:
                check_name(self.rate_key, "rate key", MAX_RATE_KEY_LENGTH)
            except PayloadError as exc:
                raise TaskOptionError(str(exc)) from None
        limited = self.rate_limit is not None or self.rate_key is not None
        if limited and (self.concurrency_key is not None or self.concurrency_limit is not None):
            raise TaskOptionError(
                "A task takes a rate limit or a concurrency limit, not both (each is a key of "
                "its own that the claim decides on): use one."
            )

    def _check_uniqueness(self):
        for name, allowed in (("unique_while", UNIQUE_WHILE), ("on_duplicate", ON_DUPLICATE)):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or value not in allowed):
                choices = " or ".join(repr(choice) for choice in allowed)
                raise TaskOptionError(f"{name} must be {choices}, not {value!r:.80}.")
        if self.unique_for is not None and not _unique_period_ok(self.unique_for):
            raise TaskOptionError(
                "unique_for must be a positive number of seconds (or a timedelta) up to "
                f"{MAX_UNIQUE_FOR.days} days: {self.unique_for!r:.80}"
            )
        if self.unique_while is not None and self.unique_for is not None:
            raise TaskOptionError(
                "Pass either unique_while or unique_for (a scope by status, or by time), not both."
            )

    def _check_dependencies(self):
        policy = self.on_dependency_failure
        if policy is not None and (
            not isinstance(policy, str) or policy not in ON_DEPENDENCY_FAILURE
        ):
            choices = " or ".join(repr(choice) for choice in ON_DEPENDENCY_FAILURE)
            raise TaskOptionError(f"on_dependency_failure must be {choices}, not {policy!r:.80}.")
        try:
            object.__setattr__(self, "depends_on", dependency_ids(self.depends_on))
        except (TypeError, ValueError) as exc:
            raise TaskOptionError(str(exc)) from None

    def s(self, *args, **kwargs) -> "Call":
        """This task called with ``args`` and ``kwargs``, for ``jobs.chain`` or ``jobs.batch``.

        In a chain, the call also receives the previous link's result, as its first argument;
        as a batch's callback, the batch's id. ``si()`` receives neither (Celery's signatures).
        """
        return Call(self, args, kwargs, receives=True)

    def si(self, *args, **kwargs) -> "Call":
        """This task called with exactly ``args`` and ``kwargs`` (see ``s``)."""
        return Call(self, args, kwargs, receives=False)

    def get_backend(self):
        if self.backend == JOBS_API:
            from jobs.backends import jobs_api_backend  # a cycle: it imports this module

            return jobs_api_backend()
        return DjangoTask.get_backend(self)

    def using(  # Django's, with jobs' options
        self,
        *,
        priority: int | None = None,
        queue_name: str | None = None,
        run_after: datetime | None = None,
        backend: str | None = None,
        queue: str | None = None,
        max_attempts: int | None = None,
        concurrency_key: str | None = None,
        concurrency_limit: int | None = None,
        rate_limit: Rate | str | None = None,
        rate_key: str | None = None,
        delay: float | timedelta | None = None,
        expires_in: float | timedelta | None = None,
        expires_at: datetime | None = None,
        owner: Any = None,
        summary: str | None = None,
        idempotency_key: str | None = None,
        unique_key: str | None = None,
        unique_while: str | None = None,
        unique_for: float | timedelta | None = None,
        on_duplicate: str | None = None,
        depends_on=None,
        on_dependency_failure: str | None = None,
    ) -> "JobsTask":
        """Return this task with the given options set (``None``: unchanged).

        Django's options (``priority``, ``queue_name``, ``run_after``, ``backend``) and jobs':
        ``queue`` (the same as ``queue_name``), ``max_attempts``, ``concurrency_key``,
        ``concurrency_limit``, ``rate_limit`` and ``rate_key`` (see the class), ``delay``
        (seconds or a timedelta from the enqueue; it replaces ``run_after``, and the other way
        round),
        ``expires_in`` or ``expires_at`` (a deadline to start by; each replaces the other),
        ``owner`` (who may see and cancel the task), ``summary`` (what the owner's pages call
        it), ``idempotency_key`` (an enqueue with a key already taken returns that task),
        ``unique_key``, ``unique_while``, ``unique_for`` and ``on_duplicate`` (see the class;
        ``unique_while`` replaces a ``unique_for``, and the other way round),
        ``depends_on`` (tasks, their ids or Django results: this one waits, ``blocked``, until
        they have finished) and ``on_dependency_failure`` ("cancel", the default, or "run": what
        happens to it when one of them fails or is cancelled; ``jobs.workflows``).
        """
        if queue is not None and queue_name is not None and queue != queue_name:
            raise ValueError("Pass either queue or queue_name (the same option), not both.")
        if run_after is not None and delay is not None:
            raise ValueError("Pass either run_after or delay, not both.")
        if unique_while is not None and unique_for is not None:
            raise TaskOptionError(
                "Pass either unique_while or unique_for (a scope by status, or by time), not both."
            )
        if expires_in is not None and expires_at is not None:
            raise ValueError("Pass either expires_in or expires_at, not both.")
        changes: dict[str, Any] = {
            name: value
            for name, value in (
                ("priority", priority),
                ("queue_name", queue_name if queue is None else queue),
                ("backend", backend),
                ("max_attempts", max_attempts),
                ("concurrency_key", concurrency_key),
                ("concurrency_limit", concurrency_limit),
                ("rate_limit", rate_limit),
                ("rate_key", rate_key),
                ("owner", owner),
                ("summary", summary),
                ("idempotency_key", idempotency_key),
                ("unique_key", unique_key),
                ("on_duplicate", on_duplicate),
                ("on_dependency_failure", on_dependency_failure),
            )
            if value is not None
        }
        if depends_on is not None:
            changes["depends_on"] = depends_on
        if run_after is not None:
            changes.update(run_after=run_after, delay=None)
        if delay is not None:
            changes.update(delay=delay, run_after=None)
        if unique_while is not None:
            changes.update(unique_while=unique_while, unique_for=None)
        if unique_for is not None:
            changes.update(unique_for=unique_for, unique_while=None)
        if expires_in is not None:
            changes.update(expires_in=expires_in, expires_at=None)
        if expires_at is not None:
            changes.update(expires_at=expires_at, expires_in=None)
        return replace(self, **changes)

    @property
    def queue(self) -> str:
        """The queue the task's rows go to (Django calls it ``queue_name``)."""
        return self.queue_name

    def enqueue_many(self, calls, *, batch_size: int = 5000) -> list:
        """Record many calls of this task in few statements; return the tasks' ids.

        See ``jobs.tasks.enqueueing.enqueue_many``: each call is a tuple of arguments, or
        ``(args, kwargs)``; this task's options apply to every one.
        """
        from jobs.tasks.enqueueing import enqueue_many  # jobs' models: app registry

        return enqueue_many(self, calls, batch_size=batch_size)

    def resolved_max_attempts(self) -> int:
        """The attempts a new row of this task gets: its own, else its backend's default."""
        if self.max_attempts is not None:
            return self.max_attempts
        return self.get_backend().max_attempts

    def resolved_concurrency(self) -> tuple[str | None, int | None]:
        """The concurrency key and limit of a new row: none, or both (see the fields)."""
        if self.concurrency_key is None and self.concurrency_limit is None:
            return None, None
        return self.concurrency_key or self.module_path, self.concurrency_limit or 1

    def resolved_rate(self) -> tuple[str | None, Rate | None]:
        """The rate key and limit of a new row: the task's own (a key needs a limit; a limit
        alone keys the task itself), else its queue's (``JOBS_QUEUES``), else none."""
        if self.rate_key is not None and self.rate_limit is None:
            raise TaskOptionError(
                f"The rate key {self.rate_key!r:.80} has no limit: give rate_limit too "
                '(such as "10/s"), on the task or in using().'
            )
        if self.rate_limit is not None:
            return self.rate_key or self.module_path, parse_rate(self.rate_limit)
        try:
            rate = queue_rate(jobs_settings.QUEUES, self.queue_name)
        except RateError as exc:
            raise TaskOptionError(f"JOBS_QUEUES[{self.queue_name!r}]: {exc}") from None
        if rate is None:
            return None, None
        if self.concurrency_key is not None or self.concurrency_limit is not None:
            raise TaskOptionError(
                f"The queue {self.queue_name!r} has a rate limit (JOBS_QUEUES), and a task with "
                "a concurrency limit cannot take one too: send it to another queue."
            )
        return queue_key(self.queue_name), rate

    def resolved_unique(self) -> "Uniqueness | None":
        """The uniqueness of a new row: none, or its key, scope and duplicate action."""
        if self.unique_key is None and self.unique_while is None and self.unique_for is None:
            return None
        period = self.unique_for
        if period is not None and not isinstance(period, timedelta):
            period = timedelta(seconds=period)
        return Uniqueness(
            key=self.unique_key or self.module_path,
            scope=None if period is not None else (self.unique_while or "waiting"),
            period=period,
            replace=self.on_duplicate == "replace",
        )

    def resolved_backoff(self) -> Backoff:
        return self.backoff or registry.default_backoff()

    def resolved_timeout(self) -> float:
        return jobs_settings.DEFAULT_TIMEOUT if self.timeout is None else self.timeout


@dataclass(frozen=True, slots=True)
class Call:
    """A task with its arguments, not enqueued yet: a link of a chain, a member or a callback
    of a batch (``JobsTask.s``). ``receives``: it also gets the previous link's result (a
    chain) or the batch's id (a callback), as its first argument."""

    task: JobsTask
    args: tuple = ()
    kwargs: dict | None = None
    receives: bool = True

    def __post_init__(self):
        if not isinstance(self.task, JobsTask):
            raise TaskOptionError(f"A call is of a jobs task, not {self.task!r:.80}.")
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "kwargs", dict(self.kwargs or {}))

    def using(self, **options) -> "Call":
        """This call with the task's options set (``JobsTask.using``)."""
        return replace(self, task=self.task.using(**options))


@dataclass(frozen=True, slots=True)
class Uniqueness:
    """What a new row of a task holds: its key, while a ``scope`` (``UNIQUE_WHILE``) or for a
    ``period``, and whether a duplicate replaces the waiting task's arguments."""

    key: str
    scope: str | None
    period: timedelta | None
    replace: bool


def _unique_period_ok(value) -> bool:
    if isinstance(value, timedelta):
        return timedelta(0) < value <= MAX_UNIQUE_FOR
    return _positive_seconds(value) and value <= MAX_UNIQUE_FOR.total_seconds()


def _positive_seconds(value) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def _check_owner(owner):
    """Refuse an owner that is no saved user when ``using()`` sets it, not at enqueue."""
    if getattr(owner, "is_authenticated", None) is False:
        return  # AnonymousUser: no owner
    from django.contrib.auth import get_user_model  # a user: the app registry is ready

    if not isinstance(owner, get_user_model()) or owner.pk is None:
        raise TaskOptionError(
            f"The owner must be a saved user (or AnonymousUser: no owner), not {owner!r:.80}."
        )


def _check_expiry(expires_in, expires_at):
    """Refuse a deadline no enqueue could use: ``expires_in`` must be seconds above 0 (or a
    timedelta) within 100 years, ``expires_at`` an aware datetime (checked against the clock
    at the enqueue: ``jobs.tasks.enqueueing.resolve_expires_at``)."""
    if expires_in is not None and expires_at is not None:
        raise TaskOptionError("Pass either expires_in or expires_at, not both.")
    if expires_in is not None:
        try:
            seconds = check_delay(expires_in).total_seconds()
        except PayloadError:
            seconds = 0.0
        if not seconds > 0:
            raise TaskOptionError(
                "expires_in must be seconds (a number or a timedelta) above 0 and within 100 "
                f"years, not {expires_in!r:.80}."
            )
    if expires_at is not None:
        if not isinstance(expires_at, datetime):
            raise TaskOptionError(f"expires_at must be a datetime, not {expires_at!r:.80}.")
        try:
            aware = expires_at.utcoffset() is not None
        except Exception:  # a tzinfo of the caller's own that raises
            aware = False
        if not aware:
            raise TaskOptionError(
                f"expires_at must be an aware datetime (with a time zone), not {expires_at!r:.80}."
            )


def _checked_transient(types) -> tuple:
    if isinstance(types, type):
        types = (types,)
    try:
        types = tuple(types)
    except TypeError:
        raise TaskOptionError(f"transient must be exception types, not {types!r:.80}.") from None
    for kind in types:
        if not (isinstance(kind, type) and issubclass(kind, BaseException)):
            raise TaskOptionError(f"transient must be exception types; {kind!r:.80} is not one.")
    return types
