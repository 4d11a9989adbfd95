"""Child processes: where task code runs, apart from the worker that supervises it.

The supervisor forks a fixed pool of children; each runs one task at a time, from batches the
supervisor sends it, and records the outcome of each itself, except plain successes, which it
reports for the supervisor to record many at once. A child that hangs, exits, dies by a signal
or grows too large is killed and replaced without the supervisor or the other children noticing
more than the lost slot. Messages are JSON (no pickle); see ``jobs.wire``.
"""

import contextlib
import gc
import json
import logging
import multiprocessing
import os
import signal
import threading
import time
from dataclasses import dataclass, field

from django.db import connections

from jobs import executor
from jobs.claimer import fork_quietly
from jobs.wire import Claimed, Slot, batch_message, task_from_values

logger = logging.getLogger(__name__)

_fork = multiprocessing.get_context("fork")


@dataclass
class Child:
    """The supervisor's handle on one child process and the batch of tasks it holds, if any."""

    process: object
    conn: object  # the supervisor's end of the pipe
    slot: Slot
    batch: dict = field(default_factory=dict)  # index -> Claimed, tasks with no outcome yet
    batch_number: int = 0
    dispatched: float = 0.0  # monotonic time the current batch was sent
    timeouts: dict = field(default_factory=dict)  # index -> seconds, for the current batch
    tasks_done: int = 0
    killed_for: str = ""  # why the supervisor killed it, when it did

    @property
    def busy(self) -> bool:
        return bool(self.batch)

    @property
    def pid(self) -> int:
        return self.process.pid

    def send(self, number: int, tasks: list[Claimed], timeouts: list[float], budget: float):
        self.batch = dict(enumerate(tasks))
        self.timeouts = dict(enumerate(timeouts))
        self.batch_number = number
        self.dispatched = time.monotonic()
        self.conn.send_bytes(batch_message(number, tasks, budget))

    def running(self) -> tuple[int, float] | None:
        """The index in its batch of the task the child runs now, and since when (monotonic)."""
        if not self.batch:
            return None
        number, index, started = self.slot.current()
        if number != self.batch_number:  # the child has not started the batch yet
            return min(self.batch), self.dispatched
        # No task of this batch started before it was sent: never trust an earlier time.
        return (index, max(started, self.dispatched)) if index in self.batch else None

    def deadline(self) -> float | None:
        """When the running task overruns its timeout (monotonic), if a task is running."""
        running = self.running()
        return None if running is None else running[1] + self.timeouts[running[0]]

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
    slot = Slot()
    # Move every object alive now out of the collector's reach: a child's collections would
    # otherwise write to them and copy the pages it shares with the supervisor.
    gc.freeze()
    parent_conn, child_conn = _fork.Pipe()
    process = _fork.Process(
        target=_child_main,
        # The child also closes its copy of the supervisor's end, or it would never see EOF.
        args=(
            child_conn, slot, os.getpid(), max_tasks, max_memory,
            (*close_fds, parent_conn.fileno()),
        ),
        daemon=True,
        name="jobs-child",
    )  # fmt: skip
    fork_quietly(process.start)
    # The child keeps its frozen copy; the supervisor must not, or cyclic garbage alive at a
    # fork would never be collected (a leak growing with every replaced child).
    gc.unfreeze()
    child_conn.close()
    return Child(process=process, conn=parent_conn, slot=slot)


def _child_main(conn, slot, parent_pid, max_tasks, max_memory, close_fds):
    for fd in close_fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    # Signals are the supervisor's business: Ctrl-C in a terminal reaches the whole process
    # group, and a task must not be interrupted by it halfway through.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _watch_parent(parent_pid)
    runner = _BatchRunner(conn, slot, max_tasks, max_memory)
    try:
        while not runner.recycle:
            try:
                message = conn.recv_bytes()
            except (EOFError, OSError):
                break  # the supervisor is gone or closed the pipe: nothing more to do
            runner.run(json.loads(message))
    finally:
        logging.shutdown()
        os._exit(0)  # skip inherited atexit handlers and finalizers of the parent's objects


class _BatchRunner:
    """Runs the tasks of each batch one after the other, and reports their outcomes.

    Outcomes go back in as few replies as possible: one when the batch is done, and one every
    ``REPORT_INTERVAL`` seconds while a long batch runs, so the supervisor records successes
    and frees slots without waiting for the whole batch. A task is only started within the
    batch's time budget (the first always is): the rest go back to the supervisor unstarted,
    so that a slow task never holds fast ones behind it for long, nor do they it.
    """

    REPORT_INTERVAL = 0.05

    def __init__(self, conn, slot, max_tasks, max_memory):
        self.conn, self.slot = conn, slot
        self.max_tasks, self.max_memory = max_tasks, max_memory
        self.done = 0
        self.recycle = False

    def run(self, message: dict):
        number, tasks, budget = message["batch"], message["tasks"], message["budget"]
        started = reported = time.monotonic()
        results, busy = [], 0.0
        returned = []
        for index, values in enumerate(tasks):
            now = time.monotonic()
            if index and (now - started > budget or self.slot.stop_asked or self.recycle):
                returned = list(range(index, len(tasks)))
                break
            if results and now - reported > self.REPORT_INTERVAL:
                self._reply(number, results, busy, final=False)
                results, busy, reported = [], 0.0, now
            self.slot.start(number, index, now)
            results.append(_run_one(index, values))
            busy += time.monotonic() - now
            self.done += 1
            self.recycle = bool(self.max_tasks and self.done >= self.max_tasks)
        too_big = self.max_memory and (rss_bytes(os.getpid()) or 0) > self.max_memory
        self.recycle = bool(self.recycle or too_big)
        self._reply(number, results, busy, final=True, returned=returned)

    def _reply(self, number, results, busy, *, final, returned=()):
        reply = {"batch": number, "results": results, "busy": busy, "final": final}
        if final:
            reply["returned"] = list(returned)
            reply["recycle"] = self.recycle
        self.conn.send_bytes(json.dumps(reply, separators=(",", ":")).encode())


def _run_one(index: int, values: dict) -> list:
    """Run one task; ``[index, outcome, result, finished_at]``, a result only if deferred."""
    task = task_from_values(values)
    outcome = executor.run(task, defer_success=True)
    if outcome.deferred:
        # The supervisor records it, with the successes of other children, in one statement.
        return [index, "deferred", outcome.result, time.time()]
    return [index, outcome.kind, None, None]


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
