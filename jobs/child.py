"""Child processes: where task code runs, apart from the worker that supervises it.

The supervisor forks a fixed pool of children; each runs one task at a time and records its
outcome itself. A child that hangs, exits, dies by a signal or grows too large is killed and
replaced without the supervisor or the other children noticing more than the lost slot.
Messages on the pipe are JSON (no pickle): the task's columns, and a one-line reply (with the
result of a success, which the supervisor records).
"""

import contextlib
import datetime
import gc
import json
import logging
import multiprocessing
import os
import signal
import threading
import time
import uuid
from dataclasses import dataclass, field

from django.db import connections, models, router

from jobs import executor
from jobs.models import Task

logger = logging.getLogger(__name__)

_fork = multiprocessing.get_context("fork")


@dataclass
class Child:
    """The supervisor's handle on one child process and the task it is running, if any."""

    process: object
    conn: object  # the supervisor's end of the pipe
    task: Task | None = None
    deadline: float = 0.0  # monotonic time at which the running task has overrun its timeout
    started: float = 0.0
    tasks_done: int = 0
    recycle: bool = False
    killed_for: str = ""  # why the supervisor killed it, when it did
    extra: dict = field(default_factory=dict)

    @property
    def busy(self) -> bool:
        return self.task is not None

    @property
    def pid(self) -> int:
        return self.process.pid

    def send(self, task: Task):
        self.conn.send_bytes(encode_task(task))

    def kill(self, reason: str):
        self.killed_for = reason
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.join(5)

    def rss_bytes(self) -> int | None:
        return rss_bytes(self.process.pid)


def rss_bytes(pid: int) -> int | None:
    """Resident memory of ``pid`` in bytes, from /proc (None where /proc is not available)."""
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def start_child(*, max_tasks: int | None, max_memory: int | None, close_fds=()) -> Child:
    """Fork a child, with no database connection of the supervisor's leaking into it.

    ``close_fds`` are descriptors of the supervisor's (its pipes to other children, its LISTEN
    socket) that the child must not hold: a sibling holding a pipe open would keep a child
    from seeing the supervisor close it.
    """
    # A connection shared across fork would be closed under the parent's feet by the child.
    connections.close_all()
    # Move every object alive now out of the collector's reach: a child's collections would
    # otherwise write to them and copy the pages it shares with the supervisor.
    gc.freeze()
    parent_conn, child_conn = _fork.Pipe()
    process = _fork.Process(
        target=_child_main,
        # The child also closes its copy of the supervisor's end, or it would never see EOF.
        args=(child_conn, os.getpid(), max_tasks, max_memory, (*close_fds, parent_conn.fileno())),
        daemon=True,
        name="jobs-child",
    )
    process.start()
    # The child keeps its frozen copy; the supervisor must not, or cyclic garbage alive at a
    # fork would never be collected (a leak growing with every replaced child).
    gc.unfreeze()
    child_conn.close()
    return Child(process=process, conn=parent_conn)


def _child_main(conn, parent_pid, max_tasks, max_memory, close_fds):
    for fd in close_fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    # Signals are the supervisor's business: Ctrl-C in a terminal reaches the whole process
    # group, and a task must not be interrupted by it halfway through.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _watch_parent(parent_pid)
    done = 0
    try:
        while True:
            try:
                message = conn.recv_bytes()
            except (EOFError, OSError):
                break  # the supervisor is gone or closed the pipe: nothing more to do
            reply = _run(message)
            done += 1
            too_big = max_memory and (rss_bytes(os.getpid()) or 0) > max_memory
            reply["recycle"] = bool((max_tasks and done >= max_tasks) or too_big)
            conn.send_bytes(json.dumps(reply).encode())
            if reply["recycle"]:
                break
    finally:
        logging.shutdown()
        os._exit(0)  # skip inherited atexit handlers and finalizers of the parent's objects


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


def decode_task(message: bytes) -> Task:
    """Rebuild the task ``encode_task`` sent, as a saved row (no query)."""
    values = json.loads(message)
    fields = Task._meta.concrete_fields
    return Task.from_db(
        router.db_for_write(Task),
        [field.attname for field in fields],
        [_to_python(field, values[field.attname]) for field in fields],
    )


def _to_python(field, value):
    if value is None or isinstance(field, models.JSONField):
        return value  # a JSON value is already what the field holds
    return field.to_python(value)


def _run(message: bytes) -> dict:
    task = decode_task(message)
    outcome = executor.run(task, defer_success=True)
    reply = {"task": str(task.pk), "outcome": outcome.kind}
    if outcome.deferred:
        # The supervisor records it, with the successes of other children, in one statement.
        reply["success"] = {"result": outcome.result, "finished_at": time.time()}
    return reply


def _watch_parent(parent_pid):
    """Exit if the supervisor dies (SIGKILL): its leases lapse, and the task must not run on.

    Without this, an orphaned child would keep running a task that another worker, after the
    lease expires, starts again: the same task twice at the same time.
    """

    def watch():
        while True:
            if os.getppid() != parent_pid:
                os._exit(70)
            time.sleep(0.2)

    threading.Thread(target=watch, daemon=True, name="jobs-parent-watch").start()
