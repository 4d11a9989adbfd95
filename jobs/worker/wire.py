"""What travels between the supervisor and its children: JSON messages and a shared slot.

A batch of claimed tasks goes to a child as one JSON message: each task row as an object of its
columns (on PostgreSQL the claim returns that JSON text itself, so the supervisor never builds a
model instance of a task it only hands on). The child answers with one or more JSON replies.
Nothing is pickled.

Beside the pipe, each child shares a small memory slot with the supervisor: which task of which
batch it is running and since when. The supervisor reads it to enforce the running task's
timeout without a message per task.
"""

import datetime
import json
import mmap
import os
import struct
import uuid
from dataclasses import dataclass

from django.db import models, router

from jobs.models import Task
from jobs.tasks.inserting import loaded_task


@dataclass(frozen=True)
class Claimed:
    """A claimed task as the supervisor keeps it: what it must know, and the row for the child."""

    id: uuid.UUID
    attempts: int
    worker_id: str
    name: str
    backend: str
    row: bytes  # the task's columns as a JSON object
    queue: str = ""  # its queue when the claim took from one queue alone (a capped queue's)
    waited_for: bool = False  # a workflow or a dependent waited for it when claimed


def encode_task(task: Task) -> bytes:
    """The task row as JSON: every column by its attribute name (datetimes in ISO 8601)."""
    return json.dumps(
        {field.attname: getattr(task, field.attname) for field in Task._meta.concrete_fields},
        default=_encode_value,
    ).encode()


def _encode_value(value):
    # Full precision: DjangoJSONEncoder would cut datetimes to milliseconds.
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"cannot send {type(value).__name__} to a child")


_FIELDS = None


def task_from_values(values: dict) -> Task:
    """A saved Task from the columns of one row, as a dict decoded from JSON (no query).

    What ``Model.from_db`` makes, built the cheap way (a child does this for every task):
    each column converted by its field and set in the instance's ``__dict__``, as loading a
    row does, without ``Model.__init__``'s walk through the fields. Where a receiver of
    ``post_init`` waits for tasks, the usual way is taken so it is called.
    """
    global _FIELDS
    if _FIELDS is None:
        _FIELDS = [(field.attname, _converter(field)) for field in Task._meta.concrete_fields]
    converted = {}
    for attname, convert in _FIELDS:
        value = values[attname]
        converted[attname] = value if convert is None or value is None else convert(value)
    # The shortcut into Django's internals that enqueue's new_task takes too: 5.0 µs a task
    # against 8.7 for from_db (docs/performance.md, "Shortcuts into Django's internals").
    return loaded_task(converted, using=router.db_for_write(Task))


def _converter(field):
    """How a column's JSON value becomes the field's value; None where it already is one."""
    if isinstance(field, models.DateTimeField):
        return _aware_datetime
    if isinstance(field, models.BooleanField):
        return bool  # SQLite's json_object gives 0 or 1
    if isinstance(field, models.UUIDField):
        return uuid.UUID
    plain = models.JSONField | models.CharField | models.TextField | models.IntegerField
    if isinstance(field, plain | models.BooleanField | models.ForeignKey):
        return None  # JSON holds these as they are (strings, numbers, booleans)
    return field.to_python


def _aware_datetime(text: str) -> datetime.datetime:
    # isoformat here and row_to_json on PostgreSQL write an offset; SQLite's json_object gives
    # the stored text, UTC without one (Django stores aware datetimes so there).
    value = datetime.datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=datetime.UTC)


# A child's report of a success the supervisor records, whose hook waits for its notice.
NOTIFY = "notify"
# The slot's index while a child calls the hooks of a notice, before its batch's first task.
NOTICE = -2


def batch_message(
    number: int, tasks: list[Claimed], budget: float, finished=(), refused=()
) -> bytes:
    """One message with a batch of tasks for a child: the rows are joined, not re-encoded.

    With ``finished`` or ``refused`` (task ids), the notice that the successes the child
    reported ``notify`` are written (or were refused): it calls their hooks before the batch.
    """
    rows = b",".join(claimed.row for claimed in tasks)
    notice = b""
    if finished or refused:
        notice = b',"finished":%s,"refused":%s' % (
            json.dumps([str(i) for i in finished]).encode(),
            json.dumps([str(i) for i in refused]).encode(),
        )
    return b'{"batch":%d,"budget":%r,"tasks":[%s]%s}' % (number, budget, rows, notice)


class Slot:
    """A few shared bytes: the child's current task, and the supervisor's request to stop.

    Created before the fork (an anonymous shared mapping), so both processes see one copy. The
    child writes ``(batch, index, started)`` as it starts each task of a batch; the supervisor
    reads it. The child can be descheduled halfway through a write, so the record is guarded
    like a seqlock: a counter made odd before the write and even after it; a reader retries
    while the counter is odd or moved. (Without it, a read was seen pairing a new batch and
    index with the slot's initial start time, 0: a no-op task "ran" for an hour and was killed.)
    """

    _SEQ = struct.Struct("q")
    # Batch number, index in the batch, monotonic start time; and for async tasks running
    # together, the range of indices that may be running, ``first`` to ``upto`` (0: none).
    _RECORD = struct.Struct("qqdqq")
    _RECORD_AT = _SEQ.size
    _STOP_AT = _RECORD_AT + _RECORD.size

    def __init__(self):
        self._map = mmap.mmap(-1, mmap.PAGESIZE)
        self._seq = 0  # the writer's own count; only the child writes after the fork
        self.start(-1, -1, 0.0)

    def start(self, batch: int, index: int, started: float, *, first: int = 0, upto: int = 0):
        """The child runs task ``index`` of ``batch`` since ``started``; with ``upto``, async
        tasks, those ``first`` to ``upto`` (excluded) may be running, ``index`` due first."""
        self._SEQ.pack_into(self._map, 0, self._seq + 1)  # odd: a write is under way
        self._RECORD.pack_into(self._map, self._RECORD_AT, batch, index, started, first, upto)
        self._seq += 2
        self._SEQ.pack_into(self._map, 0, self._seq)

    def current(self) -> tuple[int, int, float]:
        return self.current_run()[:3]

    def current_run(self) -> tuple[int, int, float, int, int]:
        """``(batch, index, started, first, upto)``, as the child last wrote them."""
        while True:
            (before,) = self._SEQ.unpack_from(self._map, 0)
            if not before % 2:
                record = self._RECORD.unpack_from(self._map, self._RECORD_AT)
                if self._SEQ.unpack_from(self._map, 0) == (before,):
                    return record
            os.sched_yield()  # let the writer finish

    def ask_to_stop(self):
        """Ask the child to start no further task of its batch (it returns them instead)."""
        self._map[self._STOP_AT] = 1

    @property
    def stop_asked(self) -> bool:
        return self._map[self._STOP_AT] == 1

    def close(self):
        self._map.close()
