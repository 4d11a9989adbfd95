"""Health of the queue as one verdict, for probes: the command and the endpoint share it.

Unhealthy when any of these holds:

- a queue's oldest waiting task has waited longer than ``JOBS_HEALTH_MAX_WAIT_SECONDS``;
- a queue's failure rate over the last ``JOBS_HEALTH_FAILURE_WINDOW`` seconds is above
  ``JOBS_HEALTH_MAX_FAILURE_RATE``, counted once at least ``JOBS_HEALTH_FAILURE_MIN_TASKS`` tasks
  finished there (one failure out of one task is not an outage);
- no worker has sent a heartbeat in ``JOBS_HEALTH_HEARTBEAT_SECONDS``.
"""

from dataclasses import asdict, dataclass, field
from datetime import timedelta

from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from jobs import metrics
from jobs.conf import jobs_settings
from jobs.limits import MAX_COUNT, is_number, is_seconds, seconds_expected
from jobs.maintenance import pausing


@dataclass(frozen=True)
class Thresholds:
    """Limits of one health check; ``None`` fields take their ``JOBS_HEALTH_*`` setting."""

    max_wait: float | None = None
    max_failure_rate: float | None = None
    window: float | None = None
    min_tasks: int | None = None
    heartbeat: float | None = None

    def resolved(self) -> "Thresholds":
        def pick(value, setting):
            return getattr(jobs_settings, setting) if value is None else value

        return Thresholds(
            max_wait=pick(self.max_wait, "HEALTH_MAX_WAIT_SECONDS"),
            max_failure_rate=pick(self.max_failure_rate, "HEALTH_MAX_FAILURE_RATE"),
            window=pick(self.window, "HEALTH_FAILURE_WINDOW"),
            min_tasks=pick(self.min_tasks, "HEALTH_FAILURE_MIN_TASKS"),
            heartbeat=pick(self.heartbeat, "HEALTH_HEARTBEAT_SECONDS"),
        )


@dataclass(frozen=True)
class Problem:
    check: str  # "waiting", "failures" or "workers"
    message: str
    queue: str | None = None


@dataclass
class Health:
    """The verdict: healthy unless ``problems``; ``reason`` is the one-line summary."""

    problems: list[Problem] = field(default_factory=list)
    queues: int = 0
    heartbeat_age: float | None = None
    # Paused task types, and their due tasks in the queues judged: they wait by an operator's
    # choice, so they are told of, not counted against the queue (``jobs.maintenance.pausing``).
    paused_task_types: list[str] = field(default_factory=list)
    paused_waiting: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def reason(self) -> str:
        if self.ok:
            beat = (
                ""
                if self.heartbeat_age is None
                else f", last heartbeat {self.heartbeat_age:.0f}s ago"
            )
            return f"OK: {self.queues} queues within limits{beat}{self._paused()}"
        problems = "; ".join(problem.message for problem in self.problems)
        return f"UNHEALTHY: {problems}{self._paused()}"

    def _paused(self) -> str:
        if not self.paused_task_types:
            return ""
        names = ", ".join(self.paused_task_types)
        return f"; paused task types: {names} ({self.paused_waiting} tasks waiting)"

    def as_dict(self) -> dict:
        return {
            "status": "ok" if self.ok else "unhealthy",
            "reason": self.reason,
            "problems": [asdict(problem) for problem in self.problems],
            "paused_task_types": self.paused_task_types,
            "paused_waiting": self.paused_waiting,
        }


def check(thresholds: Thresholds | None = None, *, now=None, queues=None) -> Health:
    """Judge the queue at ``now``; with ``queues``, judge only those queues."""
    limits = (thresholds or Thresholds()).resolved()
    problems = threshold_problems(limits, zero_allowed=True)
    if problems:  # no verdict on thresholds that cannot judge ("no heartbeat in infs")
        raise ImproperlyConfigured(" ".join(message for _, message in problems))
    now = now or timezone.now()
    health = Health()

    def wanted(queue):
        return not queues or queue in queues

    paused_types = pausing.paused_task_types()
    oldest = metrics.oldest_waiting(now=now, except_names=paused_types)
    waiting = {q: age for q, age in oldest.items() if wanted(q)}
    health.paused_task_types = sorted(paused_types)
    health.paused_waiting = sum(
        n for q, n in metrics.waiting_of_names(paused_types, now=now).items() if wanted(q)
    )
    for queue, age in sorted(waiting.items()):
        if age > limits.max_wait:
            health.problems.append(
                Problem(
                    "waiting",
                    f"queue {queue}: oldest waiting task has waited {age:.0f}s "
                    f"(limit {limits.max_wait:.0f}s)",
                    queue,
                )
            )
    ends = metrics.outcomes(now=now, window=timedelta(seconds=limits.window))
    for queue, outcome in sorted(ends.items()):
        ran = outcome.succeeded + outcome.failed
        rate = outcome.failure_rate
        if wanted(queue) and ran and ran >= limits.min_tasks and rate > limits.max_failure_rate:
            health.problems.append(
                Problem(
                    "failures",
                    f"queue {queue}: {rate:.0%} of {ran} tasks failed in the last "
                    f"{limits.window:.0f}s (limit {limits.max_failure_rate:.0%})",
                    queue,
                )
            )
    health.heartbeat_age = metrics.last_heartbeat_age(now=now)
    if health.heartbeat_age is None or health.heartbeat_age > limits.heartbeat:
        since = (
            "no worker is running"
            if health.heartbeat_age is None
            else f"last heartbeat {health.heartbeat_age:.0f}s ago"
        )
        health.problems.append(
            Problem(
                "workers",
                f"no worker heartbeat in {limits.heartbeat:.0f}s ({since})",
            )
        )
    health.queues = len([queue for queue in metrics.queue_names() if wanted(queue)])
    return health


def threshold_problems(thresholds: Thresholds, *, zero_allowed=False) -> list[tuple[str, str]]:
    """Say what is wrong with resolved ``thresholds``; the checks and ``check`` share the rules.

    ``zero_allowed`` for a one-off judgement (``jobs_health --max-wait 0``: any wait is too long).
    Each problem is ``(check id, message)``.
    """
    problems = []
    seconds = {
        "HEALTH_MAX_WAIT_SECONDS": thresholds.max_wait,
        "HEALTH_FAILURE_WINDOW": thresholds.window,
        "HEALTH_HEARTBEAT_SECONDS": thresholds.heartbeat,
    }
    for name, value in seconds.items():
        if not is_seconds(value, zero_allowed=zero_allowed):
            expected = seconds_expected(zero_allowed=zero_allowed)
            problems.append(("jobs.E301", f"JOBS_{name} must be {expected}, got {value!r}."))
    rate = thresholds.max_failure_rate
    if not is_number(rate) or not 0 <= rate <= 1:
        problems.append(
            (
                "jobs.E302",
                f"JOBS_HEALTH_MAX_FAILURE_RATE must be a fraction from 0 to 1, got {rate!r}.",
            )
        )
    minimum = thresholds.min_tasks
    if not isinstance(minimum, int) or isinstance(minimum, bool) or not 0 <= minimum <= MAX_COUNT:
        problems.append(
            (
                "jobs.E303",
                f"JOBS_HEALTH_FAILURE_MIN_TASKS must be a whole number from 0 to "
                f"{MAX_COUNT:,}, got {minimum!r}.",
            )
        )
    return problems
