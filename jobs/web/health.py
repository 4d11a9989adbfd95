"""Health of the queue as one verdict, for probes: the command and the endpoint share it.

Unhealthy when any of these holds:

- a queue's oldest waiting task has waited longer than ``JOBS_HEALTH_MAX_WAIT_SECONDS``;
- a queue's failure rate over the last ``JOBS_HEALTH_FAILURE_WINDOW`` seconds is above
  ``JOBS_HEALTH_MAX_FAILURE_RATE``, counted once at least ``JOBS_HEALTH_FAILURE_MIN_TASKS`` tasks
  finished there (one failure out of one task is not an outage);
- no worker has sent a heartbeat in ``JOBS_HEALTH_HEARTBEAT_SECONDS``.

Problems come worst first: no worker (nothing runs at all), then queues waiting too long (the
longest wait first), then failure spikes (the highest rate first). Each has a ``message`` (the
probe's line) and a ``headline`` and ``advice`` in the words of an operator, which the admin
dashboard's banner shows: the banner and the probe read this one judgement. A paused queue is
no problem: its tasks wait because an operator asked them to, so its waiting age is not judged;
the verdict names it among ``paused`` instead, healthy or not.
"""

from dataclasses import asdict, dataclass, field
from datetime import timedelta

from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from jobs import metrics
from jobs.conf import jobs_settings
from jobs.humanize import seconds_text
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
    check: str  # "workers", "waiting" or "failures", the order of their severity
    message: str  # the probe's line: terse, with the figures in seconds
    queue: str | None = None
    headline: str = ""  # what is wrong, in an operator's words
    advice: str = ""  # what to do about it


@dataclass(frozen=True)
class Paused:
    """A paused queue: not a problem, but named in the verdict."""

    queue: str
    paused_at: str  # ISO 8601
    paused_by: str | None  # the username, None when unknown (paused in code, user deleted)
    message: str


@dataclass
class Health:
    """The verdict: healthy unless ``problems``; ``reason`` is the one-line summary."""

    problems: list[Problem] = field(default_factory=list)
    queues: int = 0
    heartbeat_age: float | None = None
    paused: list[Paused] = field(default_factory=list)
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
            line = f"OK: {self.queues} queues within limits{beat}"
        else:
            line = "UNHEALTHY: " + "; ".join(problem.message for problem in self.problems)
        return "; ".join([line, *(pause.message for pause in self.paused)]) + self._types_text()

    def _types_text(self) -> str:
        if not self.paused_task_types:
            return ""
        names = ", ".join(self.paused_task_types)
        return f"; paused task types: {names} ({self.paused_waiting} tasks waiting)"

    def as_dict(self) -> dict:
        return {
            "status": "ok" if self.ok else "unhealthy",
            "reason": self.reason,
            "problems": [asdict(problem) for problem in self.problems],
            "paused": [asdict(pause) for pause in self.paused],
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

    health.paused = [_paused(pause) for pause in pausing.pauses() if wanted(pause.queue)]
    paused = {pause.queue for pause in health.paused}
    health.heartbeat_age = metrics.last_heartbeat_age(now=now)
    if health.heartbeat_age is None or health.heartbeat_age > limits.heartbeat:
        health.problems.append(_no_worker(health.heartbeat_age, limits.heartbeat))
    paused_types = pausing.paused_task_types()
    oldest = metrics.oldest_waiting(now=now, except_names=paused_types)
    waiting = {q: age for q, age in oldest.items() if wanted(q) and q not in paused}
    health.paused_task_types = sorted(paused_types)
    health.paused_waiting = sum(
        n for q, n in metrics.waiting_of_names(paused_types, now=now).items() if wanted(q)
    )
    for queue, age in sorted(waiting.items(), key=lambda item: (-item[1], item[0])):
        if age > limits.max_wait:
            health.problems.append(
                Problem(
                    "waiting",
                    f"queue {queue}: oldest waiting task has waited {age:.0f}s "
                    f"(limit {limits.max_wait:.0f}s)",
                    queue,
                    headline=f"Queue {queue}: the oldest waiting task has waited "
                    f"{seconds_text(age)} (limit {seconds_text(limits.max_wait)})",
                    advice=f"start more workers, or one that serves it "
                    f"(manage.py runworker --queues {queue})",
                )
            )
    ends = metrics.outcomes(now=now, window=timedelta(seconds=limits.window))
    spikes = []
    for queue, outcome in ends.items():
        ran = outcome.succeeded + outcome.failed
        rate = outcome.failure_rate
        if wanted(queue) and ran and ran >= limits.min_tasks and rate > limits.max_failure_rate:
            spikes.append((queue, ran, rate))
    for queue, ran, rate in sorted(spikes, key=lambda spike: (-spike[2], spike[0])):
        window = seconds_text(limits.window)
        health.problems.append(
            Problem(
                "failures",
                f"queue {queue}: {rate:.0%} of {ran} tasks failed in the last "
                f"{limits.window:.0f}s (limit {limits.max_failure_rate:.0%})",
                queue,
                headline=f"Queue {queue}: {rate:.0%} of {ran} tasks failed in the last "
                f"{window} (limit {limits.max_failure_rate:.0%})",
                advice="read their errors on the Errors page",
            )
        )
    health.queues = len([queue for queue in metrics.queue_names() if wanted(queue)])
    return health


def _no_worker(age: float | None, limit: float) -> Problem:
    since = "no worker is running" if age is None else f"last heartbeat {age:.0f}s ago"
    if age is None:
        headline = "No worker is running: nothing is being run"
    else:
        headline = f"No worker has sent a heartbeat for {seconds_text(max(1, round(age)))}"
    return Problem(
        "workers",
        f"no worker heartbeat in {limit:.0f}s ({since})",
        headline=headline,
        advice="start one with manage.py runworker",
    )


def _paused(pause) -> Paused:
    by = pause.paused_by.get_username() if pause.paused_by else None
    return Paused(
        queue=pause.queue,
        paused_at=pause.paused_at.isoformat(),
        paused_by=by,
        message=f"queue {pause.queue} paused",
    )


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
