"""The supervisor's pool of child processes: spawning, dispatching, replies, losses, limits.

A mixin of ``jobs.worker.lifecycle.Worker``, kept apart so that each module stays readable: this
knows the children (which task each runs, since when, until when), the worker half knows the
lifecycle and the claims, ``jobs.worker.upkeep`` the heartbeat and maintenance. Only ``Worker`` uses
it.
"""

import contextlib
import json
import logging
import os
import selectors
import time
from datetime import UTC, datetime

from django.db import DatabaseError

from jobs import transitions
from jobs.conf import jobs_settings
from jobs.db import first_line, forget_queries
from jobs.execution import executor
from jobs.models import Task
from jobs.states import Status
from jobs.worker.child import Child, start_child
from jobs.worker.wire import Claimed

logger = logging.getLogger("jobs.worker")  # the same logger name as before the split


class ChildPool:
    """Bookkeeping of ``self.children``; expects the attributes ``Worker.__init__`` sets."""

    def _spawn(self) -> Child:
        self._claimer.before_fork()
        inherited = [self._wakeup_read, self._wakeup_write]
        inherited += [child.conn.fileno() for child in self.children if not child.conn.closed]
        listen_fd = self.listener.fileno() if self.listener.connected else None
        if listen_fd is not None:
            inherited.append(listen_fd)
        return start_child(
            max_tasks=self.max_tasks_per_child,
            max_memory=self.max_memory_bytes,
            close_fds=inherited,
        )

    def _replace(self, child: Child):
        child.conn.close()
        child.slot.close()
        self.children[self.children.index(child)] = self._spawn()

    def _busy(self) -> int:
        return sum(child.busy for child in self.children)

    def _idle(self) -> list[Child]:
        return [child for child in self.children if not child.busy]

    def _in_hand(self) -> list[Claimed]:
        """Every claimed task this worker holds and has not reported on: its leases to renew."""
        held = list(self._ready)
        for child in self.children:
            held.extend(child.batch.values())
        return held

    # Dispatching -------------------------------------------------------------------------------

    def _batch_size(self) -> int:
        """How many tasks a child gets at once: as many as fit the batch's time budget.

        Judged by how long recent tasks took; one at a time until the first reports come in,
        so a worker of slow tasks never holds more than it runs.
        """
        if self._task_seconds is None:
            return 1
        fits = int(self.batch_seconds / max(self._task_seconds, 1e-6))
        return max(1, min(self.batch_size, fits))

    def _dispatch_ready(self):
        """Send claimed tasks waiting here to idle children, a batch to each."""
        if not self._ready:
            return
        size = self._batch_size()
        for child in self._idle():
            if not self._ready:
                break
            batch = [self._ready.popleft() for _ in range(min(size, len(self._ready)))]
            self._batch_number += 1
            child.send(self._batch_number, batch, [self._timeout(c) for c in batch],
                       self.batch_seconds)  # fmt: skip

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

    def _wait(self, timeout: float) -> bool:
        """Wait for children, notifications, or the timeout; whether there is news.

        News is what may make a claim worth trying again: a notification, a child that
        finished or exited, or the timeout (a poll). Not the wake-up pipe alone (a signal, or the
        claim thread saying it is done).
        """
        forget_queries()  # once per round of the loop (see jobs.db)
        listen_fd = self.listener.fileno()
        events = self._selector(listen_fd).select(timeout)
        replies = {id(key.data[1]) for key, _ in events if key.data and key.data[0] == "reply"}
        exits = {id(key.data[1]) for key, _ in events if key.data and key.data[0] == "exit"}
        if any(key.data is None for key, _ in events):
            os.read(self._wakeup_read, 64)
        if any(key.data == ("listen", None) for key, _ in events):
            queues = self.listener.drain()
            logger.debug("woken queues=%s", ",".join(sorted(queues)))
        for child in list(self.children):
            if id(child) in replies:
                self._receive(child)
            elif id(child) in exits:
                self._lost(child)
        return not events or any(key.data is not None for key, _ in events)

    def _selector(self, listen_fd):
        """What ``_wait`` waits on, kept between calls: registering two descriptors per child
        at every call was most of the cost of a wait. Built again when the children or the
        LISTEN connection change; it holds the objects it was built for, so that none is freed
        and another takes its place (and its descriptor numbers) unnoticed."""
        built_for = (self.listener.connection, *self.children)
        stale = len(built_for) != len(self._selector_built_for) or any(
            now is not then for now, then in zip(built_for, self._selector_built_for, strict=True)
        )
        if stale:
            if self._selector_now is not None:
                self._selector_now.close()
            selector = selectors.DefaultSelector()
            selector.register(self._wakeup_read, selectors.EVENT_READ, None)
            if listen_fd is not None:
                selector.register(listen_fd, selectors.EVENT_READ, ("listen", None))
            for child in self.children:
                selector.register(child.conn.fileno(), selectors.EVENT_READ, ("reply", child))
                selector.register(child.process.sentinel, selectors.EVENT_READ, ("exit", child))
            self._selector_now, self._selector_built_for = selector, built_for
        return self._selector_now

    def _receive(self, child: Child):
        while True:  # every reply waiting, so a child's final one is never left for later
            try:
                reply = json.loads(child.conn.recv_bytes())
            except (EOFError, OSError):
                self._lost(child)
                return
            self._take_reply(child, reply)
            if child.conn.closed or not child.conn.poll():
                return

    def _take_reply(self, child: Child, reply: dict):
        results = reply["results"]
        if reply["batch"] != child.batch_number:
            logger.error("reply for another batch pid=%s batch=%s", child.pid, reply["batch"])
            return
        for index, outcome, result, finished_at in results:
            claimed = child.batch.pop(index)
            if outcome == "deferred":
                self._add_success(
                    transitions.Success(claimed.id, claimed.attempts, claimed.worker_id, result,
                                        datetime.fromtimestamp(finished_at, UTC))
                )  # fmt: skip
        if results:
            seconds = reply["busy"] / len(results)
            self._task_seconds = seconds if self._task_seconds is None else (
                0.8 * self._task_seconds + 0.2 * seconds
            )  # fmt: skip
            child.tasks_done += len(results)
        if not reply["final"]:
            return
        # Returned unstarted (the batch's time budget ran out, or the worker is stopping):
        # first in line again, in their order.
        returned = [child.batch.pop(index) for index in reply["returned"] if index in child.batch]
        returned += child.batch.values()  # never expected: a task the child did not mention
        self._ready.extendleft(reversed(returned))
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

    def _lost(self, child: Child):
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
        if current is not None:
            timeout = child.timeouts[running[0]]
            self._record_lost(current, self._lost_error(child, reason, timeout), running[1])
            del child.batch[running[0]]
        # Not started, or finished with an outcome the child had not reported yet: run again.
        self._hand_back(list(child.batch.values()))
        child.batch = {}
        child.conn.close()
        if self._stop_requested:
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

    def _hand_back(self, claimed: list[Claimed]):
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

    def _record_lost(self, claimed: Claimed, exc, started: float):
        def record():
            current = Task.objects.get(pk=claimed.id)
            if (current.status, current.attempts, current.worker_id) != (
                Status.RUNNING,
                claimed.attempts,
                claimed.worker_id,
            ):
                return False  # the child recorded its outcome before it went
            if exc is None:
                return transitions.cancel_running(current)
            try:
                runnable = executor.resolve(current)
            except Exception:
                runnable = None
            outcome = executor.outcome_for_exception(current, exc, runnable)
            outcome.duration = time.monotonic() - started
            return executor.record(current, outcome)

        try:
            self._retry(record, f"record_lost task_id={claimed.id}")
        except DatabaseError as exc:
            logger.warning(
                # It runs again once its lease lapses.
                "loss not recorded, database unreachable task_id=%s error=%r",
                claimed.id, first_line(exc),
            )  # fmt: skip

    def _enforce_limits(self):
        """Kill children whose task overran its timeout or whose memory grew past the limit."""
        now = time.monotonic()
        for child in list(self.children):
            if not child.busy:
                continue
            deadline = child.deadline()
            if deadline is not None and now >= deadline:
                index, started = child.running()
                running = child.batch[index]
                logger.warning(
                    "task timed out id=%s name=%s timeout=%gs ran=%.3fs",
                    running.id, running.name, child.timeouts[index], now - started,
                )  # fmt: skip
                self._kill_and_replace(child, "timeout")
            elif self.max_memory_bytes and (child.rss_bytes() or 0) > self.max_memory_bytes:
                logger.warning("task over memory limit pid=%s", child.pid)
                self._kill_and_replace(child, "memory")

    def _kill_and_replace(self, child: Child, reason: str):
        child.kill(reason)
        self._lost(child)
