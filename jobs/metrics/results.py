"""What the functions of ``jobs.metrics`` return: plain frozen dataclasses."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta


@dataclass(frozen=True)
class Percentiles:
    """The median and 95th percentile of some durations (seconds), over ``count`` tasks."""

    p50: float | None = None
    p95: float | None = None
    count: int = 0


@dataclass(frozen=True)
class Outcomes:
    """How the tasks finished in a window ended."""

    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0

    @property
    def failure_rate(self) -> float | None:
        """Return failed / (succeeded + failed), or None when nothing ran to an end."""
        ran = self.succeeded + self.failed
        return self.failed / ran if ran else None


@dataclass(frozen=True)
class Retries:
    """Retry activity of a queue."""

    waiting: int = 0  # tasks in ``retrying`` now
    retried: int = 0  # tasks finished in the window that took more than one attempt
    extra_attempts: int = 0  # attempts beyond the first, summed over those tasks


@dataclass(frozen=True)
class Throughput:
    """Tasks finished per minute: ``per_queue[q][i]`` counts the minute ``minutes[i]``, the last
    of which is the current one, counted up to ``now``; ``last_minute[q]``, the 60 seconds
    before ``now``; ``seconds``, the time the minutes cover (the last one partly)."""

    minutes: list[datetime]
    per_queue: dict[str, list[int]] = field(default_factory=dict)
    last_minute: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def total(self) -> list[int]:
        """Return the per-minute counts summed over all queues."""
        return [sum(counts) for counts in zip(*self.per_queue.values(), strict=True)] or [
            0 for _ in self.minutes
        ]

    def per_minute(self, queue: str | None = None) -> float:
        """Return the average per minute over the time covered, for ``queue`` or for all."""
        counts = self.per_queue.get(queue, []) if queue else self.total()
        return sum(counts) * 60 / self.seconds if self.seconds else 0.0

    def in_last_minute(self, queue: str | None = None) -> int:
        """Return how many finished in the 60 seconds before ``now``, in ``queue`` or in all."""
        return self.last_minute.get(queue, 0) if queue else sum(self.last_minute.values())


@dataclass(frozen=True)
class WorkerStatus:
    """A live worker, as its heartbeat row and the tasks it holds describe it."""

    id: str
    hostname: str
    pid: int
    queues: list[str]  # empty: all queues
    concurrency: int
    # As reported at its last heartbeat: every task it holds (in a child, claimed ahead, or
    # its success not yet written), children running a task (at most ``concurrency``), and
    # tasks running in them (async tasks run several to a child).
    in_flight: int
    busy_processes: int
    running_tasks: int
    running: int  # tasks in ``running`` claimed by it, read now
    started_at: datetime
    last_heartbeat_at: datetime
    heartbeat_age: float
    # The most tasks of a queue it runs at once, by queue (runworker --queues imports:2).
    queue_caps: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class FailureGroup:
    """Tasks of one name that failed in the window with one exception class."""

    name: str
    exception: str
    count: int
    last_failed_at: datetime
    last_task_id: object
    last_message: str  # the developer's message of the latest failure in the group


@dataclass(frozen=True)
class LateTask:
    """A task waiting or running longer than its threshold; ``seconds`` says how long."""

    id: object
    name: str
    queue: str
    status: str
    since: datetime
    seconds: float


@dataclass(frozen=True)
class QueueOverview:
    """Everything the dashboard shows about one queue."""

    queue: str
    counts: dict[str, int]
    oldest_waiting: float | None
    oldest_waiting_level: str  # "ok", "warning" or "critical"
    throughput: list[int]
    throughput_per_minute: float
    run_time: Percentiles
    wait_time: Percentiles
    outcomes: Outcomes
    retries: Retries
    paused: bool
    finished_last_minute: int = 0  # in the 60 seconds before the snapshot


@dataclass(frozen=True)
class Snapshot:
    """The whole dashboard at one instant."""

    now: datetime
    window: timedelta
    queues: list[QueueOverview]
    throughput: Throughput
    workers: list[WorkerStatus]
    failures: list[FailureGroup]
    waiting_too_long: list[LateTask]
    running_too_long: list[LateTask]


@dataclass(frozen=True)
class ErrorGroup:
    """One distinct error of a window: the failed attempts of tasks of one name that raised one
    exception class at one place (``origin``: the innermost frame, "" for older entries)."""

    name: str
    exception: str
    origin: str
    tasks: int  # tasks with at least one such attempt in the window
    attempts: int  # such attempts, retried ones included
    first_at: datetime | None
    last_at: datetime | None
    last_task_id: str
    last_message: str
    last_traceback: str
