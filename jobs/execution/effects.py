"""Side effects done at most once per business key, whatever the number of attempts.

A task may run more than once (a retry, a worker killed after the work but before recording the
outcome). Wrap each effect that must not repeat (charging credits, sending one invite) in
``once(key, func)``: a marker row for ``key`` is written in the same transaction as the effect's
own database writes, so both commit together or neither does.

For database effects that is exactly once. For effects outside the database (an e-mail, a call
to a payment API) it is *at least once, and at most once per committed marker*: if the process
dies after the e-mail left but before the transaction committed, the marker is gone with the
rest and the next attempt sends again. Pass an idempotency key to services that accept one.
"""

from dataclasses import dataclass

from django.db import IntegrityError, router, transaction

from jobs.exceptions import PayloadError
from jobs.models import Effect, Task
from jobs.tasks.payload import check_name, validate_json


@dataclass(frozen=True)
class EffectOutcome:
    """What ``once`` did: ``ran`` is False when the key was already done; ``result`` either way."""

    ran: bool
    result: object = None


def once(key: str, func, *args, task: Task | None = None, using=None, **kwargs) -> EffectOutcome:
    """Run ``func(*args, **kwargs)`` unless ``key`` is already done; record it in one transaction.

    The marker is inserted *before* ``func`` runs, inside the transaction: a second caller with
    the same key waits on the unique index (PostgreSQL) or the write lock (SQLite) until the
    first commits, then finds the key done; if the first rolls back, the second runs ``func``.
    ``func``'s return value (JSON) is stored and given back to later callers. An exception from
    ``func`` rolls back the marker and the effect's writes, and propagates.
    """
    if not isinstance(key, str) or not key or len(key) > 255:
        raise PayloadError("An effect key must be a non-empty string of at most 255 characters.")
    check_name(key, "effect key", 255)  # no NUL or surrogate: refused before the savepoint
    using = using or router.db_for_write(Effect)
    with transaction.atomic(using=using):
        try:
            # A savepoint, so that a duplicate key leaves the caller's transaction usable.
            with transaction.atomic(using=using):
                marker = Effect.objects.using(using).create(key=key, task=task)
        except IntegrityError:
            existing = Effect.objects.using(using).filter(key=key).first()
            if existing is None:  # the error was about something else
                raise
            return EffectOutcome(ran=False, result=existing.result)
        result = func(*args, **kwargs)
        validate_json(result, f"the result of effect {key!r}")
        if result is not None:
            marker.result = result
            marker.save(update_fields=["result"], using=using)
    return EffectOutcome(ran=True, result=result)


def is_done(key: str, using=None) -> bool:
    """Tell whether the effect ``key`` has been done (and committed)."""
    using = using or router.db_for_read(Effect)
    return Effect.objects.using(using).filter(key=key).exists()
