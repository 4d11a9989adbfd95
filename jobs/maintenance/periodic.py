"""Periodic tasks: schedules declared in settings or code, enqueued by workers when due.

A schedule fires at *slots*: the times its cron expression names (parsed by ``cronsim``), or
multiples of its interval counted from the Unix epoch, so every worker computes the same slots
with no shared state. Each maintenance round enqueues, for every schedule, only the latest slot
that has come; slots missed while no worker ran are skipped, so a schedule that was down for a
day runs once when workers return, not once per missed slot.

The enqueue carries the idempotency key ``periodic:<schedule>:<slot>``: the task table's unique
constraint on (name, key) makes exactly one task per slot however many workers race for it.
Schedules added in the admin are rows (``Schedule.source`` "admin") rather than declarations;
the same round enqueues them with the same key, so the same guarantee holds for them.
A schedule runs a ``@jobs.task`` or a Django ``@task`` stored by a jobs backend (what each is,
and how a Django task is enqueued: ``jobs.maintenance.schedulable``).
"""

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError
from django.db.models import Q
from django.utils import timezone

from jobs import limits
from jobs.conf import jobs_settings
from jobs.exceptions import PayloadError, UnknownTaskError
from jobs.maintenance import schedulable
from jobs.models import Schedule
from jobs.tasks.enqueueing import check_fields, enqueue
from jobs.tasks.payload import check_name, encode_payload

logger = logging.getLogger(__name__)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# A schedule's name is its row's primary key, and is in every slot's idempotency key (255).
NAME_MAX_LENGTH: int = Schedule._meta.get_field("name").max_length or 200

_declared: dict[str, "PeriodicTask"] = {}


@dataclass(frozen=True)
class PeriodicTask:
    """One declared schedule: which task, when, and with which arguments."""

    name: str
    task: str
    cron: str = ""
    every: float | None = None  # seconds
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    queue: str | None = None
    priority: int | None = None
    time_zone: str = ""

    def __post_init__(self):
        if bool(self.cron) == (self.every is not None):
            raise ImproperlyConfigured(
                f"Schedule {self.name!r} needs either cron or every (seconds), not both or none."
            )
        if self.every is not None and not (limits.is_seconds(self.every) and self.every >= 1):
            # NaN, infinity or a year's worth of seconds would break the slot arithmetic.
            raise ImproperlyConfigured(
                f"Schedule {self.name!r}: every must be a finite number of seconds from 1 to "
                f"{limits.MAX_SECONDS:,}, got {self.every!r}."
            )
        self.zone()  # an unknown time zone is refused now, not at the first slot
        try:  # a queue or priority no task row can hold would fail every slot
            given = {"queue": self.queue, "priority": self.priority}
            check_fields({name: value for name, value in given.items() if value is not None})
        except PayloadError as exc:
            raise ImproperlyConfigured(f"Schedule {self.name!r}: {exc}") from None
        if self.cron:
            try:
                CronSim(self.cron, timezone.now())
            except CronSimError as exc:
                raise ImproperlyConfigured(
                    f"Schedule {self.name!r}: cron {self.cron!r} is not valid: {exc}."
                ) from None

    def zone(self):
        name = self.time_zone or settings.TIME_ZONE or "UTC"
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            raise ImproperlyConfigured(
                f"Schedule {self.name!r}: unknown time zone {name!r}."
            ) from None

    def latest_slot(self, now) -> datetime:
        """Return the latest due time at or before ``now``."""
        if self.every:
            step = timedelta(seconds=self.every)
            return EPOCH + step * ((now - EPOCH) // step)
        # cronsim yields times strictly before its start when reversed, to the second.
        start = (now.astimezone(self.zone()) + timedelta(seconds=1)).replace(microsecond=0)
        return next(CronSim(self.cron, start, reverse=True)).astimezone(UTC)

    def next_slot(self, now) -> datetime:
        """Return the first due time after ``now``."""
        if self.every:
            return self.latest_slot(now) + timedelta(seconds=self.every)
        return next(CronSim(self.cron, now.astimezone(self.zone()))).astimezone(UTC)

    def idempotency_key(self, slot: datetime) -> str:
        return f"periodic:{self.name}:{slot.astimezone(UTC).isoformat()}"


def unstorable(spec: "PeriodicTask", *, arguments: bool = True) -> PayloadError | None:
    """Why no row could store ``spec``'s name (or its arguments): None when it can.

    A name its row's column cannot hold (NUL, over 200 characters) would fail the whole round
    on PostgreSQL, every schedule with it, so a round skips such a schedule alone; arguments
    are refused at each slot's enqueue. ``manage.py check`` reports both (``jobs.E201``).
    """
    try:
        check_name(spec.name, "schedule name", NAME_MAX_LENGTH)
        if arguments:
            encode_payload(spec.args, spec.kwargs)
    except PayloadError as exc:
        return exc
    return None


def register(name, task, *, cron="", every=None, args=(), kwargs=None, **options) -> PeriodicTask:
    """Declare a schedule in code; ``task`` is a ``@jobs.task``, a Django ``@task`` or a name.

    A Django task must be stored by a ``jobs.backends.DatabaseBackend``: another backend's is
    refused here (ImproperlyConfigured). ``every`` is seconds or a timedelta. Call at import
    time of a module the worker imports (a ``tasks.py`` is found on its own).
    """
    if isinstance(every, timedelta):
        every = every.total_seconds()
    task_name = schedulable.name_of(task)  # refuses a Django task that no jobs backend stores
    if not isinstance(task, str):
        # The task's own queue and priority (``task.using(...)``'s too, which the task found
        # again by name would not have), unless the schedule sets them; checked now.
        options.setdefault("queue", task.queue_name)
        options.setdefault("priority", task.priority)
        schedulable.bound(task, queue=options["queue"], priority=options["priority"])
    periodic = PeriodicTask(
        name=name,
        task=task_name,
        cron=cron,
        every=every,
        args=tuple(args),
        kwargs=dict(kwargs or {}),
        **options,
    )
    problem = unstorable(periodic)
    if problem is not None:  # refused when declared, as the other values are
        raise ImproperlyConfigured(f"Schedule {name!r}: {problem}")
    _declared[name] = periodic
    return periodic


def periodic(*, cron="", every=None, name=None, args=(), kwargs=None, **options):
    """Decorate a task (put it above ``@task``, jobs' or Django's) to run it on a schedule."""

    def decorate(definition):
        register(
            name or schedulable.name_of(definition),
            definition,
            cron=cron,
            every=every,
            args=args,
            kwargs=kwargs,
            **options,
        )
        return definition

    return decorate


def unregister(name) -> None:
    _declared.pop(name, None)


def from_settings() -> dict:
    """Return the schedules of ``JOBS_SCHEDULES``, by name."""
    result = {}
    schedules = jobs_settings.SCHEDULES
    if not isinstance(schedules, dict):
        raise ImproperlyConfigured(
            f"JOBS_SCHEDULES must be a dict of schedules by name, got {type(schedules).__name__}."
        )
    for name, spec in schedules.items():
        if not isinstance(spec, dict):
            raise ImproperlyConfigured(
                f"JOBS_SCHEDULES[{name!r}] must be a dict (task, cron or every, ...), "
                f"got {type(spec).__name__}."
            )
        spec = dict(spec)
        every = spec.pop("every", None)
        if isinstance(every, timedelta):
            every = every.total_seconds()
        try:
            result[name] = PeriodicTask(
                name=name,
                task=spec.pop("task"),
                every=every,
                args=tuple(spec.pop("args", ())),
                **spec,
            )
        except (KeyError, TypeError) as exc:
            raise ImproperlyConfigured(
                f"JOBS_SCHEDULES[{name!r}] is not valid ({exc}); it takes task, cron or every, "
                "and optionally args, kwargs, queue, priority, time_zone."
            ) from None
    return result


def declared() -> dict:
    """Return every declared schedule, by name; settings win over code on a clash."""
    return {**_declared, **from_settings()}


@dataclass
class SlotResult:
    """One slot a worker enqueued; ``created`` is False when another worker had done it."""

    schedule: str
    slot: datetime
    task_id: object
    created: bool


def run_due(*, now=None) -> list:
    """Enqueue the latest due slot of every enabled schedule not yet enqueued; return them.

    Safe to call from every worker at once: the idempotency key makes one task per slot.
    """
    now = now or timezone.now()
    results: list[SlotResult] = []
    for spec in declared().values():
        problem = unstorable(spec, arguments=False)
        if problem is not None:
            logger.error("schedule refused schedule=%r error=%s", spec.name, problem)
            continue
        row = _sync(spec, now)
        if row is not None and row.enabled:
            _enqueue_if_due(spec, row, now, results)
    for row in Schedule.objects.filter(source=Schedule.Source.ADMIN, enabled=True):
        try:
            spec = from_row(row)
        except ImproperlyConfigured as exc:  # written past the admin's form: say so, go on
            logger.error("schedule refused schedule=%s error=%s", row.name, exc)
            continue
        if row.next_run_at is None or row.next_run_at <= now:
            Schedule.objects.filter(pk=row.pk).update(next_run_at=spec.next_slot(now))
        _enqueue_if_due(spec, row, now, results)
    return results


def _enqueue_if_due(spec: PeriodicTask, row: Schedule, now, results: list["SlotResult"]) -> None:
    slot = spec.latest_slot(now)
    if row.last_run_at is not None and row.last_run_at >= slot:
        return
    if row.last_run_at is None and slot < row.created_at:
        # A new schedule starts with the first slot after it appeared, not a past one.
        return
    try:
        results.append(enqueue_slot(spec, slot, now=now))
    except UnknownTaskError:
        logger.error("schedule task unknown schedule=%s task=%s", spec.name, spec.task)
    except ImproperlyConfigured as exc:  # a Django task no jobs backend stores (any more)
        logger.error("schedule task refused schedule=%s error=%s", spec.name, exc)
    except PayloadError as exc:
        # One schedule's bad arguments must not hold back the others.
        logger.error("schedule arguments refused schedule=%s error=%s", spec.name, exc)


def from_row(row: Schedule) -> PeriodicTask:
    """Return the schedule an admin row describes; ImproperlyConfigured if it is not one."""
    if not isinstance(row.args, list) or not isinstance(row.kwargs, dict):
        raise ImproperlyConfigured(
            f"Schedule {row.name!r}: args must be a JSON list and kwargs a JSON object."
        )
    return PeriodicTask(
        name=row.name,
        task=row.task,
        cron=row.cron,
        every=row.interval_seconds,
        args=tuple(row.args),
        kwargs=dict(row.kwargs),
        queue=row.queue or None,
        priority=row.priority,
        time_zone=row.time_zone,
    )


def spec_of(row: Schedule) -> PeriodicTask:
    """Return the schedule of ``row``, declared or added in the admin.

    Raise ImproperlyConfigured when there is none: a declaration gone from settings and code
    (the row outlived it), or an admin row that is not a valid schedule.
    """
    if row.source == Schedule.Source.ADMIN:
        return from_row(row)
    try:
        return declared()[row.name]
    except KeyError:
        raise ImproperlyConfigured(
            f"Schedule {row.name!r} is no longer declared in settings or code."
        ) from None


def run_now(spec: PeriodicTask, *, now=None, by: str = ""):
    """Enqueue ``spec``'s task at once, outside its slots; return the task.

    Its slots are left as they are: the next one still runs. The idempotency key holds the
    moment to the second, so a form posted twice at once enqueues once.
    """
    now = now or timezone.now()
    scheduled = schedulable.bound(
        schedulable.resolve(spec.task), queue=spec.queue, priority=spec.priority
    )
    moment = now.astimezone(UTC).replace(microsecond=0).isoformat()
    summary = f"Periodic {spec.name} run now" + (f" by {by}" if by else "")
    key = f"periodic:{spec.name}:now:{moment}"
    return enqueue(scheduled, spec.args, spec.kwargs, summary=summary, idempotency_key=key)


def enqueue_slot(spec: PeriodicTask, slot: datetime, *, now=None) -> SlotResult:
    """Enqueue ``spec`` for ``slot`` (at most once, whoever calls) and record it on its row."""
    now = now or timezone.now()
    scheduled = schedulable.bound(
        schedulable.resolve(spec.task), queue=spec.queue, priority=spec.priority
    )  # queue and priority None: the task's own
    summary = f"Periodic {spec.name} at {slot.isoformat()}"
    key = spec.idempotency_key(slot)
    task = enqueue(scheduled, spec.args, spec.kwargs, summary=summary, idempotency_key=key)
    # Only ever moves forward: a worker with a slow clock cannot set an older slot back.
    behind = Q(last_run_at__lt=slot) | Q(last_run_at__isnull=True)
    Schedule.objects.filter(behind, pk=spec.name).update(
        last_run_at=slot, last_task_id=task.pk, next_run_at=spec.next_slot(now), updated_at=now
    )
    if task.created:
        logger.info(
            "periodic task enqueued schedule=%s task=%s slot=%s id=%s",
            spec.name,
            spec.task,
            slot.isoformat(),
            task.pk,
        )
    return SlotResult(spec.name, slot, task.pk, task.created)


def _sync(spec: PeriodicTask, now) -> Schedule | None:
    """Return the row of ``spec``, created or brought up to date with its declaration.

    None when an admin schedule holds the name: the row is the admin's, and the declaration
    runs once it is renamed (or the admin's schedule deleted).
    """
    declared_fields = {
        "task": spec.task,
        "cron": spec.cron,
        "interval_seconds": int(spec.every) if spec.every else None,
        "time_zone": str(spec.zone()),
    }
    row = Schedule.objects.filter(pk=spec.name).first()
    if row is None:
        try:
            row, _ = Schedule.objects.get_or_create(
                name=spec.name,
                defaults={**declared_fields, "created_at": now, "next_run_at": spec.next_slot(now)},
            )
        except IntegrityError:  # another worker created it between the two statements
            row = Schedule.objects.get(pk=spec.name)
    if row.source == Schedule.Source.ADMIN:
        logger.error(
            "schedule name taken by a schedule added in the admin, declaration not run "
            "schedule=%s task=%s",
            spec.name,
            spec.task,
        )
        return None
    changed: dict[str, object] = {k: v for k, v in declared_fields.items() if getattr(row, k) != v}
    if changed or row.next_run_at is None or row.next_run_at <= now:
        changed["next_run_at"] = spec.next_slot(now)
        Schedule.objects.filter(pk=spec.name).update(**changed, updated_at=now)
        for key, value in changed.items():
            setattr(row, key, value)
    return row
