"""Child processes: where task code runs, apart from the worker that supervises it.

The supervisor forks a fixed pool of children; each runs one task at a time (async tasks, several
together on its event loop: ``jobs.worker.async_batch``), from batches the supervisor sends it
(``jobs.worker.batches``), and records the outcome of each itself, except plain successes, which it
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

import contextlib
import gc
import json
import logging
import multiprocessing
import os
import select
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

from jobs.tasks.django_api import cache_task_signal_receivers
from jobs.worker import connection_slots
from jobs.worker.async_batch import ASYNC_TIMEOUT_GRACE
from jobs.worker.batches import _BatchRunner, rss_bytes
from jobs.worker.wire import NOTICE, Claimed, Slot, batch_message

logger = logging.getLogger(__name__)

_fork = multiprocessing.get_context("fork")


class StopReason(StrEnum):
    """Why the supervisor kills a child (``Child.kill``); the loss it records follows from it."""

    CANCEL = "cancel"  # its task ignored a cancellation (``jobs.worker.leases``)
    LEASE = "lease"  # its task's lease may have lapsed, the database silent (idem)
    SESSION = "session"  # the worker's session lock was lost: a peer may rescue (session)
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
    # Successes it reported ``notify``, written (or refused) since: the notice to send it next,
    # with the longest timeout of their tasks (``jobs.worker.notices``).
    notice_finished: list[Claimed] = field(default_factory=list)
    notice_refused: list[Claimed] = field(default_factory=list)
    notice_timeout: float = 0.0
    # The notice sent with the current batch, ``(task, written)``, until the child replies.
    noticing: list[tuple[Claimed, bool]] = field(default_factory=list)
    noticing_timeout: float = 0.0

    @property
    def busy(self) -> bool:
        return bool(self.batch) or bool(self.noticing)

    @property
    def notice_due(self) -> bool:
        return bool(self.notice_finished or self.notice_refused)

    @property
    def pid(self) -> int:
        pid = self.process.pid
        assert pid is not None, "a child is started before anything asks for its pid"
        return pid

    def send(self, number: int, tasks: list[Claimed], timeouts: list[float], budget: float):
        """Send a batch (maybe empty), with the notice due (``notice_due``) before its tasks."""
        self.batch = dict(enumerate(tasks))
        self.timeouts = dict(enumerate(timeouts))
        self.batch_number = number
        self.cancelling = set()
        finished, refused = self.notice_finished, self.notice_refused
        self.noticing = [(c, True) for c in finished] + [(c, False) for c in refused]
        self.noticing_timeout = self.notice_timeout
        self.notice_finished, self.notice_refused, self.notice_timeout = [], [], 0.0
        self.dispatched = time.monotonic()
        self.conn.send_bytes(batch_message(
            number, tasks, budget, [c.id for c in finished], [c.id for c in refused]
        ))  # fmt: skip

    def notice_started(self) -> bool:
        """Whether the child took in the notice sent with its batch (its hooks are called, or
        were): past it, the notice is never sent again, nor are its hooks called elsewhere."""
        number = self.slot.current_run()[0]
        return bool(self.noticing) and number == self.batch_number

    def in_notice(self) -> bool:
        """Whether the child calls a notice's hooks now (or has not started it yet)."""
        if not self.noticing:
            return False
        number, index, _, _, _ = self.slot.current_run()
        return number != self.batch_number or index == NOTICE

    def running(self) -> tuple[int, float] | None:
        """The index in its batch of the task the child runs now, and since when (monotonic);
        of async tasks running together, the one whose deadline comes first."""
        if not self.batch:
            return None
        number, index, started, _, _ = self.slot.current_run()
        if self.in_notice():  # no task of the batch runs before the notice is done
            return None
        if number != self.batch_number:  # the child has not started the batch yet
            return min(self.batch), self.dispatched
        # No task of this batch started before it was sent: never trust an earlier time.
        return (index, max(started, self.dispatched)) if index in self.batch else None

    def running_all(self) -> list[int]:
        """The indices in its batch of every task the child may be running now: the one of
        ``running``, or the async tasks running together (not reported on yet)."""
        if not self.batch or self.in_notice():
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
        if self.in_notice():
            number, _, started, _, _ = self.slot.current_run()
            since = started if number == self.batch_number else self.dispatched
            return max(since, self.dispatched) + self.noticing_timeout
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
    connection_slots.install_in_child()
    cache_task_signal_receivers()
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
                connection_slots.release()  # under JOBS_CHILD_CONNECTIONS: the next child's turn
    except BaseException:
        # Not a task's doing (the executor keeps those): recording an outcome failed, say. The
        # supervisor records the running task as lost, with this exit code.
        logger.exception("child failed outside a task pid=%s", os.getpid())
        exit_code = 1
    finally:
        logging.shutdown()
        os._exit(exit_code)  # skip inherited atexit handlers and finalizers of the parent's


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
    connection_slots.forget_in_fork()
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
    """Die if the supervisor dies (SIGKILL): its tasks are rescued, and must not run on.

    Without this, an orphaned child would keep running a task that another worker starts
    again (at once, on the same host: ``jobs.worker.liveness``): the same task twice at the
    same time. A pidfd wakes the watch the moment the supervisor exits (Linux 5.3+); elsewhere
    it polls the parent pid every 0.2 s. Not PR_SET_PDEATHSIG: it follows the thread that
    forked, not the process, and leaves the processes a task started running.
    """

    def die():
        if os.getpgrp() == os.getpid():
            os.killpg(0, signal.SIGKILL)  # with the processes its task started (this one too)
        os._exit(70)

    def wait_on_pidfd(pidfd):
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        while not poller.poll():
            pass
        die()

    def poll_parent():
        while os.getppid() == parent_pid:
            time.sleep(0.2)
        die()

    pidfd = None
    with contextlib.suppress(AttributeError, OSError):  # not Linux, or older than 5.3
        pidfd = os.pidfd_open(parent_pid)
    if os.getppid() != parent_pid:  # gone already: the pid may be another process's now
        die()
    target, args = (poll_parent, ()) if pidfd is None else (wait_on_pidfd, (pidfd,))
    threading.Thread(target=target, args=args, daemon=True, name="jobs-parent-watch").start()
