"""Bounds of the numbers an operator gives jobs: command options and the ``JOBS_*`` settings.

One place, so that ``runworker --poll-interval`` and ``JOBS_POLL_INTERVAL`` refuse the same
values. Every number must be finite; every duration at most ``MAX_SECONDS`` (a year: a longer
interval is a typo, and past about 2.7 million years ``timedelta`` itself overflows).
"""

import math

from jobs.conf import jobs_settings

MAX_SECONDS = 365 * 86400
# The least interval between two looks at the database (JOBS_POLL_INTERVAL, --poll-interval):
# shorter, an idle worker busy-polls (5e-324 kept a core at 40 %) and gains nothing, as a
# notification or a finished task wakes it at once anyway.
MIN_INTERVAL_SECONDS = 0.01
# Tasks run at once by one worker, one process each: past this, a typo (--concurrency 100000)
# forks until the host runs out of memory. JOBS_MAX_CONCURRENCY raises it for a large host.
DEFAULT_MAX_CONCURRENCY = 256
MAX_TASKS_PER_CHILD = 10**9
MAX_MEMORY_PER_CHILD_MIB = 2**20  # 1 TiB
MAX_ASYNC_CONCURRENCY = 100_000  # coroutines of one child at a time
MAX_BATCH_SIZE = 100_000  # rows per DELETE of the pruner
# JOBS_MAX_PAYLOAD_BYTES: a task's arguments, stored as JSON; PostgreSQL's jsonb holds < 256 MiB.
MAX_PAYLOAD_BYTES = 2**27  # 128 MiB
MAX_RESULT_BYTES = 2**27  # JOBS_MAX_RESULT_BYTES: a return value, the same jsonb column
MAX_COUNT = 10**9  # thresholds that count tasks (jobs_health --min-tasks)
MAX_RETENTION_DAYS = 36_500  # jobs_prune --keep STATUS=DAYS; "forever" keeps them for ever
MAX_RETENTION_SECONDS = MAX_RETENTION_DAYS * 86400  # JOBS_PRUNE_AFTER, the same hundred years


def max_concurrency() -> int:
    """The highest ``--concurrency`` (and ``JOBS_CONCURRENCY``): ``JOBS_MAX_CONCURRENCY``."""
    return jobs_settings.MAX_CONCURRENCY


def is_number(value) -> bool:
    """Whether ``value`` is a real, finite number (``bool`` is not one, nor NaN or infinity)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    # An int is always finite; math.isfinite would overflow on one of 400 digits.
    return isinstance(value, int) or math.isfinite(value)


def is_seconds(value, *, zero_allowed=False, most=MAX_SECONDS) -> bool:
    """Whether ``value`` is a finite number of seconds above 0 (or from 0) and at most ``most``."""
    if not is_number(value):
        return False
    return (value >= 0 if zero_allowed else value > 0) and value <= most


def seconds_expected(*, zero_allowed=False, most=MAX_SECONDS) -> str:
    """What ``is_seconds`` accepts, in words, for the error that refuses a value."""
    low = "from 0" if zero_allowed else "above 0"
    return f"a finite number of seconds {low} and at most {most:,}"
