"""The supervisor's pool of child processes: spawning, dispatching, replies, losses, limits.

It knows the children (which task each runs, since when, until when) and the claimed tasks
waiting for one (``ready``). It never claims and never writes a success: a success a child
reports goes to ``on_success`` (the completer, ``jobs.worker.completer``); a loss (a child that
died or was killed while running a task) it records through ``jobs.worker.losses``, and tasks
it will not run it hands back.
"""

import contextlib
import json
import logging
import math
import os
import signal
import time
from collections import deque
from datetime import UTC, datetime

from django.db import DatabaseError

from jobs import transitions
from jobs.conf import jobs_settings
from jobs.db import first_line
from jobs.execution import executor
from jobs.worker import connection_slots, losses
from jobs.worker.child import Child, StopReason, start_child
from jobs.worker.notices import Notices
from jobs.worker.wire import NOTIFY, Claimed

logger = logging.getLogger(__name__)


class ChildPool:
    """A fixed number of child processes, and the claimed tasks waiting for one."""

    def __init__(
        self,
        concurrency: int,
        *,
        max_tasks: int | None,
        max_memory_bytes: int | None,
        retry,
        on_success,
        stopping,
        before_fork,
    ):
        """Keep ``concurrency`` children, once ``start`` has forked them.

        ``retry(operation, what, **options)`` runs a write, retried on database faults;
        ``on_success(success)`` takes a success a child reported (``jobs.transitions.Success``);
        ``stopping()`` says whether the worker is shutting down (a lost child is then not
        replaced); ``before_fork()`` readies the worker for a fork and returns the descriptors
        of its own that a new child must close.
        """
        self.concurrency = concurrency
        self.max_tasks, self.max_memory_bytes = max_tasks, max_memory_bytes
        self.batch_size = jobs_settings.BATCH_SIZE
        self.batch_seconds = jobs_settings.BATCH_SECONDS
        self._retry, self._on_success = retry, on_success
        self._stopping, self._before_fork = stopping, before_fork
        self.children: list[Child] = []
        self.ready: deque[Claimed] = deque()  # claimed tasks waiting for a child
        # See wait_handles.
        self._handles: list[tuple[int, tuple[str, Child]]] = []
        self._handles_for: tuple[Child, ...] = ()
        self.task_seconds: float | None = None  # recent tasks' average length (a moving average)
        self._batch_number = 0
        self._timeouts: dict[tuple[str, str], float] = {}  # (name, backend) -> seconds
        self._async: dict[tuple[str, str], bool] = {}  # (name, backend) -> is an async def
        # A child runs this many async tasks of a batch together (jobs.worker.async_batch).
        self.async_batch_size = min(self.batch_size, jobs_settings.ASYNC_CONCURRENCY)
        self.async_last = False  # whether the last task sent to a child was async
        # Successes of Django's @task the completer writes, whose child waits for the word.
        self.notices = Notices(retry=retry, children=lambda: self.children)

    def start(self):
        connection_slots.prepare(self.concurrency)  # JOBS_CHILD_CONNECTIONS, before any fork
        for _ in range(self.concurrency):
            self.children.append(self._spawn())

    def _spawn(self) -> Child:
        inherited = list(self._before_fork())
        inherited += [child.conn.fileno() for child in self.children if not child.conn.closed]
        return start_child(
            max_tasks=self.max_tasks, max_memory=self.max_memory_bytes, close_fds=inherited
        )

    def _replace(self, child: Child):
        self.notices.child_gone(child)
        child.conn.close()
        child.slot.close()
        self.children[self.children.index(child)] = self._spawn()

    def busy(self) -> int:
        return sum(child.busy for child in self.children)

    def idle(self) -> list[Child]:
        return [child for child in self.children if not child.busy]

    def in_hand(self) -> list[Claimed]:
        """Every claimed task held here and not reported on: its leases to renew."""
        held = list(self.ready)
        for child in self.children:
            held.extend(child.batch.values())
        return held

    def running(self) -> list[Claimed]:
        """The tasks children run now (async tasks running together included)."""
        return [child.batch[index] for child in self.children for index in child.running_all()]

    def next_deadline(self) -> float | None:
        """When (monotonic) the first running task overruns its timeout; None if none runs."""
        deadlines = [child.deadline() for child in self.children if child.busy]
        return min((deadline for deadline in deadlines if deadline is not None), default=None)

    # Dispatching -------------------------------------------------------------------------------

    def take(self, claimed: list[Claimed]):
        """Keep claimed tasks until a child is free for them, after those waiting already."""
        self.ready.extend(claimed)

    def waiting(self) -> int:
        """How many claimed tasks wait for a child."""
        return len(self.ready)

    def batch_size_now(self) -> int:
        """How many tasks a child gets at once: as many as fit the batch's time budget.

        Judged by how long recent tasks took; one at a time until the first reports come in,
        so a worker of slow tasks never holds more than it runs.
        """
        if self.async_last:  # they mostly wait: as many as a child runs together
            return self.async_batch_size
        if self.task_seconds is None:
            return 1
        fits = int(self.batch_seconds / max(self.task_seconds, 1e-6))
        return max(1, min(self.batch_size, fits))

    def wanted(self, claim_seconds: float) -> int:
        """How many tasks to claim: a batch for each idle child, and some to keep at hand.

        At hand, so that a child that finishes gets its next task at once rather than after a
        claim (which takes ``claim_seconds``): with quick tasks a batch per child; with slower
        ones about twice as many as the children finish, together, during one claim (at most
        one per child). A worker of slow tasks thus holds about as many as it runs, and leaves
        the rest to other workers.
        """
        size = self.batch_size_now()
        wanted = len(self.idle()) * size
        if size > 1:
            wanted += len(self.children) * size
        elif self.task_seconds:
            during_claim = len(self.children) * claim_seconds / self.task_seconds
            # Twice that, and one: claims vary in length, and finishes bunch up.
            wanted += min(len(self.children), math.ceil(2 * during_claim) + 1)
        return max(0, wanted - len(self.ready))

    def dispatch(self):
        """Send claimed tasks waiting here to idle children, a batch to each; and to an idle
        child with a notice due and no task for it, the notice alone (``jobs.worker.notices``)."""
        size = self.batch_size_now()
        for child in self.idle():
            if not self.ready:
                if child.notice_due:
                    self._batch_number += 1
                    child.send(self._batch_number, [], [], self.batch_seconds)
                continue
            if self._is_async(self.ready[0]):
                batch = self._async_batch(len(self.idle()))
            else:
                batch = [self.ready.popleft() for _ in range(min(size, len(self.ready)))]
            self.async_last = self._is_async(batch[-1])
            self._batch_number += 1
            child.send(self._batch_number, batch, [self._timeout(c) for c in batch],
                       self.batch_seconds)  # fmt: skip

    def _async_batch(self, idle: int) -> list[Claimed]:
        """The async tasks first in line, as many as a child runs together, shared fairly
        among the ``idle`` children: they wait together, whatever their expected length."""
        share = max(1, min(self.async_batch_size, math.ceil(len(self.ready) / max(idle, 1))))
        batch = [self.ready.popleft()]
        while self.ready and len(batch) < share and self._is_async(self.ready[0]):
            batch.append(self.ready.popleft())
        return batch

    def _is_async(self, claimed: Claimed) -> bool:
        key = (claimed.name, claimed.backend)
        if key not in self._async:
            try:
                self._async[key] = executor.is_async_task(claimed.name, claimed.backend)
            except BaseException:  # unknown here, or its module failed to import
                self._async[key] = False  # the child records why it cannot run
        return self._async[key]

    def _timeout(self, claimed: Claimed) -> float:
        key = (claimed.name, claimed.backend)
        if key not in self._timeouts:
            try:
                timeout = executor.timeout_for(claimed.name, claimed.backend)
            except BaseException:  # its module failed to import, even with SystemExit
                timeout = None  # the child records why it cannot run
            self._timeouts[key] = timeout or jobs_settings.DEFAULT_TIMEOUT
        return self._timeouts[key]

    # Replies -----------------------------------------------------------------------------------

    def wait_handles(self) -> list[tuple[int, tuple[str, Child]]]:
        """What to wait on for the children: each descriptor (a child's pipe, for a reply; its
        sentinel, for an exit) with the handle to give ``handle_ready`` once it is ready.

        The same list until the children change, so a waiter can tell when to register them
        again; it holds the children it was built for, so that none is freed and another takes
        its place (and its descriptor numbers) unnoticed.
        """
        children = self.children
        stale = len(children) != len(self._handles_for) or any(
            now is not then for now, then in zip(children, self._handles_for, strict=True)
        )
        if stale:
            self._handles = []
            for child in children:
                self._handles.append((child.conn.fileno(), ("reply", child)))
                self._handles.append((child.process.sentinel, ("exit", child)))
            self._handles_for = tuple(children)
        return self._handles

    def handle_ready(self, handles):
        """Take the replies and the exits the ready ``handles`` (from ``wait_handles``) tell of."""
        replies = {id(child) for kind, child in handles if kind == "reply"}
        exits = {id(child) for kind, child in handles if kind == "exit"}
        for child in list(self.children):
            if id(child) in replies:
                self.receive(child)
            elif id(child) in exits:
                self.lost(child)

    def receive(self, child: Child):
        """Take every reply ``child`` has sent, so a child's final one is never left for later."""
        while True:
            try:
                reply = json.loads(child.conn.recv_bytes())
            except (EOFError, OSError):
                self.lost(child)
                return
            self._take_reply(child, reply)
            if child.conn.closed or not child.conn.poll():
                return

    def _take_reply(self, child: Child, reply: dict):
        results = reply["results"]
        if reply["batch"] != child.batch_number:
            logger.error("reply for another batch pid=%s batch=%s", child.pid, reply["batch"])
            return
        child.noticing = []  # replied to: the notice sent with the batch was taken in
        for index, outcome, result, finished_at in results:
            claimed = child.batch.pop(index)
            if outcome == NOTIFY:
                self.notices.add(child, claimed, child.timeouts[index])
            if outcome in ("deferred", NOTIFY):
                self._on_success(
                    transitions.Success(claimed.id, claimed.attempts, claimed.worker_id, result,
                                        datetime.fromtimestamp(finished_at, UTC),
                                        waited_for=claimed.waited_for)
                )  # fmt: skip
        if results:
            seconds = reply["busy"] / len(results)
            self.task_seconds = seconds if self.task_seconds is None else (
                0.8 * self.task_seconds + 0.2 * seconds
            )  # fmt: skip
            child.tasks_done += len(results)
        if not reply["final"]:
            return
        # Returned unstarted (the batch's time budget ran out, or the worker is stopping):
        # first in line again, in their order.
        returned = [child.batch.pop(index) for index in reply["returned"] if index in child.batch]
        returned += child.batch.values()  # never expected: a task the child did not mention
        self.ready.extendleft(reversed(returned))
        child.batch = {}
        if reply.get("recycle"):
            child.process.join(5)
            child.kill_group()  # processes its tasks left behind
            logger.info(
                "child recycled pid=%s tasks=%d reason=%s",
                child.pid, child.tasks_done, json.dumps(reply.get("recycle_reason", "")),
            )  # fmt: skip
            self._replace(child)

    # Losses and limits -------------------------------------------------------------------------

    def lost(self, child: Child):
        """A child exited: record the failure of its running task, hand back the rest."""
        self._take_pending_replies(child)
        if child not in self.children:
            return  # its final reply had it recycled: it exited as it said it would
        child.process.join(1)
        child.kill_group()  # processes its task started die with it
        reason = child.killed_for or "crash"
        running = child.running()
        current = child.batch.get(running[0]) if running else None
        logger.warning(
            "child exited pid=%s exitcode=%s reason=%s task_id=%s",
            child.pid,
            child.process.exitcode,
            reason,
            current.id if current else "-",
        )
        losses.record_running(child, reason, self.max_memory_bytes, self._retry)
        self.notices.child_gone(child)
        # Not started, or finished with an outcome the child had not reported yet: run again.
        self.hand_back(list(child.batch.values()))
        child.batch = {}
        child.conn.close()
        if self._stopping():
            self.children.remove(child)  # no new children while shutting down
            child.slot.close()
        else:
            self._replace(child)

    def _take_pending_replies(self, child: Child):
        """Take the replies a child sent before it exited or was killed, not read yet: the tasks
        they report finished are recorded, never handed back and run again."""
        with contextlib.suppress(EOFError, OSError, ValueError):
            while not child.conn.closed and child.conn.poll():
                self._take_reply(child, json.loads(child.conn.recv_bytes()))

    def hand_back(self, claimed: list[Claimed]):
        """Release claimed tasks this worker will not run: claimable at once, attempt undone."""
        if not claimed:
            return
        attempts = [(c.id, c.attempts, c.worker_id) for c in claimed]
        try:
            self._retry(
                lambda: transitions.release_many(attempts), f"hand back {len(attempts)} tasks"
            )
        except DatabaseError as exc:
            # Left running under this worker's lease: rescued once it lapses (or handed back by
            # the next heartbeat, if this worker goes on).
            logger.warning(
                "tasks not handed back, database unreachable ids=%s error=%r",
                ",".join(str(c.id) for c in claimed), first_line(exc),
            )  # fmt: skip
            return
        for c in claimed:
            logger.info("task handed back name=%s id=%s attempt=%d", c.name, c.id, c.attempts)

    def enforce_limits(self):
        """Kill children whose task overran its timeout or whose memory grew past the limit."""
        now = time.monotonic()
        for child in list(self.children):
            if not child.busy:
                continue
            deadline = child.deadline()
            if deadline is not None and now >= deadline and child.in_notice():
                # A receiver of Django's task_finished hangs: no task of the batch is to blame.
                logger.warning(
                    "task_finished receivers timed out pid=%s tasks=%d timeout=%gs",
                    child.pid, len(child.noticing), child.noticing_timeout,
                )  # fmt: skip
                self._kill(child, StopReason.TIMEOUT)
            # Read again, and checked: the child may have moved on since ``deadline`` read it.
            elif deadline is not None and now >= deadline and (running := child.running()):
                index, started = running
                task = child.batch[index]
                logger.warning(
                    "task timed out id=%s name=%s timeout=%gs ran=%.3fs",
                    task.id, task.name, child.timeouts[index], now - started,
                )  # fmt: skip
                self._kill(child, StopReason.TIMEOUT)
            elif self.max_memory_bytes and (child.rss_bytes() or 0) > self.max_memory_bytes:
                logger.warning("task over memory limit pid=%s", child.pid)
                self._kill(child, StopReason.MEMORY)

    def pids(self) -> list[int]:
        """The children's pids, to record on the worker's row (``jobs.worker.liveness``)."""
        return [child.pid for child in self.children]

    def kill_all_now(self, reason: StopReason):
        """SIGKILL every child and its group at once, busy or idle; safe from another thread
        (``jobs.worker.session``'s fence). The loop then records the losses (``stop_tasks``)."""
        for child in list(self.children):
            child.killed_for = reason
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGKILL)
            child.kill_group()

    def _kill(self, child: Child, reason: StopReason):
        child.kill(reason)
        self.lost(child)

    def cancel_async(self, task_ids):
        """Cancel the coroutines of the async tasks among ``task_ids`` (their owners asked):
        each is cancelled on its child's loop at its next ``await``, the others go on."""
        for child in self.children:
            if child.runs_async():
                child.cancel([i for i in child.running_all() if child.batch[i].id in task_ids])

    def stop_tasks(self, reason: StopReason, task_ids=None):
        """Kill the children running ``task_ids``, recording their loss for ``reason``.

        With ``task_ids`` None, every busy child, and forget the tasks waiting for one (they are
        not handed back: the database may not answer; their lease lapses, or the heartbeat
        hands them back).
        """
        for child in list(self.children):
            if task_ids is None:
                if child.busy:
                    self._kill(child, reason)
                continue
            running = [index for index in child.running_all() if child.batch[index].id in task_ids]
            if not running:
                continue
            if reason == StopReason.CANCEL and child.runs_async():
                # Its coroutines are cancelled on its loop, its other tasks go on; killed only
                # if one was asked before (its loop blocked, or the task ignores it).
                if all(index in child.cancelling for index in running):
                    self._kill(child, reason)
                else:
                    child.cancel(running)
            else:
                self._kill(child, reason)
        if task_ids is None:
            self.ready.clear()

    # Stopping ----------------------------------------------------------------------------------

    def ask_to_stop(self):
        """Have children start no further task of their batches; hand back what waits here."""
        for child in self.children:
            child.slot.ask_to_stop()
        self.hand_back_ready()

    def hand_back_ready(self):
        waiting, self.ready = list(self.ready), deque()
        self.hand_back(waiting)

    def close(self):
        """Kill the children still busy, handing back their tasks; stop every child."""
        for child in self.children:
            if child.busy:
                child.kill(StopReason.SHUTDOWN)
                self.hand_back(list(child.batch.values()))
                child.batch = {}
            child.conn.close()
        for child in self.children:
            child.process.join(2)
            if child.process.is_alive():
                child.kill(StopReason.SHUTDOWN)
            child.kill_group()
        self.notices.close()  # the notices no child took in: task_finished sent from here
