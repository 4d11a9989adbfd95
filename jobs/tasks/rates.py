"""Rate limits: "at most N starts per period", read from text such as ``"10/s"`` or ``"100/m"``.

A limit is counted by the database, in windows of its period aligned on the epoch (a
second's window starts at each whole second, a minute's at each whole minute): the claim
starts at most ``count`` tasks of one key in a window, and the next ones wait, pending, for the
next window (``jobs.sql``: the ``jobs_ratewindow`` row of each key). Free of jobs' models, as
``jobs.tasks.definition``, which reads limits at import time, must be.
"""

import re
from dataclasses import dataclass

MAX_RATE_TEXT = 40  # characters of "10/s"; longer text is no rate
MAX_RATE_COUNT = 1_000_000  # starts per window: more is a typo, or no limit at all
MAX_RATE_PERIOD = 366 * 86400  # a window of a year and a day at most (seconds)
MAX_RATE_KEY_LENGTH = 200  # jobs.models.Task.rate_key's max_length

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_UNIT_WORDS = {"sec": "s", "second": "s", "min": "m", "minute": "m", "hour": "h", "day": "d"}
# "10/s", "100 / m", "5/10s", "1000/hour", "3/2 days": digits only, so no sign, no exponent,
# no NaN, no infinity.
_RATE = re.compile(r"(\d{1,7})\s*/\s*(\d{1,9})?\s*([a-z]+)", re.ASCII)
# The owner's and operator's words for one window.
_PER = {1: "a second", 60: "a minute", 3600: "an hour", 86400: "a day"}


class RateError(ValueError):
    """A rate limit that cannot be read; its message says what is expected."""


@dataclass(frozen=True, slots=True)
class Rate:
    """At most ``count`` starts per ``period`` seconds."""

    count: int
    period: int

    def __str__(self) -> str:
        return f"{self.count}/{self.period}s"

    @property
    def words(self) -> str:
        """Say the rate in words: "10 a second", "100 every 5 minutes"."""
        per = _PER.get(self.period)
        if per is not None:
            return f"{self.count:,} {per}"
        for seconds, unit in ((86400, "day"), (3600, "hour"), (60, "minute")):
            if self.period % seconds == 0:
                return f"{self.count:,} every {self.period // seconds:,} {unit}s"
        return f"{self.count:,} every {self.period:,} seconds"


EXPECTED = (
    'a rate such as "10/s", "100/m", "1000/h", "5/d" or "3/10s" (at most N starts per period; '
    f"N from 1 to {MAX_RATE_COUNT:,}, the period at most {MAX_RATE_PERIOD // 86400} days)"
)


def parse_rate(value) -> Rate:
    """Read ``value`` ("10/s", or a ``Rate``) as a ``Rate``; RateError when it is none."""
    if isinstance(value, Rate):
        return value
    if not isinstance(value, str):
        raise RateError(f"A rate limit must be {EXPECTED}, not {_shown(value)}.")
    if len(value) > MAX_RATE_TEXT:
        raise RateError(f"A rate limit must be {EXPECTED}; this text is {len(value):,} long.")
    match = _RATE.fullmatch(value.strip().lower())
    unit = _unit(match.group(3)) if match else None
    if match is None or unit is None:
        raise RateError(f"A rate limit must be {EXPECTED}, not {_shown(value)}.")
    count, multiple = int(match.group(1)), int(match.group(2) or 1)
    period = multiple * UNITS[unit]
    if not 1 <= count <= MAX_RATE_COUNT or not 1 <= period <= MAX_RATE_PERIOD:
        raise RateError(f"A rate limit must be {EXPECTED}, not {_shown(value)}.")
    return Rate(count, period)


def _shown(value) -> str:
    """``value`` as the message shows it: short, escaped (NUL, surrogates), never failing."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"a whole number of {value.bit_length():,} bits"  # repr refuses past 4,300 digits
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _unit(word: str) -> str | None:
    if word in UNITS:
        return word
    singular = word[:-1] if word.endswith("s") and len(word) > 1 else word
    return _UNIT_WORDS.get(word) or _UNIT_WORDS.get(singular)


def queue_rate(queues_setting, queue: str) -> Rate | None:
    """The rate limit ``JOBS_QUEUES`` gives ``queue`` (None: none). The setting is checked by
    ``jobs.checks``; an entry that cannot be read raises RateError here, at the enqueue."""
    entry = queues_setting.get(queue) if isinstance(queues_setting, dict) else None
    if not isinstance(entry, dict) or entry.get("rate_limit") is None:
        return None
    return parse_rate(entry["rate_limit"])


def queue_key(queue: str) -> str:
    """The rate key of a queue's limit: the tasks of every worker share it."""
    return f"queue:{queue}"
