"""Exceptions of jobs, under one base.

Errors raised *by tasks* carry two messages kept apart: ``user_message`` is safe to show the
person who started the task; the exception's own text and traceback are for developers.
"""

from jobs.text import clean_text


class JobsError(Exception):
    """Base of every exception jobs raises or understands."""


class TaskError(JobsError):
    """Raise from a task to control how its failure is recorded and shown."""

    transient: bool | None = None

    def __init__(self, user_message: str, *, detail: str = ""):
        # Shown to the person and stored: a NUL would make PostgreSQL refuse the whole record,
        # so both messages are mended (jobs.text.clean_text) rather than the task's
        # outcome lost.
        self.user_message = clean_text(user_message)
        super().__init__(clean_text(detail) if detail else self.user_message)


class PermanentError(TaskError):
    """The task cannot succeed by trying again (bad input): fail at once."""

    transient = False


class TransientError(TaskError):
    """The task may succeed later (a service is down): retry with backoff."""

    transient = True


class PayloadError(JobsError, ValueError, TypeError):
    """The arguments of an enqueue are not JSON, or are too large.

    Both a ``TypeError``, what Django Tasks raise for a value that is not JSON, and a
    ``ValueError``, what jobs raised before: ``except`` clauses written for either catch it.
    """


class UnknownTaskError(JobsError, LookupError):
    """No task is registered under that name."""


class TaskTimeout(TransientError, TimeoutError):
    """The task ran past its timeout and was stopped (transient: retried under its policy)."""


class WorkerLost(JobsError):
    """The worker running the task stopped renewing its lease."""


class TaskCancelled(JobsError):
    """Raised inside a task at a checkpoint when its cancellation was requested."""


class Snooze(JobsError):
    """Raise (or return) from a task to run it again in ``seconds``, as if it had not started.

    Not a failure: no attempt is used, no error is recorded, no failure signal is sent; the
    task waits (``pending``) until ``now + seconds``, then any worker claims it as usual. For a
    service that says "not now" (an HTTP 429 with ``Retry-After``), a lock held elsewhere, a
    file not there yet. ``seconds`` is a number or a ``timedelta``, from 0 to 100 years
    (``jobs.tasks.payload.check_delay``'s bound); anything else is refused here, where the task
    is, with a ``PayloadError`` (a ``ValueError`` and ``TypeError``), which fails the attempt.
    A task snoozes at most ``JOBS_MAX_SNOOZES`` times; the next snooze fails it
    (docs/howto/flow-control.md, "Snooze").
    """

    def __init__(self, seconds=0):
        self.seconds = snooze_seconds(seconds)
        super().__init__(f"snooze {self.seconds:g} s")

    def __reduce__(self):  # pickled as its seconds (multiprocessing, copies), not its message
        return (type(self), (self.seconds,))


def snooze_seconds(seconds) -> float:
    """Return ``seconds`` (a number or a timedelta) as a float from 0 to 100 years; raise
    PayloadError for anything else (NaN, infinity, negative, a string)."""
    from jobs.tasks.payload import check_delay  # a cycle: payload imports this module

    try:
        delay = check_delay(seconds).total_seconds()
    except PayloadError:
        delay = -1.0
    if delay < 0:
        raise PayloadError(
            f"Snooze takes seconds (a number or a timedelta) from 0 to 100 years, "
            f"not {seconds!r:.80}."
        )
    return delay


class ReportRefused(JobsError):
    """The database refused to store what a running task reported (progress, a step's result).

    Raised inside the task, like any exception of its own: the task's policy applies (it fails,
    unless it declared this class transient). Connection faults are not this: they stay
    ``OperationalError``, transient.
    """


class WorkerCrashed(TransientError):
    """The child process running the task exited before recording an outcome."""


class MemoryLimitExceeded(TransientError):
    """The child process running the task grew past the worker's memory limit."""
