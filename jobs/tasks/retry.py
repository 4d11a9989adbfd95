"""Retry policy: which errors are worth another attempt, and how long to wait before it.

Pure functions: no database, no clock; callers pass ``random`` when they want repeatability.
"""

import random as _random
from dataclasses import dataclass

from django.db import InterfaceError, OperationalError

from jobs import limits
from jobs.exceptions import TaskError

# Errors that say "not now" rather than "never": the network, a timeout, the database dropping.
TRANSIENT_TYPES = (ConnectionError, TimeoutError, OperationalError, InterfaceError)

GENERIC_RETRY_MESSAGE = "Something went wrong on our side. We will try again shortly."
GENERIC_FAILURE_MESSAGE = "Something went wrong on our side and the task could not be completed."


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff: ``base * factor ** (attempt - 1)`` seconds, capped at ``maximum``.

    ``jitter`` takes up to that fraction off each delay at random, so tasks that failed together
    do not all come back together, while the delay still grows with every attempt.
    """

    base: float = 2.0
    factor: float = 2.0
    maximum: float = 3600.0
    jitter: float = 0.25

    def __post_init__(self):
        fields = (self.base, self.factor, self.maximum, self.jitter)
        if (
            not all(limits.is_number(value) for value in fields)  # NaN, inf, "5", True
            or not limits.is_seconds(self.base, zero_allowed=True)
            or not limits.is_seconds(self.maximum, zero_allowed=True)
            or self.factor < 1
            or not 0 <= self.jitter < 1
        ):
            raise ValueError(
                "Backoff needs finite numbers: base and maximum seconds from 0 to "
                f"{limits.MAX_SECONDS:,}, factor >= 1 and 0 <= jitter < 1; got {self}"
            )

    def delay(self, attempt: int, random=_random) -> float:
        """Return the seconds to wait after failed attempt number ``attempt`` (1-based)."""
        try:
            grown = self.base * self.factor ** max(0, attempt - 1)
        except OverflowError:  # attempt 1,025 of a factor of 2: past any cap (of a base above 0)
            grown = self.maximum if self.base else 0.0
        raw = min(self.maximum, grown)
        return raw * (1 - self.jitter * random.random())


def is_transient(exc: BaseException, extra_transient: tuple = ()) -> bool:
    """Decide whether ``exc`` is worth retrying.

    A ``TaskError`` says so itself; otherwise the built-in transient types and those the task
    declared are retried, and everything else (a bug, bad input) fails at once.
    """
    if isinstance(exc, TaskError) and exc.transient is not None:
        return exc.transient
    return isinstance(exc, TRANSIENT_TYPES + tuple(extra_transient))


def user_message(exc: BaseException, will_retry: bool) -> str:
    """Return the message the task's owner sees: the task's own words, or a safe generic one."""
    if isinstance(exc, TaskError):
        return exc.user_message
    return GENERIC_RETRY_MESSAGE if will_retry else GENERIC_FAILURE_MESSAGE
