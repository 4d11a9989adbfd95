"""Enqueueing: the task rows a call of a task becomes, one at a time or many per statement."""

import contextlib
import operator
import os
import uuid
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import cast

from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, router, transaction
from django.utils import timezone

from jobs import signals, transports
from jobs.backends import DatabaseBackend
from jobs.conf import jobs_settings
from jobs.exceptions import PayloadError
from jobs.models import Task
from jobs.states import Status
from jobs.tasks.definition import MAX_ATTEMPTS_RANGE
from jobs.tasks.django_api import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY
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
from jobs.tasks.registry import get_task
from jobs.tasks.uniqueness import insert_unique
from jobs.text import clean_text

_uuid_int = operator.attrgetter("int")  # the sort key of ids: in C, unlike UUID.__lt__

# Called with the rows of each enqueue, once they are inserted: jobs.testing's immediate mode.
# Empty outside tests.
enqueue_hooks: list[Callable[[list[Task]], object]] = []


def enqueue(task, args=(), kwargs=None, **options) -> Task:
    """Create the task record, inside the caller's transaction if there is one; return it.

    ``task`` is a task (``JobsTask``) or its name; ``options`` are those of ``task.using()``.
    With an ``idempotency_key``, a task of the same name and key that already exists is
    returned instead of a new one (its ``created`` is False); a unique constraint decides, so
    two processes enqueueing at once still get one task. ``task.enqueue()`` does the same and
    returns Django's ``TaskResult`` of the row. With a unique key or scope (``unique_key``,
    ``unique_while``, ``unique_for``), the task holding the key is returned, its arguments
    replaced if ``on_duplicate="replace"`` and it still waits (``jobs.tasks.uniqueness``).
    """
    if isinstance(task, str):
        task = get_task(task)
    if options:
        task = task.using(**options)
    return backend_of(task).store(task, args, kwargs or {}, with_result=False)[0]


def backend_of(task) -> DatabaseBackend:
    """The jobs backend that stores ``task``; ImproperlyConfigured if its backend is another."""
    backend = task.get_backend()
    if not isinstance(backend, DatabaseBackend):
        kind = f"{type(backend).__module__}.{type(backend).__qualname__}"
        raise ImproperlyConfigured(
            f"The task {task.module_path!r} is for the task backend {task.backend!r}, which is "
            f"{kind}, not jobs.backends.DatabaseBackend: jobs neither stores nor runs its tasks."
        )
    return backend


def row_fields(task) -> dict:
    """The columns of a new row of ``task``, from its declaration and its ``using()`` options."""
    concurrency_key, concurrency_limit = task.resolved_concurrency()
    rate_key, rate = task.resolved_rate()
    fields = {
        "name": task.module_path,
        "concurrency_key": concurrency_key,
        "concurrency_limit": concurrency_limit,
        "rate_key": rate_key,
        "rate_limit": None if rate is None else rate.count,
        "rate_period": None if rate is None else rate.period,
        "backend": task.backend,
        "queue": task.queue_name,
        "priority": task.priority,
        "max_attempts": task.resolved_max_attempts(),
        "owner": task.owner,
        "summary": task.summary,
        "idempotency_key": task.idempotency_key,
    }
    if task.run_after is not None or task.delay is not None:
        fields["run_after"] = resolve_run_after(task.run_after, task.delay)
    if task.expires_in is not None or task.expires_at is not None:
        fields["expires_at"] = resolve_expires_at(
            task.expires_in, task.expires_at, due=fields.get("run_after")
        )
    # else due at its creation, created_at itself: a task that was not deferred is stored so
    # (Django's TaskResult.task.run_after is None for it; ``jobs.backends.to_task_result``).
    return fields


def enqueue_many(
    task, calls, *, batch_size: int = 5000, workflow_id=None, workflow_role="", **options
) -> list[uuid.UUID]:
    """Create one task per call in ``calls``, many rows per INSERT; return their ids.

    Each call is a tuple of args, or ``(args, kwargs)`` when it has two items, the first a tuple
    or list and the second a dict (``[(1,), (2,)]``, ``[((), {"user_id": 1})]``). Every payload
    is validated before anything is written, so one bad call refuses them all, and all the rows
    are written in one transaction (the caller's, if there is one). The options apply to every
    task; an ``idempotency_key`` or a unique key is refused (it names one task: use
    ``enqueue``), and so is ``depends_on`` (rows written ``pending`` would not wait). Ids, not rows,
    are returned: building 100,000 model instances would cost more than inserting them.
    ``workflow_id`` and ``workflow_role``: the batch they are members of (``jobs.batch``).
    """
    if isinstance(task, str):
        task = get_task(task)
    if options:
        task = task.using(**options)
    if task.idempotency_key is not None:
        raise ValueError("enqueue_many takes no idempotency_key: it names one task.")
    if task.resolved_unique() is not None:
        raise ValueError("enqueue_many takes no unique key or scope: a key names one task.")
    if task.depends_on:
        raise ValueError(
            "enqueue_many takes no depends_on: enqueue each dependent with enqueue(), or make "
            "them a jobs.batch with an on_success callback."
        )
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a whole number of at least 1, not {batch_size!r}.")
    now = timezone.now()
    fields = row_fields(task)
    template = {
        **fields,
        "owner": _real_owner(fields["owner"]),
        "unique_key": None,
        "unique_while": None,
        "status": Status.PENDING,
        "workflow": workflow_id,
        "workflow_role": workflow_role,
        "run_after": fields.get("run_after", now),
        "expires_at": fields.get("expires_at"),
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
    transports.announce_on_commit(template["queue"], ids, using=using)
    if ids and signals.task_enqueued.has_listeners(Task):
        for created in Task.objects.using(using).filter(pk__in=ids).iterator():
            created.created = True
            signals.send_on_commit(signals.task_enqueued, created)
    if ids and enqueue_hooks:
        _call_enqueue_hooks(list(Task.objects.using(using).filter(pk__in=ids)))
    return ids


def call_enqueue_hooks(tasks: list[Task]):
    """Tell the enqueue hooks (``jobs.testing.immediately``) of ``tasks``, just enqueued."""
    _call_enqueue_hooks(tasks)


# The tasks enqueued inside ``hooks_deferred()``, told to the hooks at its end.
_deferred: ContextVar[list | None] = ContextVar("jobs_enqueue_hooks_deferred", default=None)


@contextlib.contextmanager
def hooks_deferred() -> Iterator[None]:
    """Hold back the enqueue hooks until the block ends, then tell them of every task it
    enqueued: a workflow's tasks run (in immediate mode) once the whole workflow is stored, not
    as each is written, when a batch's first members would complete it alone."""
    if _deferred.get() is not None or not enqueue_hooks:
        yield
        return
    held: list[Task] = []
    token = _deferred.set(held)
    try:
        yield
    finally:  # an exception (a rollback) goes on from the yield: nothing of it runs
        _deferred.reset(token)
    if held:
        _call_enqueue_hooks(held)


def _call_enqueue_hooks(tasks: list[Task]):
    held = _deferred.get()
    if held is not None:
        held.extend(tasks)
        return
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


_COLUMNS = {field.name: field for field in Task._meta.concrete_fields}
# The range of each integer column, the same on every database (SQLite would store more).
# The range of each integer column that every database holds; a priority's is Django's.
INT_RANGES = {
    "priority": (TASK_MIN_PRIORITY, TASK_MAX_PRIORITY),
    "max_attempts": MAX_ATTEMPTS_RANGE,
}


def check_fields(values: dict | None = None, **fields) -> dict:
    """Check (and clean) the columns an enqueue sets; raise PayloadError before any write.

    Identifiers (name, queue, idempotency key) are refused when the column cannot hold them;
    the summary, display text, is cleaned (``jobs.text.clean_text``). Returns the values.
    """
    values = {**(values or {}), **fields}
    if values.get("queue") is not None:
        check_queue_name(values["queue"])
    for name in ("name", "backend", "idempotency_key", "unique_key"):
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


def resolve_expires_at(expires_in=None, expires_at=None, *, due=None):
    """The deadline of a task enqueued now and due at ``due`` (None: now), from ``expires_in``
    (seconds from now) or ``expires_at``; PayloadError for one that leaves it no chance to run
    (not after its due time: past, or before a ``delay``) or more than 100 years away."""
    now = timezone.now()
    if expires_in is not None and expires_at is not None:
        raise ValueError("Pass either expires_in or expires_at, not both.")
    if expires_in is not None:
        deadline = now + check_delay(expires_in)
    else:
        try:
            deadline = check_run_after(expires_at, now)
        except PayloadError as exc:
            raise PayloadError(str(exc).replace("run_after", "expires_at", 1)) from None
    due = due or now
    if deadline <= due:
        raise PayloadError(
            f"The task would expire at {deadline.isoformat()}, before it is due "
            f"({due.isoformat()}): it could never run. Give a later expires_at, or none."
        )
    return deadline


_SET_BY_ENQUEUE = frozenset(SET_BY_ENQUEUE)


def create_task(
    *, idempotency_key=None, summary="", payload_text=None, unique=None, **fields
) -> Task:
    """Insert one task row; with an idempotency key, return the existing row on a duplicate.

    ``fields`` are Task fields; ``payload_text`` is the JSON of ``payload`` when the caller
    has it already (``encode_payload``), to save encoding it twice. ``unique`` (a task's
    ``resolved_unique()``) returns the task holding its key instead, perhaps with this call's
    arguments (``jobs.tasks.uniqueness``).
    """
    using = router.db_for_write(Task)
    now = timezone.now()
    values = {
        "backend": "",
        "queue": jobs_settings.DEFAULT_QUEUE,
        "priority": jobs_settings.DEFAULT_PRIORITY,
        "max_attempts": jobs_settings.DEFAULT_MAX_ATTEMPTS,
        "run_after": now,
        "expires_at": None,
        "status": Status.PENDING,
        "workflow": None,
        "workflow_role": "",
        **fields,
        "id": uuid.uuid4(),
        "owner": _real_owner(fields.get("owner")),
        "summary": summary,
        "idempotency_key": idempotency_key,
        "unique_key": None if unique is None else unique.key,
        "unique_while": None if unique is None else unique.scope,
        "created_at": now,
        "updated_at": now,
    }
    values = check_fields(values)
    unknown = values.keys() - _SET_BY_ENQUEUE
    if unknown:
        raise TypeError(f"create_task() sets no {', '.join(sorted(unknown))}")
    payload = values.pop("payload")
    if payload_text is None:
        validate_json(payload, "payload")
        payload_text = compact_json(payload)
    if unique is not None:
        holder = insert_unique(values, payload, payload_text, unique, using=using)
        if holder is not None:
            return holder
    elif not insert_one(values, payload_text, using=using):
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
        existing.replaced = False
        return existing
    task = new_task(values, payload, using=using)
    task.created = True
    task.replaced = False
    transports.announce_on_commit(task.queue, [task.pk], using=using)
    # Only when someone listens: an on-commit callback per enqueue is not free.
    if signals.task_enqueued.has_listeners(Task):
        signals.send_on_commit(signals.task_enqueued, task)
    # A blocked row is no due task: jobs.workflows.waiting calls the hooks once it is decided.
    if enqueue_hooks and task.status != Status.BLOCKED:
        _call_enqueue_hooks([task])
    return task
