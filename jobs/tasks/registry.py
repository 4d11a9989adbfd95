"""Defining tasks (the ``@task`` decorator), finding them by name, and enqueueing them."""

import contextlib
import logging
import operator
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, cast

from django.db import IntegrityError, router, transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from jobs import signals
from jobs.conf import jobs_settings
from jobs.exceptions import UnknownTaskError
from jobs.models import Task
from jobs.tasks.inserting import SET_BY_ENQUEUE, insert_many, insert_one, new_task
from jobs.tasks.payload import (
    check_delay,
    check_int,
    check_name,
    check_queue_name,
    check_run_after,
    compact_json,
    encode_payload,
    flat_text,
    is_flat,
    validate_json,
)
from jobs.tasks.retry import Backoff
from jobs.text import clean_text

logger = logging.getLogger(__name__)
_uuid_int = operator.attrgetter("int")  # the sort key of ids: in C, unlike UUID.__lt__

_registry: dict[str, "TaskDefinition"] = {}

# Called with the rows of each enqueue, once they are inserted: jobs.testing's immediate mode.
# Empty outside tests.
enqueue_hooks: list[Callable[[list[Task]], object]] = []


@dataclass(frozen=True)
class EnqueueOptions:
    """Per-call options; ``None`` means "the task's default"."""

    queue: str | None = None
    priority: int | None = None
    max_attempts: int | None = None
    run_after: datetime | None = None
    delay: float | timedelta | None = None
    owner: object = None
    summary: str = ""
    idempotency_key: str | None = None


@dataclass(frozen=True)
class TaskDefinition:
    """A registered task: the function and how it should be run."""

    func: Callable[..., Any]
    name: str
    queue: str
    priority: int
    max_attempts: int
    backoff: Backoff
    timeout: float
    transient: tuple = ()
    takes_context: bool = False
    options: EnqueueOptions = field(default_factory=EnqueueOptions)

    def __call__(self, *args, **kwargs):
        """Run the function here and now, as a plain call (tests, shells)."""
        return self.func(*args, **kwargs)

    def using(self, **options) -> "TaskDefinition":
        """Return this task with per-call options (queue, priority, delay, owner, ...) set."""
        return replace(self, options=replace(self.options, **options))

    def enqueue(self, *args, **kwargs) -> Task:
        """Record a call of this task for a worker to run; return the task record."""
        return enqueue(self, args, kwargs, options=self.options)

    def enqueue_many(self, calls, *, batch_size: int = 5000) -> list:
        """Record many calls of this task in few statements; see ``registry.enqueue_many``."""
        return enqueue_many(self, calls, options=self.options, batch_size=batch_size)


def task(
    func=None,
    *,
    name: str | None = None,
    queue: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    backoff: Backoff | None = None,
    timeout: float | None = None,
    transient: tuple = (),
    takes_context: bool = False,
):
    """Register a function as a task; use as ``@task`` or ``@task(queue="emails", ...)``.

    ``transient`` names exception types that mean "try again later" for this task, on top of
    connection errors and timeouts. ``takes_context`` passes a context as the first argument.
    """

    def register(function):
        definition = TaskDefinition(
            func=function,
            name=name or f"{function.__module__}.{function.__qualname__}",
            queue=queue or jobs_settings.DEFAULT_QUEUE,
            priority=jobs_settings.DEFAULT_PRIORITY if priority is None else priority,
            max_attempts=_or_default(max_attempts, jobs_settings.DEFAULT_MAX_ATTEMPTS),
            backoff=backoff or default_backoff(),
            timeout=timeout or jobs_settings.DEFAULT_TIMEOUT,
            transient=tuple(transient),
            takes_context=takes_context,
        )
        # Refused here, at import, rather than at each enqueue.
        check_fields(
            name=definition.name,
            queue=definition.queue,
            priority=definition.priority,
            max_attempts=definition.max_attempts,
        )
        existing = _registry.get(definition.name)
        if existing is not None and existing.func is not function:
            logger.warning("task redefined name=%s", definition.name)
        _registry[definition.name] = definition
        return definition

    return register(func) if func is not None else register


def default_backoff() -> Backoff:
    return Backoff(
        base=jobs_settings.BACKOFF_BASE,
        factor=jobs_settings.BACKOFF_FACTOR,
        maximum=jobs_settings.BACKOFF_MAX,
        jitter=jobs_settings.BACKOFF_JITTER,
    )


def get_task(name: str) -> TaskDefinition:
    """Return the task registered as ``name``, importing its module if it is not loaded yet."""
    if name not in _registry:
        with contextlib.suppress(ImportError):
            import_string(name)
    try:
        return _registry[name]
    except KeyError:
        raise UnknownTaskError(
            f"No task is registered as {name!r}. Check the name, and that the module defining "
            "it is imported by the worker (a tasks.py in an installed app is found on its own)."
        ) from None


def registered_names() -> list[str]:
    return sorted(_registry)


def enqueue(definition, args=(), kwargs=None, *, options: EnqueueOptions | None = None, **extra):
    """Create the task record, inside the caller's transaction if there is one.

    ``definition`` is a TaskDefinition or a registered name. With an ``idempotency_key``, a task
    of the same name and key that already exists is returned instead of a new one; a unique
    constraint decides, so two processes enqueueing at once still get one task.
    """
    if isinstance(definition, str):
        definition = get_task(definition)
    if extra:
        options = replace(options or EnqueueOptions(), **extra)
    elif options is None:
        options = _NO_OPTIONS
    payload, text = encode_payload(args, kwargs or {})
    return create_task(
        name=definition.name,
        payload=payload,
        payload_text=text,
        queue=_or_default(options.queue, definition.queue),
        priority=definition.priority if options.priority is None else options.priority,
        max_attempts=_or_default(options.max_attempts, definition.max_attempts),
        run_after=resolve_run_after(options.run_after, options.delay),
        owner=options.owner,
        summary=options.summary,
        idempotency_key=options.idempotency_key,
    )


_NO_OPTIONS = EnqueueOptions()


def enqueue_many(
    definition, calls, *, options: EnqueueOptions | None = None, batch_size: int = 5000, **extra
) -> list[uuid.UUID]:
    """Create one task per call in ``calls``, many rows per INSERT; return their ids.

    Each call is a tuple of args, or ``(args, kwargs)`` when it has two items, the first a tuple
    or list and the second a dict (``[(1,), (2,)]``, ``[((), {"user_id": 1})]``). Every payload
    is validated before anything is written, so one bad call refuses them all, and all the rows
    are written in one transaction (the caller's, if there is one). The options apply to every
    task; an ``idempotency_key`` is refused (it names one task: use ``enqueue``). Ids, not rows,
    are returned: building 100,000 model instances would cost more than inserting them.
    """
    if isinstance(definition, str):
        definition = get_task(definition)
    options = replace(options or EnqueueOptions(), **extra)
    if options.idempotency_key is not None:
        raise ValueError("enqueue_many takes no idempotency_key: it names one task.")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a whole number of at least 1, not {batch_size!r}.")
    now = timezone.now()
    template = {
        "name": definition.name,
        "backend": "",
        "queue": _or_default(options.queue, definition.queue),
        "priority": definition.priority if options.priority is None else options.priority,
        "max_attempts": _or_default(options.max_attempts, definition.max_attempts),
        "run_after": resolve_run_after(options.run_after, options.delay),
        "owner": _real_owner(options.owner),
        "summary": options.summary,
        "idempotency_key": None,
        "created_at": now,
        "updated_at": now,
    }
    template = check_fields(template)  # before the calls are read: a bad option refuses them all
    limit = jobs_settings.MAX_PAYLOAD_BYTES
    texts = []
    for number, call in enumerate(calls):
        args, kwargs = _split_call(call, number)
        # Flat arguments, the common case, are JSON text after one dumps and a length check.
        if is_flat(args, kwargs):
            text = flat_text(args, kwargs, f"calls[{number}] ", limit=limit)
        else:
            text = encode_payload(args, kwargs, f"calls[{number}] ", limit=limit)[1]
        texts.append(text)
    # Version 4 ids, as uuid.uuid4() makes them, from one read of the system's random source
    # instead of one per task (that read is most of uuid4's cost: 7 µs here, 2.6 µs this way).
    randoms = os.urandom(16 * len(texts))
    # Sorted, so that the calls' order is their claim order (``jobs.sql.common.claim_pick``:
    # they share created_at, and ids break the tie).
    task_ids = sorted(
        (uuid.UUID(bytes=randoms[at : at + 16], version=4) for at in range(0, len(randoms), 16)),
        key=_uuid_int,
    )
    rows = list(zip(task_ids, texts, strict=True))
    using = router.db_for_write(Task)
    with transaction.atomic(using=using):
        for start in range(0, len(rows), batch_size):
            insert_many(template, rows[start : start + batch_size], using=using)
    ids = [task_id for task_id, _ in rows]
    if ids and signals.task_enqueued.has_listeners(Task):
        for created in Task.objects.using(using).filter(pk__in=ids).iterator():
            created.created = True
            signals.send_on_commit(signals.task_enqueued, created)
    if ids and enqueue_hooks:
        _call_enqueue_hooks(list(Task.objects.using(using).filter(pk__in=ids)))
    return ids


def _call_enqueue_hooks(tasks: list[Task]):
    for hook in list(enqueue_hooks):
        hook(tasks)


def _split_call(call, number: int):
    if isinstance(call, list | tuple):
        if len(call) == 2 and isinstance(call[1], dict) and isinstance(call[0], list | tuple):
            return list(call[0]), call[1]
        return list(call), {}
    raise TypeError(f"calls[{number}] is {call!r}: pass a tuple of arguments, or (args, kwargs).")


def _real_owner(owner):
    """``owner``, or None for an anonymous visitor, who owns nothing."""
    if owner is not None and not getattr(owner, "is_authenticated", True):
        return None
    return owner


def _or_default(value, default):
    # Not ``value or default``: an explicit 0 is refused by check_fields, never replaced.
    return default if value is None else value


_COLUMNS = {field.name: field for field in Task._meta.concrete_fields}
# The range of each integer column, the same on every database (SQLite would store more).
INT_RANGES = {"priority": (-32768, 32767), "max_attempts": (1, 2**31 - 1)}


def check_fields(values: dict | None = None, **fields) -> dict:
    """Check (and clean) the columns an enqueue sets; raise PayloadError before any write.

    Identifiers (name, queue, idempotency key) are refused when the column cannot hold them;
    the summary, display text, is cleaned (``jobs.text.clean_text``). Returns the values.
    """
    values = {**(values or {}), **fields}
    if values.get("queue") is not None:
        check_queue_name(values["queue"])
    for name in ("name", "backend", "idempotency_key"):
        value = values.get(name)
        if value is not None and (value or name != "backend"):
            check_name(value, name.replace("_", " "), cast(int, _COLUMNS[name].max_length))
    for name, (low, high) in INT_RANGES.items():
        if name in values:
            check_int(values[name], name.replace("_", " "), low, high)
    if values.get("run_after") is not None:  # the Django Tasks backend's comes straight here
        values["run_after"] = check_run_after(
            values["run_after"], values.get("created_at") or timezone.now()
        )
    if "summary" in values:
        values["summary"] = clean_text(values["summary"], _COLUMNS["summary"].max_length)
    return values


def resolve_run_after(run_after=None, delay=None):
    if run_after is not None and delay is not None:
        raise ValueError("Pass either run_after or delay, not both.")
    if delay is not None:
        delay = check_delay(delay)
        return timezone.now() + delay
    if run_after is not None:
        return check_run_after(run_after, timezone.now())
    return timezone.now()


def create_task(*, idempotency_key=None, summary="", payload_text=None, **fields) -> Task:
    """Insert one task row; with an idempotency key, return the existing row on a duplicate.

    ``fields`` are Task fields; ``payload_text`` is the JSON of ``payload`` when the caller
    has it already (``encode_payload``), to save encoding it twice.
    """
    using = router.db_for_write(Task)
    now = timezone.now()
    values = {
        "backend": "",
        "queue": jobs_settings.DEFAULT_QUEUE,
        "priority": jobs_settings.DEFAULT_PRIORITY,
        "max_attempts": jobs_settings.DEFAULT_MAX_ATTEMPTS,
        "run_after": now,
        **fields,
        "id": uuid.uuid4(),
        "owner": _real_owner(fields.get("owner")),
        "summary": summary,
        "idempotency_key": idempotency_key,
        "created_at": now,
        "updated_at": now,
    }
    values = check_fields(values)
    unknown = values.keys() - set(SET_BY_ENQUEUE)
    if unknown:
        raise TypeError(f"create_task() sets no {', '.join(sorted(unknown))}")
    payload = values.pop("payload")
    if payload_text is None:
        validate_json(payload, "payload")
        payload_text = compact_json(payload)
    if not insert_one(values, payload_text, using=using):
        # The key was taken, by a row committed before this statement (ON CONFLICT waited
        # for a racing transaction to finish), so it is visible now.
        existing = (
            Task.objects.using(using)
            .filter(name=values["name"], idempotency_key=idempotency_key)
            .first()
        )
        if existing is None:  # only a REPEATABLE READ snapshot older than the row gets here
            raise IntegrityError(
                f"The idempotency key {idempotency_key!r} of {values['name']} is taken by a "
                "task this transaction cannot see."
            )
        existing.created = False
        return existing
    task = new_task(values, payload, using=using)
    task.created = True
    # Only when someone listens: an on-commit callback per enqueue is not free.
    if signals.task_enqueued.has_listeners(Task):
        signals.send_on_commit(signals.task_enqueued, task)
    if enqueue_hooks:
        _call_enqueue_hooks([task])
    return task
