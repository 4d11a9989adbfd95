"""Uniqueness with a scope: one task per key of a task name while it waits, while it is active,
or for a period from the first enqueue; a duplicate gets the task holding the key, or replaces
its arguments and due time while it still waits (a debounce).

The database decides every step, never a read followed by a write that trusts it:

- **While waiting or active**: the INSERT meets the partial unique index of the rows holding
  their key (``jobs.models.UNIQUE_HELD``) and makes no row if the key is held
  (``ON CONFLICT DO NOTHING``: no error, so the caller's transaction stays usable).
- **For a period**: a row of ``UniqueHold`` per key, upserted so that only an expired hold is
  replaced (``jobs.sql.common.take_unique_hold``), then the task's row, in one transaction.
- **The duplicate's action**: an UPDATE guarded by the holder's status, so a task that started
  meanwhile keeps its arguments.

A call may carry an idempotency key as well (the scheduler gives every slot one): both keys
hold, and a duplicate of the idempotency key gets its task unchanged, whatever the scope says.

Between a refused INSERT and the read of the holder, the holder may have started or finished
(the key is free again): the enqueue then tries again, a few times at most.
"""

from datetime import datetime

from django.db import IntegrityError, connections, transaction

from jobs import sql
from jobs.models import CLAIMABLE_STATUSES, UNIQUE_HELD, Task, UniqueHold
from jobs.tasks.definition import Uniqueness
from jobs.tasks.inserting import insert_one

# Rounds of "the key is held" then "its holder is gone" before giving up: each needs another
# process to start or finish the holder in between, so more than two is already rare.
ATTEMPTS = 10

_HOLD_FIELDS = {field.name: field for field in UniqueHold._meta.concrete_fields}


def insert_unique(values: dict, payload, payload_text: str, unique: Uniqueness, *, using: str):
    """INSERT the task of ``values`` unless its key is held; return None, or the holder.

    The holder returned has ``created`` False, and ``replaced`` True if it took this call's
    arguments and due time (``on_duplicate="replace"``, while it waits).
    """
    take = _take_for_period if unique.period is not None else _take_while
    for _ in range(ATTEMPTS):
        inserted, holder = take(values, payload_text, unique, using=using)
        if inserted:
            return None
        if holder is None:
            continue  # the key was held, but its holder let it go since: try again
        same_work = values["idempotency_key"] is not None and (
            holder.idempotency_key == values["idempotency_key"]
        )
        if unique.replace and not same_work and holder.status in CLAIMABLE_STATUSES:
            guard = {} if unique.period is not None else {"unique_key": unique.key}
            if not _replace(holder, values, payload, guard, using=using):
                continue  # it started (or finished) meanwhile: look again
            holder.replaced = True
        else:
            holder.replaced = False
        holder.created = False
        return holder
    raise IntegrityError(
        f"The unique key {unique.key!r} of {values['name']} is held by a task this transaction "
        f"cannot see, or changed hands {ATTEMPTS} times during one enqueue."
    )


def _take_while(values, payload_text, unique, *, using) -> tuple[bool, Task | None]:
    """The INSERT of a key held while waiting or active: whether it inserted, or the holder
    (None if there is none any more)."""
    if insert_one(values, payload_text, using=using):
        return True, None
    # The row that made the INSERT conflict was committed before it (ON CONFLICT waits for a
    # racing transaction to end), so this read, a statement of its own, sees it if still held.
    return False, _idempotent_holder(values, using=using) or _unique_holder(
        values["name"], unique.key, using=using
    )


def _take_for_period(values, payload_text, unique, *, using) -> tuple[bool, Task | None]:
    """The hold of a key for a period, then the task: whether it inserted, or the holder."""
    now = values["created_at"]
    name, key = values["name"], unique.key
    try:
        with transaction.atomic(using=using):
            if _take_hold(name, key, values["id"], now + unique.period, now, using=using):
                _insert_or_roll_back(values, payload_text, using=using)
                return True, None
    except _IdempotencyKeyTaken:  # the hold went back with the savepoint
        return False, _idempotent_holder(values, using=using)
    holds = UniqueHold.objects.using(using).filter(name=name, key=key)
    holder_id = holds.values_list("task_id", flat=True).first()
    if holder_id is None:
        return False, None  # pruned since: the next upsert inserts it anew
    holder = Task.objects.using(using).filter(pk=holder_id).first()
    if holder is not None:
        return False, holder
    # Its task was deleted (pruned) within the period: the key is free. Taken over from that
    # task only, so of two enqueues finding it so, one takes it and the other sees its task.
    with transaction.atomic(using=using):
        if holds.filter(task_id=holder_id).update(
            task_id=values["id"], expires_at=now + unique.period
        ):
            _insert_or_roll_back(values, payload_text, using=using)
            return True, None
    return False, None


def holders(name: str, key: str, *, using: str):
    """The task holding ``key`` of ``name`` while waiting or active (one at most), found
    through the key's partial unique index."""
    condition = sql.common.unique_held_condition(connections[using])
    rows = Task.objects.using(using).filter(name=name, unique_key=key).extra(where=[condition])
    return rows.order_by()


def _unique_holder(name: str, key: str, *, using: str) -> Task | None:
    return next(iter(holders(name, key, using=using)[:1]), None)


class _IdempotencyKeyTaken(Exception):
    """The row of a period's hold met its idempotency key taken: the hold is rolled back."""


def _insert_or_roll_back(values, payload_text, *, using):
    if not insert_one(values, payload_text, using=using):
        raise _IdempotencyKeyTaken


def _idempotent_holder(values, *, using) -> Task | None:
    if values["idempotency_key"] is None:
        return None
    rows = Task.objects.using(using)
    return rows.filter(name=values["name"], idempotency_key=values["idempotency_key"]).first()


def _take_hold(name: str, key: str, task_id, expires_at: datetime, now, *, using: str) -> bool:
    connection = connections[using]
    params = [
        _HOLD_FIELDS["name"].get_db_prep_save(name, connection),
        _HOLD_FIELDS["key"].get_db_prep_save(key, connection),
        _HOLD_FIELDS["task_id"].get_db_prep_save(task_id, connection),
        _HOLD_FIELDS["expires_at"].get_db_prep_save(expires_at, connection),
        _HOLD_FIELDS["expires_at"].get_db_prep_save(now, connection),
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql.common.take_unique_hold(connection), params)
        return cursor.fetchone() is not None


def _replace(holder: Task, values: dict, payload, guard: dict, *, using: str) -> bool:
    """Give the waiting ``holder`` the arguments and due time of ``values``, if it still waits.

    ``guard`` narrows the rows to those still holding the key (while waiting or active).
    """
    rows = Task.objects.using(using).filter(pk=holder.pk, status__in=CLAIMABLE_STATUSES)
    if guard:
        rows = rows.filter(UNIQUE_HELD, **guard)
    changes = {
        "payload": payload,
        "run_after": values["run_after"],
        "updated_at": values["updated_at"],
    }
    if not rows.update(**changes):
        return False
    for name, value in changes.items():
        setattr(holder, name, value)
    return True
