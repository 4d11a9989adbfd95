"""The task record, and the read-side names that the rest of jobs queries it by."""

import uuid
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from jobs.conf import jobs_settings
from jobs.states import CLAIMABLE, TERMINAL, Status, WorkflowStatus

CLAIMABLE_STATUSES = sorted(CLAIMABLE)
# The rows that hold their unique key (``Task.unique_while``): waiting ones that never started,
# and active ones (waiting or running). The condition of the partial unique index that decides.
UNIQUE_HELD = Q(unique_while="waiting", status=Status.PENDING, started_at__isnull=True) | Q(
    unique_while="active", status__in=[*CLAIMABLE_STATUSES, Status.RUNNING]
)


class TaskQuerySet(models.QuerySet):
    def pending(self):
        return self.filter(status=Status.PENDING)

    def running(self):
        return self.filter(status=Status.RUNNING)

    def claimable(self):
        """Waiting to run, whether or not ``run_after`` has passed."""
        return self.filter(status__in=CLAIMABLE_STATUSES)

    def due(self, now=None):
        """Claimable now."""
        return self.claimable().filter(run_after__lte=now or timezone.now())

    def expired(self, now=None):
        """Waiting, but past their deadline (``expires_at``): never to start. The partial index
        jobs_task_waiting_expiry_idx holds exactly the waiting rows with a deadline."""
        return self.claimable().filter(
            expires_at__isnull=False, expires_at__lte=now or timezone.now()
        )

    def finished(self):
        return self.filter(status__in=sorted(TERMINAL))

    def stale(self, now=None):
        """Running, but the claiming worker's lease has expired: the worker is gone."""
        return self.running().filter(lease_expires_at__lt=now or timezone.now())

    def owned_by(self, user):
        return self.filter(owner=user)


class Workflow(models.Model):
    """Tasks enqueued as one: a chain (each after the previous one) or a batch (with callbacks).

    Its members are the tasks whose ``workflow`` it is (``workflow_role`` "member"); a batch's
    callbacks are tasks of it too, one per role ("on_success", "on_failure", "on_finish"),
    enqueued with it, ``blocked``, and released or cancelled in the transaction that records the
    last member's outcome (``jobs.workflows.settle``). Its progress is counted from its members
    (``jobs.workflows.progress``), not kept in counters, so no outcome path can make it drift.
    """

    class Kind(models.TextChoices):
        CHAIN = "chain", "Chain"
        BATCH = "batch", "Batch"

    State = WorkflowStatus

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    status = models.CharField(max_length=16, choices=State.choices, default=State.RUNNING)
    summary = models.CharField(max_length=255, blank=True, default="")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="jobs_workflows",
    )
    total = models.PositiveIntegerField(default=0, help_text="Members, callbacks not counted.")
    # How its progress names a member: "7 of 10 files imported"; no noun: "7 of 10 done".
    noun = models.CharField(max_length=40, blank=True, default="", help_text='"file"')
    noun_plural = models.CharField(max_length=40, blank=True, default="", help_text='"files"')
    verb = models.CharField(max_length=40, default="done", help_text='"imported"')
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "-created_at"], name="jobs_workflow_status_idx")]

    def __str__(self):
        return f"{self.kind} {self.summary or self.pk}"


class Task(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200, help_text="Registered name of the task.")
    # The Django Tasks backend alias, for tasks enqueued through django.tasks; empty otherwise.
    backend = models.CharField(max_length=100, blank=True, default="")
    queue = models.CharField(max_length=100, default="default")
    priority = models.SmallIntegerField(default=0, help_text="Higher runs first.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)

    payload = models.JSONField(default=dict, help_text='{"args": [...], "kwargs": {...}}')
    summary = models.CharField(max_length=255, blank=True, default="")
    # NULL, not "", means "no key": the unique constraint only covers rows that have one.
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    # No index of its own: jobs_task_owner_created_idx starts with owner_id and serves the
    # owner's list and the SET NULL on user deletion; one index fewer makes every write cheaper.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="jobs_tasks",
        db_index=False,
    )

    # At most ``concurrency_limit`` tasks of one key run at once, across every worker: the claim
    # decides (``jobs.sql``). NULL, not "": no key, no limit (docs/howto/flow-control.md).
    concurrency_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    concurrency_limit = models.PositiveIntegerField(null=True, blank=True)
    # At most ``rate_limit`` starts of one key per ``rate_period`` seconds, across every worker:
    # the claim counts them in ``RateWindow`` (``jobs.tasks.rates``). NULL: no limit.
    rate_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    rate_limit = models.PositiveIntegerField(null=True, blank=True)
    rate_period = models.PositiveIntegerField(null=True, blank=True)
    # One task per key of a task name at a time (``jobs.tasks.uniqueness``): while it has not
    # started (``unique_while`` "waiting") or until it finishes ("active"), which a partial
    # unique index decides; with a period (``UniqueHold``), ``unique_while`` is NULL.
    unique_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    unique_while = models.CharField(max_length=16, null=True, blank=True)  # noqa: DJ001

    attempts = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=3)
    run_after = models.DateTimeField(default=timezone.now, help_text="Not claimed before this.")
    # Not started by then, never started: the claim skips it, maintenance cancels it ("expired").
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Never started after this.")
    # Times the task asked to run later (jobs.Snooze); JOBS_MAX_SNOOZES bounds it.
    snoozes = models.PositiveIntegerField(default=0, db_default=0)

    progress_current = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(null=True, blank=True)
    progress_message = models.CharField(max_length=255, blank=True, default="")
    # Results of named steps live in TaskStep, one row per step: recording a step costs one
    # INSERT whatever the number before it (a JSON column of all of them was rewritten whole at
    # each step: 10,001 rewrites of 212 KB for one import of a million rows).

    result = models.JSONField(null=True, blank=True)
    # Set by the task (TaskContext.mark_result_public) when its owner may read the result.
    # db_default too, so rows inserted by raw SQL (bulk loads, other tools) get False as well.
    result_public = models.BooleanField(default=False, db_default=False)
    last_error = models.TextField(blank=True, default="", help_text="Message for the user.")
    # One entry per failed attempt: exception class, message, traceback, user message, when.
    error_details = models.JSONField(default=list, blank=True)

    worker_id = models.CharField(max_length=100, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    # Who cancelled it, or asked it to stop, so the owner's page can say so when it was someone
    # else. None: not cancelled, ended by the system (expired), or by a user since deleted. No
    # index: only read with the task.
    cancelled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )

    # Workflows (jobs.workflows): the chain or batch it is part of, and as what ("member", or a
    # batch's callback: "on_success", "on_failure", "on_finish"); "" for a task of none.
    workflow = models.ForeignKey(
        Workflow,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="tasks",
        db_index=False,  # jobs_task_workflow_idx, partial, serves it
    )
    workflow_role = models.CharField(max_length=16, blank=True, default="", db_default="")
    # Whether other tasks wait for this one (TaskDependency): its outcome releases or cancels
    # them, in the same transaction. Read back by the outcome's own statement, so a dependent
    # enqueued while this one runs is never missed.
    has_dependents = models.BooleanField(default=False, db_default=False)

    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = TaskQuerySet.as_manager()
    # Set on what enqueue returns: False when an idempotency or unique key found an existing
    # task; ``replaced`` when that task took the duplicate's arguments (on_duplicate="replace").
    created: bool
    replaced: bool

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["name", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="jobs_task_unique_idempotency_key",
            ),
            models.CheckConstraint(
                condition=Q(status__in=Status.values), name="jobs_task_status_valid"
            ),
            # A rate key comes with its limit and period: the claim divides by the period, and
            # its trigger counts in it, so a row without them would fail every claim.
            models.CheckConstraint(
                condition=Q(rate_key__isnull=True)
                | Q(
                    rate_limit__isnull=False,
                    rate_limit__gte=1,
                    rate_period__isnull=False,
                    rate_period__gte=1,
                ),
                name="jobs_task_rate_complete",
            ),
            # The rows holding their unique key: waiting ones that never started, and active
            # ones. Only an INSERT enters it (a requeue gives up the key: transitions), so no
            # status change can break it; a waiting task that ran once (retrying, or handed
            # back) no longer holds its key.
            models.UniqueConstraint(
                fields=["name", "unique_key"],
                condition=UNIQUE_HELD,
                name="jobs_task_unique_while",
            ),
            # One callback of each kind per batch: its callbacks are enqueued with it, and the
            # last member's outcome releases them by a guarded UPDATE (blocked -> pending).
            models.UniqueConstraint(
                fields=["workflow", "workflow_role"],
                condition=Q(workflow__isnull=False) & ~Q(workflow_role="member"),
                name="jobs_task_unique_callback",
            ),
        ]
        indexes = [
            # The claim query: only claimable rows are indexed, so a table of a million
            # finished tasks costs the claim nothing.
            # Rows with a concurrency key or a rate key are in the key's index instead: the claim
            # reads these without walking past the waiting tasks of keys at their limit.
            models.Index(
                fields=["-priority", "run_after", "created_at", "id"],
                name="jobs_task_claimable_idx",
                condition=Q(
                    status__in=CLAIMABLE_STATUSES,
                    concurrency_key__isnull=True,
                    rate_key__isnull=True,
                ),
            ),
            # The claim of a worker serving one queue: its due tasks in claim order.
            models.Index(
                fields=["queue", "-priority", "run_after", "created_at", "id"],
                name="jobs_task_queue_claimable_idx",
                condition=Q(
                    status__in=CLAIMABLE_STATUSES,
                    concurrency_key__isnull=True,
                    rate_key__isnull=True,
                ),
            ),
            # Rate keys: a key's waiting tasks in claim order (partial, as the concurrency keys').
            models.Index(
                fields=["rate_key", "-priority", "run_after", "created_at", "id"],
                name="jobs_task_rate_claimable_idx",
                condition=Q(rate_key__isnull=False, status__in=CLAIMABLE_STATUSES),
            ),
            # Concurrency keys (partial: rows without a key cost these nothing): a key's waiting
            # tasks in claim order, and its running ones, which the claim counts.
            models.Index(
                fields=["concurrency_key", "-priority", "run_after", "created_at", "id"],
                name="jobs_task_key_claimable_idx",
                condition=Q(concurrency_key__isnull=False, status__in=CLAIMABLE_STATUSES),
            ),
            models.Index(
                fields=["concurrency_key"],
                name="jobs_task_key_running_idx",
                condition=Q(concurrency_key__isnull=False, status=Status.RUNNING),
            ),
            # Waiting tasks with a deadline, by deadline: maintenance cancels those past it.
            # Partial: tasks without one (most) cost this index nothing.
            models.Index(
                fields=["expires_at"],
                name="jobs_task_waiting_expiry_idx",
                condition=Q(expires_at__isnull=False, status__in=CLAIMABLE_STATUSES),
            ),
            # Rescue of tasks whose worker died.
            models.Index(
                fields=["lease_expires_at"],
                name="jobs_task_running_lease_idx",
                condition=Q(status=Status.RUNNING),
            ),
            models.Index(fields=["status", "finished_at"], name="jobs_task_status_finished_idx"),
            # Partial: tasks nobody owns (most background work) cost this index nothing when a
            # worker writes them, twice per attempt (claim, outcome). A lookup by owner implies
            # the condition, so it still uses the index.
            models.Index(
                fields=["owner", "-created_at"],
                name="jobs_task_owner_created_idx",
                condition=Q(owner__isnull=False),
            ),
            models.Index(fields=["-created_at"], name="jobs_task_created_idx"),
            # A workflow's members by status: its progress, and whether any is unfinished (an
            # EXISTS that the last outcome reads). Partial: tasks of no workflow cost it nothing.
            models.Index(
                fields=["workflow", "status"],
                name="jobs_task_workflow_idx",
                condition=Q(workflow__isnull=False),
            ),
            # Per-queue counts by status (an index-only scan) and the admin's queue filter.
            models.Index(fields=["queue", "status"], name="jobs_task_queue_status_idx"),
            # The admin's name filter, newest first, and the list of distinct names it offers.
            models.Index(fields=["name", "-created_at"], name="jobs_task_name_created_idx"),
        ]
        permissions = [
            ("retry_task", "Can retry failed or cancelled tasks"),
            ("cancel_task", "Can cancel tasks"),
        ]

    def __str__(self):
        return f"{self.name} {self.id} ({self.status})"

    @property
    def is_finished(self):
        return self.status in TERMINAL

    def waiting_until(self, now=None):
        """When this task, waiting to start, becomes due, if that is still to come (a snooze, a
        delay); None otherwise. A retry says so in its own message (``last_error``)."""
        now = now or timezone.now()
        if self.status == Status.PENDING and self.run_after and self.run_after > now:
            return self.run_after
        return None

    @property
    def args(self):
        return self.payload.get("args", [])

    @property
    def kwargs(self):
        return self.payload.get("kwargs", {})

    @property
    def progress_percent(self):
        if self.status == Status.SUCCEEDED:
            return 100
        if not self.progress_total:
            return None
        return min(100, round(100 * self.progress_current / self.progress_total))

    @property
    def duration(self):
        if self.started_at and self.finished_at:
            return self.finished_at - self.started_at
        return None

    @property
    def steps(self) -> dict:
        """The results of the steps recorded so far, by name, in the order they were done.

        One query reading every step: for display and tests; a running task reads one step at a
        time (TaskContext.step).
        """
        return dict(self.recorded_steps.order_by("id").values_list("name", "result"))


class TaskDependency(models.Model):
    """``task`` waits for ``depends_on``: it stays ``blocked`` until every task it depends on
    has finished, then runs, or is cancelled if one failed or was cancelled and its policy
    (``on_failure``) says so. ``passes_result``: the dependency's result is prepended to the
    task's arguments when it is released (a chain's links)."""

    class OnFailure(models.TextChoices):
        CANCEL = "cancel", "Cancel the dependent"
        RUN = "run", "Run it anyway"

    task = models.ForeignKey(
        Task,
        on_delete=models.CASCADE,
        related_name="dependencies",
        db_index=False,  # jobs_taskdependency_unique starts with it
    )
    # Indexed: an outcome finds the tasks waiting for it by this column.
    depends_on = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="dependents")
    on_failure = models.CharField(max_length=8, choices=OnFailure.choices, default=OnFailure.CANCEL)
    passes_result = models.BooleanField(default=False)

    class Meta:
        constraints = [
            # Also the index of a task's dependencies.
            models.UniqueConstraint(
                fields=["task", "depends_on"], name="jobs_taskdependency_unique"
            ),
            models.CheckConstraint(
                condition=~Q(task=models.F("depends_on")), name="jobs_taskdependency_not_self"
            ),
        ]

    def __str__(self):
        return f"{self.task_id} after {self.depends_on_id}"


class TaskStep(models.Model):
    """The recorded result of one named step of a task (``TaskContext.step``).

    A later attempt of the task finds it and skips the step. Deleted with its task.
    """

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="recorded_steps")
    name = models.CharField(max_length=200)
    result = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        constraints = [
            # Also the index of the lookup of one step by its task and name.
            models.UniqueConstraint(fields=["task", "name"], name="jobs_taskstep_unique_name")
        ]

    def __str__(self):
        return f"{self.task_id} {self.name}"


class UniqueHold(models.Model):
    """A unique key of a task name held for a period (``unique_for``) by the task it names.

    Taken by an upsert that replaces only an expired hold (``jobs.sql.common.take_unique_hold``),
    so the database decides between racing enqueues. Expired holds are deleted by pruning.
    """

    name = models.CharField(max_length=200)
    key = models.CharField(max_length=255)
    task_id = models.UUIDField()  # no foreign key: the hold outlives a pruned task
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["name", "key"], name="jobs_uniquehold_unique_key")
        ]
        indexes = [models.Index(fields=["expires_at"], name="jobs_uniquehold_expires_idx")]

    def __str__(self):
        return f"{self.name} {self.key} until {self.expires_at}"


class WorkerQuerySet(models.QuerySet):
    def alive(self, now=None, *, within_seconds=None):
        """Workers that have not stopped and sent a heartbeat recently."""
        now = now or timezone.now()
        within = within_seconds or jobs_settings.LEASE_SECONDS
        return self.filter(
            stopped_at__isnull=True, last_heartbeat_at__gte=now - timedelta(seconds=within)
        )


class Worker(models.Model):
    """One runworker process: what it serves and when it last said it was alive."""

    id = models.CharField(primary_key=True, max_length=100)  # host:pid:random
    hostname = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    # What a worker on the same host needs to prove this one dead from /proc
    # (jobs.worker.liveness): a pid is judged only within one boot and one pid namespace, and
    # the start time (clock ticks since boot) tells a reused pid. Null where /proc says nothing.
    boot_id = models.CharField(max_length=64, blank=True, default="")
    pid_namespace = models.BigIntegerField(null=True, blank=True)
    process_start = models.BigIntegerField(null=True, blank=True)
    # The worker's children as [pid, start time] pairs, written when they change: a worker of
    # this host is rescued only once none of them lives either (jobs.worker.liveness).
    children = models.JSONField(default=list, blank=True)
    # The key of the session-level advisory lock the worker holds on a direct PostgreSQL
    # connection (jobs.worker.session): free in pg_locks, the worker's session is gone. Null:
    # no such proof (SQLite, a pooled connection, JOBS_SESSION_RESCUE off); the lease decides.
    session_key = models.BigIntegerField(null=True, blank=True)
    queues = models.JSONField(default=list, blank=True, help_text="Empty: all queues.")
    queue_caps = models.JSONField(
        default=dict,
        blank=True,
        help_text="The most tasks of a queue it runs at once, by queue (runworker --queues "
        "imports:2); a queue not named is capped only by its concurrency.",
    )
    concurrency = models.PositiveIntegerField()
    # As reported at its last heartbeat. in_flight counts every task it holds: running in a
    # child, claimed ahead for a child about to be free, or finished with its success not yet
    # written; so it may exceed concurrency. busy_processes never does.
    in_flight = models.PositiveIntegerField(default=0)
    busy_processes = models.PositiveIntegerField(
        default=0, help_text="Child processes running a task at the last heartbeat."
    )
    running_tasks = models.PositiveIntegerField(
        default=0,
        help_text="Tasks running in its children at the last heartbeat (async tasks run "
        "several to a child).",
    )
    started_at = models.DateTimeField(default=timezone.now)
    last_heartbeat_at = models.DateTimeField(default=timezone.now)
    stopped_at = models.DateTimeField(null=True, blank=True)
    # Set by an operator (the admin's "stop after current tasks"); the worker reads it at its
    # heartbeat, claims nothing more, finishes what it runs and exits.
    stop_requested_at = models.DateTimeField(null=True, blank=True)
    stop_requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )

    objects = WorkerQuerySet.as_manager()

    class Meta:
        ordering = ["-started_at"]
        indexes = [
            models.Index(fields=["stopped_at", "last_heartbeat_at"], name="jobs_worker_alive_idx")
        ]
        permissions = [("stop_worker", "Can ask workers to stop after their current tasks")]

    def __str__(self):
        return self.id


class RateWindow(models.Model):
    """The starts of one rate key in its current window, as the claim counts them.

    Written only by the database: a trigger counts each task of the key the claim sets running,
    in the claim's transaction (migration 0019); the claim reads it to know the room left. A
    window never moves back: a claim whose clock is behind the window's start counts in that
    window, so a clock stepped back opens no window early.
    """

    key = models.CharField(primary_key=True, max_length=200)
    window_start = models.BigIntegerField()  # seconds since the epoch, a multiple of period
    period = models.PositiveIntegerField()  # seconds
    rate_limit = models.PositiveIntegerField()  # of the last task counted
    started = models.PositiveIntegerField()  # tasks started in the window

    def __str__(self):
        return f"{self.key}: {self.started} of {self.rate_limit} per {self.period}s"

    @property
    def opens_at(self):
        """When the next window opens (an aware datetime)."""
        return datetime.fromtimestamp(self.window_start + self.period, tz=UTC)


class QueuePause(models.Model):
    """A paused queue: workers claim nothing from it while this row exists."""

    queue = models.CharField(primary_key=True, max_length=100)
    paused_at = models.DateTimeField(default=timezone.now)
    paused_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        ordering = ["queue"]
        permissions = [("pause_queue", "Can pause and resume queues")]

    def __str__(self):
        return f"{self.queue} (paused)"


class TaskPause(models.Model):
    """A paused task type: workers claim none of its tasks, in any queue, while this row exists."""

    name = models.CharField(primary_key=True, max_length=200)  # as its rows carry it
    paused_at = models.DateTimeField(default=timezone.now)
    paused_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        ordering = ["name"]
        permissions = [("pause_task_type", "Can pause and resume task types")]

    def __str__(self):
        return f"{self.name} (paused)"


class Schedule(models.Model):
    """One periodic schedule: what it runs, when workers last enqueued it, and when next.

    Schedules are declared in settings (``JOBS_SCHEDULES``) or code
    (``jobs.maintenance.periodic``), and workers mirror each declaration here so the admin can
    show it (``source`` "code"); or they are added in the admin, and the row is the schedule
    (``source`` "admin"). The row holds no lock: one enqueue per due time comes from the task
    table's unique idempotency key.
    """

    class Source(models.TextChoices):
        CODE = "code", "settings or code"
        ADMIN = "admin", "admin"

    name = models.CharField(primary_key=True, max_length=200)
    task = models.CharField(max_length=200, help_text="Registered name of the task enqueued.")
    cron = models.CharField(max_length=200, blank=True, default="")
    interval_seconds = models.PositiveIntegerField(null=True, blank=True)
    time_zone = models.CharField(max_length=64, default="UTC")
    enabled = models.BooleanField(default=True, help_text="Untick to pause the schedule.")
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.CODE)
    # What an admin schedule enqueues (a code schedule's are in its declaration).
    args = models.JSONField(default=list, blank=True, help_text="A JSON list.")
    kwargs = models.JSONField(default=dict, blank=True, help_text="A JSON object.")
    queue = models.CharField(max_length=100, blank=True, default="", help_text="Empty: the task's.")
    priority = models.SmallIntegerField(null=True, blank=True, help_text="Empty: the task's.")
    # Bumped by every save from the admin: a form saved over another's edit is refused.
    version = models.PositiveIntegerField(default=0)
    last_run_at = models.DateTimeField(null=True, blank=True, help_text="Slot last enqueued.")
    last_task_id = models.UUIDField(null=True, blank=True)
    next_run_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        permissions = [("run_schedule", "Can run a schedule now")]

    def __str__(self):
        return self.name

    @property
    def every(self):
        return self.cron or f"every {self.interval_seconds}s"


class MaintenanceLock(models.Model):
    """A named lease over a maintenance duty that only one worker at a time should run.

    Taken with a conditional UPDATE (works on SQLite and PostgreSQL alike); a holder that dies
    loses it when ``locked_until`` passes.
    """

    name = models.CharField(primary_key=True, max_length=100)
    holder = models.CharField(max_length=100, blank=True, default="")
    locked_until = models.DateTimeField(null=True, blank=True)
    last_finished_at = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return self.name


class EventCounter(models.Model):
    """A running total of one kind of event in one queue (retries, failures, rescues).

    Kept in the database, not in a process, so every web process exports the same monotonic
    counter, and pruning old tasks never makes it go down.
    """

    event = models.CharField(max_length=32)
    queue = models.CharField(max_length=100)
    value = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["event", "queue"], name="jobs_eventcounter_unique")
        ]

    def __str__(self):
        return f"{self.event} {self.queue}={self.value}"


class Effect(models.Model):
    """The mark of a side effect that was done, by business key (see ``jobs.execution.effects``)."""

    key = models.CharField(max_length=255, unique=True)
    result = models.JSONField(null=True, blank=True)
    # The task that did it, when known; kept when the task record is pruned.
    task = models.ForeignKey(
        Task, null=True, blank=True, on_delete=models.SET_NULL, related_name="effects"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return self.key


class TaskRollup(models.Model):
    """What the tasks of one queue and task name that finished in one bucket add up to.

    A bucket is a minute (``span`` 60) or an hour (3600) starting at ``bucket_at`` (UTC); hour
    buckets are minute buckets added up. Written once per bucket by the maintenance rounds
    (``jobs.maintenance.rollups``), read by the history charts (``jobs.metrics.history``); kept
    apart from the tasks, so pruning them erases none of it. ``ran`` and the sums and histograms
    count the attempts that ran to their end, as the live percentiles do
    (``jobs.metrics.window.RAN``); a histogram holds one count per bin of
    ``jobs.metrics.rollups.BOUNDS`` (the last bin: above the last bound).
    """

    span = models.PositiveIntegerField()
    bucket_at = models.DateTimeField()
    queue = models.CharField(max_length=100)
    name = models.CharField(max_length=200)
    succeeded = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    cancelled = models.PositiveIntegerField(default=0)
    retried = models.PositiveIntegerField(default=0)  # finished after more than one attempt
    ran = models.PositiveIntegerField(default=0)
    run_seconds = models.FloatField(default=0.0)
    wait_seconds = models.FloatField(default=0.0)
    run_bins = models.JSONField(default=list)
    wait_bins = models.JSONField(default=list)

    class Meta:
        constraints = [
            # The backstop of "a bucket is written once": a second writer fails, never adds.
            models.UniqueConstraint(
                fields=["span", "bucket_at", "queue", "name"], name="jobs_taskrollup_unique"
            )
        ]
        indexes = [
            models.Index(fields=["span", "name", "bucket_at"], name="jobs_taskrollup_name_idx")
        ]

    def __str__(self):
        return f"{self.name} {self.queue} {self.bucket_at:%Y-%m-%d %H:%M} ({self.span} s)"


class RollupMark(models.Model):
    """How far the rollups of one span have gone: every bucket before ``rolled_until`` is
    written. Advanced by a conditional UPDATE in the transaction that writes the buckets, so of
    two writers of the same buckets one commits and the other writes nothing."""

    span = models.PositiveIntegerField(primary_key=True)
    rolled_until = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return f"{self.span} s rolled until {self.rolled_until}"
