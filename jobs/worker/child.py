"""Child processes: where task code runs, apart from the worker that supervises it.

The supervisor forks a fixed pool of children; each runs one task at a time, from batches the
supervisor sends it, and records the outcome of each itself, except plain successes, which it
reports for the supervisor to record many at once. A success that a signal receiver waits for
(every task declared with Django's ``@task``: Django's own receivers log its end) it records
itself, with the others of its batch in one statement before its next reply, then sends its
signals (``jobs.execution.finishing.record_held``). A child that hangs, exits, dies by a signal
or grows too large is killed and replaced without the supervisor or the other children noticing
more than the lost slot. Messages are JSON (no pickle); see ``jobs.worker.wire``.

Each child leads a process group of its own, which the processes its tasks start join:
signals sent to the worker's process group (Ctrl-C, ``timeout``, ``kill -TERM -PGID``) reach
the supervisor alone, which stops gracefully; a child killed (timeout, memory, shutdown) is
killed with its whole group, so no process a task started outlives it. A signal sent to every
process (systemd's ``KillMode=control-group``) is ignored by the child itself: the supervisor
decides when it stops.
"""

import asyncio
import contextlib
import gc
import json
import logging
import multiprocessing
import os
import signal
import threading
import time
import warnings
from dataclasses import dataclass, field
from enum import StrEnum
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from django.db import connections

from jobs.execution import executor, finishing
from jobs.worker.async_batch import ASYNC_TIMEOUT_GRACE, AsyncRun
from jobs.worker.wire import Claimed, Slot, batch_message, task_from_values

logger = logging.getLogger(__name__)

_fork = multiprocessing.get_context("fork")


class StopReason(StrEnum):
    """Why the supervisor kills a child (``Child.kill``); the loss it records follows from it."""

    CANCEL = "cancel"  # its task ignored a cancellation (``jobs.worker.leases``)
    LEASE = "lease"  # its task's lease may have lapsed, the database silent (idem)
    TIMEOUT = "timeout"  # its task overran its timeout (``jobs.worker.pool``)
    MEMORY = "memory"  # it grew past the memory limit (idem)
    SHUTDOWN = "shutdown"  # the worker stops and its grace period is over (idem)


@dataclass
class Child:
    """The supervisor's handle on one child process and the batch of tasks it holds, if any."""

    process: BaseProcess  # a fork context's process, started
    conn: Connection  # the supervisor's end of the pipe
    slot: Slot
    batch: dict[int, Claimed] = field(default_factory=dict)  # tasks with no outcome yet
    batch_number: int = 0
    dispatched: float = 0.0  # monotonic time the current batch was sent
    timeouts: dict[int, float] = field(default_factory=dict)  # seconds, for the current batch
    tasks_done: int = 0
    killed_for: str = ""  # why the supervisor killed it, when it did
    cancelling: set[int] = field(default_factory=set)  # async tasks it was asked to cancel

    @property
    def busy(self) -> bool:
        return bool(self.batch)

    @property
    def pid(self) -> int:
        pid = self.process.pid
        assert pid is not None, "a child is started before anything asks for its pid"
        return pid

    def send(self, number: int, tasks: list[Claimed], timeouts: list[float], budget: float):
        self.batch = dict(enumerate(tasks))
        self.timeouts = dict(enumerate(timeouts))
        self.batch_number = number
        self.cancelling = set()
        self.dispatched = time.monotonic()
        self.conn.send_bytes(batch_message(number, tasks, budget))

    def running(self) -> tuple[int, float] | None:
        """The index in its batch of the task the child runs now, and since when (monotonic);
        of async tasks running together, the one whose deadline comes first."""
        if not self.batch:
            return None
        number, index, started, _, _ = self.slot.current_run()
        if number != self.batch_number:  # the child has not started the batch yet
            return min(self.batch), self.dispatched
        # No task of this batch started before it was sent: never trust an earlier time.
        return (index, max(started, self.dispatched)) if index in self.batch else None

    def running_all(self) -> list[int]:
        """The indices in its batch of every task the child may be running now: the one of
        ``running``, or the async tasks running together (not reported on yet)."""
        if not self.batch:
            return []
        number, index, _, first, upto = self.slot.current_run()
        if number != self.batch_number:
            return [min(self.batch)]
        if upto:
            return [at for at in range(first, upto) if at in self.batch]
        return [index] if index in self.batch else []

    def runs_async(self) -> bool:
        """Whether the child runs async tasks together now (on its event loop)."""
        number, _, _, _, upto = self.slot.current_run()
        return bool(self.batch) and number == self.batch_number and upto > 0

    def deadline(self) -> float | None:
        """When the running task overruns its timeout (monotonic), if a task is running; for
        async tasks, once the loop had a moment to cancel it (it kills no healthy child)."""
        running = self.running()
        if running is None:
            return None
        grace = ASYNC_TIMEOUT_GRACE if self.runs_async() else 0.0
        return running[1] + self.timeouts[running[0]] + grace

    def cancel(self, indices: list[int]):
        """Have the child cancel the coroutines of its async tasks ``indices`` (once each)."""
        indices = [index for index in indices if index not in self.cancelling]
        if indices:
            self.cancelling.update(indices)
            self.conn.send_bytes(json.dumps({"cancel": indices}).encode())

    def kill(self, reason: StopReason):
        """Kill the child and every process its tasks started (its process group)."""
        self.killed_for = reason
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        self.kill_group()
        self.process.join(5)

    def kill_group(self):
        """Kill what is left of the child's process group: processes its tasks started."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)

    def rss_bytes(self) -> int | None:
        return rss_bytes(self.pid)


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
        # Not daemonic: multiprocessing forbids daemonic processes to start processes, and a
        # task may (a Pool, a ProcessPoolExecutor). The supervisor stops its children itself,
        # and a child exits when the supervisor is gone (``_watch_parent``).
        daemon=False,
        name="jobs-child",
    )  # fmt: skip
    fork_quietly(process.start)
    # Both sides set the group, so it is set before either relies on it, whichever runs first.
    assert process.pid is not None, "started, so it has a pid"
    with contextlib.suppress(OSError):
        os.setpgid(process.pid, process.pid)
    # The child keeps its frozen copy; the supervisor must not, or cyclic garbage alive at a
    # fork would never be collected (a leak growing with every replaced child).
    gc.unfreeze()
    child_conn.close()
    return Child(process=process, conn=parent_conn, slot=slot)


def fork_quietly(fork):
    """Call ``fork()``; Python 3.12+ warns about forking with a thread alive, here needlessly.

    The claim thread is then idle (``jobs.worker.claimer.Claimer.before_fork``), holds no lock
    the child could need, and its connection is closed; the child never touches it.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*fork.*", category=DeprecationWarning)
        return fork()


def _child_main(conn, slot, parent_pid, max_tasks, max_memory, close_fds):
    for fd in close_fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)  # see the module's docstring
    # Stopping is the supervisor's business: a task must not be cut short halfway through by a
    # signal meant for the worker. A handler that does nothing, not SIG_IGN: an ignored signal
    # stays ignored in the programs a task runs (subprocess), and their own terminate() would
    # not work; a handler is reset to the default by exec, and by ``_after_fork_in_task``.
    signal.signal(signal.SIGINT, _ignore_signal)
    signal.signal(signal.SIGTERM, _ignore_signal)
    os.register_at_fork(after_in_child=_after_fork_in_task)
    _watch_parent(parent_pid)
    runner = _BatchRunner(conn, slot, max_tasks, max_memory)
    exit_code = 0
    try:
        while not runner.recycle:
            try:
                message = conn.recv_bytes()
            except (EOFError, OSError):
                break  # the supervisor is gone or closed the pipe: nothing more to do
            message = json.loads(message)
            if "batch" in message:  # not a late request to cancel a task now finished
                runner.run(message)
    except BaseException:
        # Not a task's doing (the executor keeps those): recording an outcome failed, say. The
        # supervisor records the running task as lost, with this exit code.
        logger.exception("child failed outside a task pid=%s", os.getpid())
        exit_code = 1
    finally:
        logging.shutdown()
        os._exit(exit_code)  # skip inherited atexit handlers and finalizers of the parent's


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
        self.recycle_reason = ""
        self.pid = os.getpid()  # only this process may reply: a task may fork
        # Successes a receiver waits for, recorded together before the next reply.
        self.held: list[tuple[int, Any, executor.Outcome]] = []
        # The outcomes of the batch running not reported yet, and the time spent on them.
        self.results: list[list[Any]] = []
        self.busy = 0.0
        self.reported = 0.0  # monotonic time of the last reply
        self.loop: asyncio.AbstractEventLoop | None = None  # for async tasks, made on first use

    def run(self, message: dict):
        number, tasks, budget = message["batch"], message["tasks"], message["budget"]
        started = self.reported = time.monotonic()
        self.results, self.busy = [], 0.0
        returned: list[int] = []
        index = 0
        while index < len(tasks):
            now = time.monotonic()
            if index and (now - started > budget or self.slot.stop_asked or self.recycle):
                returned = list(range(index, len(tasks)))
                break
            if (self.results or self.held) and now - self.reported > self.REPORT_INTERVAL:
                self.report(number, now)
            task = task_from_values(tasks[index])
            runnable = _resolved(task)
            if runnable is not None and runnable.is_async:
                group = self._async_run(
                    tasks, index, task, runnable
                )  # async tasks, from this one on: together on the loop
                unstarted = self._run_async(number, group, started, budget)
                index += len(group)
                if unstarted:
                    returned = unstarted + list(range(index, len(tasks)))
                    break
                continue
            self.slot.start(number, index, now)
            try:
                result = _run_one(
                    index, task=task, runnable=runnable, retire=self._retire, held=self.held
                )
            except BaseException:
                # Not the task's doing (the executor keeps those): the child exits, and the
                # supervisor records this task as lost. The tasks finished before it are
                # reported first, so that none of them is handed back and run again.
                if (self.results or self.held) and os.getpid() == self.pid:
                    with contextlib.suppress(Exception):
                        self._reply(number, self.results, self.busy, final=False)
                raise
            if result is not None:
                self.results.append(result)
            if os.getpid() != self.pid:  # a process the task forked, come back (see executor)
                os._exit(0)
            self.busy += time.monotonic() - now
            self.count_done()
            index += 1
        if self.max_memory and (rss_bytes(os.getpid()) or 0) > self.max_memory:
            self._retire(f"max_memory={self.max_memory // 2**20}MiB")
        self._reply(number, self.results, self.busy, final=True, returned=returned)

    def report(self, number: int, now: float):
        """Send the outcomes gathered so far of batch ``number`` (the batch goes on)."""
        self._reply(number, self.results, self.busy, final=False)
        self.results, self.busy, self.reported = [], 0.0, now

    def count_done(self):
        self.done += 1
        if self.max_tasks and self.done >= self.max_tasks:
            self._retire(f"max_tasks={self.max_tasks}")

    def _async_run(self, tasks: list[dict], index: int, task, runnable) -> list[tuple]:
        """The async tasks of the batch from ``index`` (``task``) on, up to its next other."""
        group = [(index, task, runnable)]
        for at in range(index + 1, len(tasks)):
            task = task_from_values(tasks[at])
            runnable = _resolved(task)
            if runnable is None or not runnable.is_async:
                break
            group.append((at, task, runnable))
        return group

    def _run_async(self, number, group, started: float, budget: float) -> list[int]:
        """Run the async tasks ``group`` together; the indices of those not started."""
        if self.loop is None:
            self.loop = asyncio.new_event_loop()
        run = AsyncRun(self, number, started, budget, self._entry)
        return run.run(self.loop, group)

    def _entry(self, index: int, task, outcome) -> list | None:
        return _entry(index, task, outcome, retire=self._retire, held=self.held)

    def _retire(self, reason: str):
        """Run no further task here: the supervisor replaces this child after the reply."""
        if not self.recycle:
            self.recycle, self.recycle_reason = True, reason

    def _reply(self, number, results, busy, *, final, returned=()):
        held, self.held = self.held, []
        try:
            if held:  # recorded first: a success is reported once it is written
                finishing.record_held([(task, outcome) for _, task, outcome in held])
                results += [[index, outcome.kind, None, None] for index, _, outcome in held]
        finally:
            # Sent even if they could not be recorded (the database unreachable past its retry):
            # the other outcomes are reported, the held tasks are not, and run again (at least
            # once) as any finished task of a lost child that it had not reported.
            reply = {"batch": number, "results": results, "busy": busy, "final": final}
            if final:
                reply["returned"] = list(returned)
                reply["recycle"] = self.recycle
                reply["recycle_reason"] = self.recycle_reason
            self.conn.send_bytes(json.dumps(reply, separators=(",", ":")).encode())


def _resolved(task) -> executor.Runnable | None:
    """The runnable of ``task``; None if it cannot be found (``executor.run`` records why)."""
    try:
        return executor.resolve(task)
    except BaseException:  # its module failed to import, even with SystemExit
        return None


def _run_one(index: int, values: dict | None = None, retire=None, held=None, *, task=None,
             runnable=None) -> list | None:  # fmt: skip
    """Run one task; ``[index, outcome, result, finished_at]``, a result only if deferred.

    ``retire(reason)`` is called when this child should run no other task after it. Given a
    list ``held``, a success that a receiver waits for is added to it, ``(index, task,
    outcome)``, for the caller to record with others (``finishing.record_held``): None then.
    """
    if task is None:
        assert values is not None, "a task or its row"
        task = task_from_values(values)
    outcome = executor.run(
        task, defer_success=True, hold_success=held is not None, runnable=runnable
    )
    return _entry(index, task, outcome, retire, held)


def _entry(index: int, task, outcome, retire=None, held=None) -> list | None:
    """What the supervisor is told of ``outcome`` (see ``_run_one``)."""
    if outcome.unsettled and retire is not None:
        retire(outcome.unsettled)
    if outcome.held and held is not None:
        held.append((index, task, outcome))
        return None
    if outcome.deferred:
        # The supervisor records it, with the successes of other children, in one statement.
        return [index, "deferred", outcome.result, time.time()]
    return [index, outcome.kind, None, None]


def _ignore_signal(signum, frame):
    """SIGTERM and SIGINT in a child: the supervisor has them too, and stops the children."""


_inherited_connections: list[Any] = []  # DB-API connections; see _after_fork_in_task


def _after_fork_in_task():
    """In a process a task forks (``os.fork``, ``multiprocessing``): undo the child's set-up.

    Signals get their usual effect again, so the task can stop its own processes. The database
    connections are the child's, shared through the fork: one used or closed here would break
    the child's session. They are set aside (never closed, so no goodbye is sent on the
    child's behalf: their sockets are pointed at /dev/null) and Django opens new ones if the
    process uses the database.
    """
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for connection in connections.all(initialized_only=True):
        if connection.connection is None:
            continue
        _inherited_connections.append(connection.connection)
        with contextlib.suppress(Exception):
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, connection.connection.fileno())
            os.close(devnull)
        connection.connection = None


def _watch_parent(parent_pid):
    """Exit if the supervisor dies (SIGKILL): its leases lapse, and the task must not run on.

    Without this, an orphaned child would keep running a task that another worker, after the
    lease expires, starts again: the same task twice at the same time.
    """

    def watch():
        while True:
            if os.getppid() != parent_pid:
                if os.getpgrp() == os.getpid():
                    # With the processes its task started (this one included).
                    os.killpg(os.getpid(), signal.SIGKILL)
                os._exit(70)
            time.sleep(0.2)

    threading.Thread(target=watch, daemon=True, name="jobs-parent-watch").start()
