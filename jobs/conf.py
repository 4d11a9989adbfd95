"""Settings of jobs, read lazily so that importing jobs never touches django.conf too early.

Every setting is named ``JOBS_<NAME>`` in the project's settings; ``jobs_settings.NAME`` reads it
at its first use, falling back to the default below, and keeps the value: Django sends
``setting_changed`` whenever a setting changes (``override_settings``, pytest-django's
``settings``), and the values kept are forgotten then. A setting left at its default cost about
2 µs a read otherwise (Django raises and catches an AttributeError each time), a few of them per
task on the worker's path (``benchmarks/result_check.py``). Django sends nothing when a setting
is deleted (pytest-django's ``del settings.X``): ``jobs_settings.forget()`` then.
"""

from django.conf import settings
from django.core.signals import setting_changed

from jobs.states import Status

DEFAULTS = {
    # Enqueue
    "DEFAULT_QUEUE": "default",
    "DEFAULT_PRIORITY": 0,
    "DEFAULT_MAX_ATTEMPTS": 3,
    "MAX_PAYLOAD_BYTES": 256 * 1024,
    # A task's return value, stored as JSON on its row: a larger one fails the task.
    "MAX_RESULT_BYTES": 1024 * 1024,
    # Retry policy: delay = BACKOFF_BASE * BACKOFF_FACTOR ** (attempt - 1), capped, with jitter.
    "BACKOFF_BASE": 2.0,
    "BACKOFF_FACTOR": 2.0,
    "BACKOFF_MAX": 3600.0,
    "BACKOFF_JITTER": 0.25,
    # Times a task may snooze (jobs.Snooze) before its next snooze fails it instead.
    "MAX_SNOOZES": 100,
    # Per queue: {"emails": {"rate_limit": "10/s"}}, at most that many starts of the queue's
    # tasks per period across every worker (jobs.tasks.rates); read at each enqueue.
    "QUEUES": {},
    # Worker
    "DEFAULT_TIMEOUT": 30 * 60.0,
    "LEASE_SECONDS": 60.0,
    "POLL_INTERVAL": 1.0,
    # The database alias whose connection LISTENs for new tasks (PostgreSQL); None: the task
    # table's own. Name a direct connection when that one goes through a pooler in transaction
    # mode (PgBouncer): LISTEN cannot work there, and without it the worker polls.
    "LISTEN_DATABASE": None,
    # Instant rescue across hosts (jobs.worker.session): each worker holds a session-level
    # advisory lock on a direct PostgreSQL connection, and a worker whose lock is free is dead.
    # None: on where it can be (PostgreSQL, the task table's connections keep their sessions);
    # False: off (the pid on one host, else the lease); True: as None, and a worker that cannot
    # says so at WARNING rather than INFO.
    "SESSION_RESCUE": False,
    # How workers learn of new tasks: None / "database", or a Redis URL (jobs.transports).
    "TRANSPORT": None,
    "CONCURRENCY": 4,
    # The highest --concurrency / JOBS_CONCURRENCY a worker accepts (see jobs.limits).
    "MAX_CONCURRENCY": 256,
    # Quick tasks go to a child in batches: at most BATCH_SIZE tasks, and no task of a batch
    # starts once the batch has run BATCH_SECONDS (the rest go back to the worker for another
    # child). Slow tasks go one at a time.
    "BATCH_SIZE": 100,
    "BATCH_SECONDS": 0.02,
    # Async tasks (``async def``) of a batch run together on a child's event loop, at most
    # this many at a time.
    "ASYNC_CONCURRENCY": 100,
    # Seconds running tasks get to finish after SIGTERM before they are stopped and handed back.
    "SHUTDOWN_GRACE": 30.0,
    # Seconds a running task may ignore a cancellation before its process is stopped.
    "CANCEL_GRACE": 10.0,
    # Replace a child process after this many tasks / above this resident size (MiB); None: never.
    "MAX_TASKS_PER_CHILD": None,
    "MAX_MEMORY_PER_CHILD": None,
    # One INFO line per batch reply for the quick successes a child reports to the supervisor
    # (each task's own line at DEBUG); True: an INFO line per task, as for every other outcome.
    "LOG_EACH_SUCCESS": False,
    # Seconds between a worker's maintenance rounds (rescue of tasks whose worker died, ...).
    "MAINTENANCE_INTERVAL": 5.0,
    # One worker of the fleet runs the maintenance rounds, under a lease it renews each round;
    # when it dies, another takes over once this many seconds pass. None: 4 maintenance intervals.
    "LEADER_LEASE_SECONDS": None,
    # The most children of one worker that hold a database connection at once; None: one per
    # child. Below --concurrency, a child closes its connection after each task (and waits for
    # a free slot before it opens one), so a fleet's connections stay bounded.
    "CHILD_CONNECTIONS": None,
    # Seconds a bookkeeping write keeps retrying through database faults before giving up.
    "DATABASE_RETRY_SECONDS": 60.0,
    # Admin dashboard and metrics: seconds the oldest due task may wait before it shows amber
    # (warning) or red (critical); a task running longer than RUNNING_WARNING needs attention.
    "WAITING_WARNING_SECONDS": 60.0,
    "WAITING_CRITICAL_SECONDS": 300.0,
    "RUNNING_WARNING_SECONDS": 900.0,
    # How far back timings, failure rates, retries and failure groups look; how often the
    # dashboard, the task list and the task page poll for their figures (seconds).
    "METRICS_WINDOW_SECONDS": 3600.0,
    "DASHBOARD_REFRESH_SECONDS": 10,
    # Pruning: how long finished tasks are kept, by status (seconds or a timedelta; None keeps
    # them for ever), and how many rows one DELETE removes.
    "PRUNE_AFTER": {
        Status.SUCCEEDED.value: 7 * 86400,
        Status.FAILED.value: 30 * 86400,
        Status.CANCELLED.value: 30 * 86400,
    },
    "PRUNE_BATCH_SIZE": 1000,
    # Automatic pruning by workers (one at a time), every PRUNE_INTERVAL seconds, at most
    # PRUNE_MAX_BATCHES batches per maintenance round so a worker never stops claiming for long.
    "AUTO_PRUNE": False,
    "PRUNE_INTERVAL": 3600.0,
    "PRUNE_MAX_BATCHES": 10,
    # History: days the hourly rollups of finished tasks are kept (the dashboard's week chart
    # and the task type pages read them); pruning tasks erases none of them.
    "HISTORY_KEEP_DAYS": 14,
    # Periodic tasks: {"name": {"task": ..., "cron": "*/5 * * * *" or "every": seconds, ...}}.
    "SCHEDULES": {},
    # Health: thresholds of `jobs_health` and the health endpoint.
    "HEALTH_MAX_WAIT_SECONDS": 600.0,
    "HEALTH_MAX_FAILURE_RATE": 0.5,
    "HEALTH_FAILURE_WINDOW": 900.0,
    "HEALTH_FAILURE_MIN_TASKS": 10,
    "HEALTH_HEARTBEAT_SECONDS": 120.0,
    # Bearer token that may read the metrics endpoint besides staff; None: staff only.
    "METRICS_TOKEN": None,
}


class JobsSettings:
    def __getattr__(self, name):
        """The setting ``name``, read once: kept in the instance's ``__dict__``, where the next
        read finds it without calling this."""
        if name not in DEFAULTS:
            raise AttributeError(f"jobs has no setting named {name!r}")
        value = self.__dict__[name] = getattr(settings, f"JOBS_{name}", DEFAULTS[name])
        return value

    def forget(self):
        """Read every setting afresh at its next use (a setting changed)."""
        self.__dict__.clear()


jobs_settings = JobsSettings()


def _setting_changed(*, setting: str, **kwargs):
    if setting.startswith("JOBS_"):
        jobs_settings.forget()


setting_changed.connect(_setting_changed, dispatch_uid="jobs.conf")
