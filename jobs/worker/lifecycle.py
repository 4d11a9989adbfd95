"""The worker: a supervisor that decides when tasks run, and a pool of child processes.

The supervisor never runs task code. It claims due tasks in one statement, in a thread of its
own (``jobs.worker.claimer``), as many as its children can take (a batch each, sized so that a
batch of
recent tasks' length fits ``JOBS_BATCH_SECONDS``; one task each while tasks are slow) and some
more to keep at hand, so a child that finishes never waits for a claim. It hands each child a
batch; records the successes children report, many at once and with its next claim (failures
and retries the child records itself); renews the leases of everything it holds; kills a child
whose running task overruns its timeout, ignores a cancellation, or grows past the memory
limit, and hands back the rest of that child's batch; replaces children that exit; and on
SIGTERM/SIGINT stops claiming, has children start nothing more, lets running tasks finish within
the grace period, then hands back the rest so another worker takes them at once.
The pool of children (spawning, dispatching, replies, losses, limits) is in ``jobs.worker.pool``.
"""

import logging
import math
import os
import signal
import socket
import time
import uuid
from collections import deque

from django.db import DatabaseError
from django.utils import timezone

from jobs import transitions
from jobs.conf import jobs_settings
from jobs.db import first_line
from jobs.exceptions import MemoryLimitExceeded, TaskTimeout, WorkerCrashed
from jobs.tasks.discovery import discover_task_modules
from jobs.worker import claiming, warmup
from jobs.worker.child import Child
from jobs.worker.claimer import Claimer
from jobs.worker.notify import Listener
from jobs.worker.pool import ChildPool
from jobs.worker.upkeep import Upkeep

logger = logging.getLogger(__name__)


def make_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Worker(ChildPool, Upkeep):
    def __init__(
        self,
        *,
        queues=None,
        concurrency: int | None = None,
        burst: bool = False,
        poll_interval: float | None = None,
        grace: float | None = None,
        max_tasks_per_child: int | None = None,
        max_memory_per_child: int | None = None,
    ):
        self.queues = sorted(set(queues or ()))
        self.concurrency = concurrency or jobs_settings.CONCURRENCY
        self.burst = burst
        self.poll_interval = poll_interval or jobs_settings.POLL_INTERVAL
        self.grace = jobs_settings.SHUTDOWN_GRACE if grace is None else grace
        self.max_tasks_per_child = max_tasks_per_child or jobs_settings.MAX_TASKS_PER_CHILD
        max_memory_mib = max_memory_per_child or jobs_settings.MAX_MEMORY_PER_CHILD
        self.max_memory_bytes = int(max_memory_mib * 1024 * 1024) if max_memory_mib else None
        self.lease_seconds = jobs_settings.LEASE_SECONDS
        self.worker_id = make_worker_id()
        self.children: list[Child] = []
        self.listener = Listener()
        self._stop_requested = 0  # signals received: 1 = finish within grace, 2 = stop now
        self._stop_deadline = None
        self._next_heartbeat = 0.0
        self._next_maintenance = 0.0
        self._next_due = None  # monotonic time the earliest delayed task becomes due
        self._wakeup_read, self._wakeup_write = os.pipe()
        self._selector_now, self._selector_built_for = None, ()  # see ChildPool._selector
        self._paused = frozenset()  # queues of this worker paused, as last logged
        self._successes: list[transitions.Success] = []  # reported by children, not recorded
        self._successes_since = 0.0  # monotonic time the oldest of them was reported
        self._ready: deque = deque()  # claimed tasks waiting for a child (jobs.worker.wire.Claimed)
        self.batch_size = jobs_settings.BATCH_SIZE
        self.batch_seconds = jobs_settings.BATCH_SECONDS
        self._task_seconds = None  # how long recent tasks took, on average (a moving average)
        self._batch_number = 0
        self._timeouts = {}  # (name, backend) -> seconds
        self._claimer = Claimer(self.worker_id, self.queues, self.lease_seconds,
                                self._wakeup_write)  # fmt: skip
        # False after a claim found fewer due tasks than it asked for, until there is news.
        self._may_claim = True
        self._news = 0  # news counted (see ChildPool._wait), and as a claim started:
        self._news_at_claim = 0
        self._claim_started_at = None  # when the last claim started (database time)
        self._claim_after = 0.0  # monotonic time before which no claim starts (after a fault)
        self._last_renewal = 0.0  # monotonic time the last heartbeat that renewed leases began
        self._database_down_since = None  # monotonic time of the heartbeat fault, if any
        self._unleased = set()  # ids of tasks stopped because their lease may have lapsed

    # Lifecycle ---------------------------------------------------------------------------------

    def run(self) -> int:
        """Serve until stopped (or, with ``burst``, until nothing is due); return an exit code."""
        discover_task_modules()  # a broken tasks module is logged, not fatal
        self._install_signal_handlers()
        # Registered before any child exists: a worker that cannot reach its database, or is
        # stopped meanwhile, has no process to stop.
        try:
            self._retry(self._register, "register_worker", abandon=lambda: self._stop_requested > 0)
        except DatabaseError as exc:
            if self._stop_requested:
                logger.info("worker stopped before it started worker_id=%s", self.worker_id)
                return 0
            logger.error(
                "worker not started, could not register in the database error=%r",
                first_line(exc),
            )
            return 1
        self._last_renewal = time.monotonic()
        try:
            warmup.warm_children_path()  # before the fork, so that what it warms stays shared
            for _ in range(self.concurrency):
                self.children.append(self._spawn())
            # Listen before the first claim: a task enqueued in between is found by that claim,
            # and every later one is announced.
            self.listener.fileno()
            logger.info(
                "worker started worker_id=%s queues=%s concurrency=%d burst=%s listen=%s",
                self.worker_id,
                ",".join(self.queues) or "*",
                self.concurrency,
                self.burst,
                self.listener.supported,
            )
            self._loop()
        finally:
            self._shutdown()
        return 0

    def _loop(self):
        while True:
            self._stop_unleased()
            if self._stop_requested:
                self._heartbeat()  # the leases of tasks finishing within the grace
                self._collect_claim(wait=True)
                self._stop_children()
                self._record_successes()
                if not self._busy() or self._stop_requested > 1:
                    return
                if time.monotonic() >= self._stop_deadline:
                    logger.warning("grace period over worker_id=%s", self.worker_id)
                    return
            else:
                claimed = self._collect_claim()
                self._dispatch_ready()
                if self.burst and claimed == [] and not self._busy() and not self._ready:
                    return  # the last claim found nothing, and nothing runs
                self._heartbeat()
                self._maintain()
                self._claim()
                idle = self._idle() and not self._ready and not self._claimer.busy
                self._next_due = self._next_due_at() if idle else None
            if self._wait(self._wait_timeout()):
                self._may_claim = True
                self._news += 1
            self._enforce_limits()

    def _stop_children(self):
        """Have children start no further task of their batches; hand back what waits here."""
        for child in self.children:
            child.slot.ask_to_stop()
        waiting, self._ready = list(self._ready), deque()
        self._hand_back(waiting)

    def _shutdown(self):
        """Hand back what is still running, stop the children, and mark this worker stopped."""
        # Whatever fails here, the children below are stopped: no exit path leaves them.
        try:
            self._collect_claim(wait=True)
        except Exception:
            logger.exception("claim failed worker_id=%s", self.worker_id)
        try:
            self._claimer.close()
            self._record_successes(deadline_seconds=self._grace_left())
            waiting, self._ready = list(self._ready), deque()
            self._hand_back(waiting)
        except Exception:
            logger.exception("shutdown bookkeeping failed worker_id=%s", self.worker_id)
        for child in self.children:
            if child.busy:
                child.kill("shutdown")
                self._hand_back(list(child.batch.values()))
                child.batch = {}
            child.conn.close()
        for child in self.children:
            child.process.join(2)
            if child.process.is_alive():
                child.kill("shutdown")
            child.kill_group()
        self.listener.close()
        if self._selector_now is not None:
            self._selector_now.close()
        try:
            self._retry(self._unregister, "unregister_worker", deadline_seconds=self._grace_left())
        except DatabaseError as exc:
            logger.warning(
                "worker not marked stopped, database unreachable worker_id=%s error=%r",
                self.worker_id, first_line(exc),
            )  # fmt: skip
        logger.info("worker stopped worker_id=%s", self.worker_id)

    def stop(self, immediately=False):
        self._stop_requested = 2 if immediately else max(self._stop_requested, 1)
        if self._stop_deadline is None:
            self._stop_deadline = time.monotonic() + self.grace
        os.write(self._wakeup_write, b"\0")

    def _install_signal_handlers(self):
        def handle(signum, frame):
            immediately = self._stop_requested > 0
            logger.info(
                "worker stopping on signal signal=%s action=%s grace=%s",
                signal.Signals(signum).name,
                "stop_now" if immediately else "finish_running",
                self.grace,
            )
            self.stop(immediately=immediately)

        signal.signal(signal.SIGTERM, handle)
        signal.signal(signal.SIGINT, handle)

    # Children ----------------------------------------------------------------------------------

    def _lost_error(self, child: Child, reason: str, timeout: float):
        """The error to record for a task whose child was killed or died; None for a cancel."""
        if reason == "cancel":
            return None
        if reason == "timeout":
            return TaskTimeout(f"The task ran longer than its timeout of {timeout:g} seconds.")
        if reason == "lease":
            return WorkerCrashed(
                "The task was stopped: its worker could not reach the database to renew its lease.",
                detail=f"child process {child.pid} killed, lease not renewed",
            )
        if reason == "memory":
            return MemoryLimitExceeded(
                "The task used more memory than this worker allows.",
                detail=f"child rss above {self.max_memory_bytes // 2**20} MiB",
            )
        return WorkerCrashed(
            "The task stopped unexpectedly.",
            detail=f"child process {child.pid} exited with code {child.process.exitcode}",
        )

    def _wait_timeout(self) -> float:
        timeout = self.poll_interval
        if self._stop_requested:
            timeout = min(timeout, max(0.0, self._stop_deadline - time.monotonic()))
        deadlines = [child.deadline() for child in self.children if child.busy]
        deadlines = [deadline for deadline in deadlines if deadline is not None]
        if deadlines:
            timeout = min(timeout, max(0.0, min(deadlines) - time.monotonic()))
        if not self._stop_requested:
            timeout = min(timeout, max(0.0, self._next_heartbeat - time.monotonic()))
            if self._successes:
                flush_at = self._successes_since + self.SUCCESS_DELAY
                timeout = min(timeout, max(0.0, flush_at - time.monotonic()))
            if self._next_due is not None:
                timeout = min(timeout, max(0.0, self._next_due - time.monotonic()))
        return timeout

    def _next_due_at(self):
        """Monotonic time at which the earliest delayed task is due, so it starts on time."""
        try:
            due_at = self._retry(lambda: claiming.next_due_at(queues=self.queues), "next_due")
        except DatabaseError:
            return None  # the poll interval decides; the heartbeat tells of the outage
        seconds = (due_at - timezone.now()).total_seconds() if due_at else 0
        if due_at and self._claim_started_at and due_at > self._claim_started_at:
            return time.monotonic() + max(0.0, seconds)  # due after the last claim looked
        # Due already but not claimed (taken by another worker, or its queue is paused): the
        # poll interval decides, rather than spinning.
        return time.monotonic() + seconds if seconds > 0 else None

    # Database duties ---------------------------------------------------------------------------

    # Seconds a reported success may wait to be written with the next claim, and how many may.
    SUCCESS_DELAY = 0.05
    SUCCESS_BATCH = 1000
    CLAIM_PAUSE = 1.0  # seconds between claims while the database does not answer

    def _wanted(self) -> int:
        """How many tasks to claim: a batch for each idle child, and some to keep at hand.

        At hand, so that a child that finishes gets its next task at once rather than after a
        claim: with quick tasks a batch per child; with slower ones about twice as many as the
        children finish, together, during one claim (at most one per child). A worker of
        slow tasks thus holds about as many as it runs, and leaves the rest to other workers.
        """
        size = self._batch_size()
        wanted = len(self._idle()) * size
        if size > 1:
            wanted += len(self.children) * size
        elif self._task_seconds:
            during_claim = len(self.children) * self._claimer.seconds / self._task_seconds
            # Twice that, and one: claims vary in length, and finishes bunch up.
            wanted += min(len(self.children), math.ceil(2 * during_claim) + 1)
        return max(0, wanted - len(self._ready))

    def _add_success(self, success: transitions.Success):
        if not self._successes:
            self._successes_since = time.monotonic()
        self._successes.append(success)

    def _claim(self):
        """Start a claim, in the claim thread, if tasks are wanted and none is under way.

        Reported successes are recorded with it (see ``jobs.worker.claiming.claim_and_record``).
        With nothing to claim, they are written once they have waited ``SUCCESS_DELAY`` or are many.
        """
        if self._claimer.busy or self._leases_may_lapse() or time.monotonic() < self._claim_after:
            return
        wanted = self._wanted() if self._may_claim else 0
        if wanted <= 0:
            overdue = time.monotonic() - self._successes_since >= self.SUCCESS_DELAY
            if self._successes and (overdue or len(self._successes) >= self.SUCCESS_BATCH):
                self._record_successes()
            return

        def after_fault():
            self._next_heartbeat = 0.0  # a claim may have committed unseen: check at once

        successes, self._successes = self._successes, []
        self._news_at_claim, self._claim_started_at = self._news, timezone.now()
        self._claimer.start(
            wanted,
            successes,
            on_fault=after_fault,
            # Stopping, nothing more is claimed: the successes it records are written apart.
            abandon=lambda: self._stop_requested > 0 or self._give_up_bookkeeping(),
        )

    def _collect_claim(self, *, wait=False) -> list | None:
        """Take in the tasks of a finished claim (None if no claim finished)."""
        recording = self._claimer.recording
        try:
            claimed = self._claimer.collect(wait=wait)
        except DatabaseError as exc:
            self._successes = recording + self._successes  # not recorded: they stay to do
            self._claim_after = time.monotonic() + self.CLAIM_PAUSE
            if not self._stop_requested:
                logger.warning("claim failed, database unreachable error=%r", first_line(exc))
            return None
        if claimed is not None:
            self._ready.extend(claimed)
            logger.debug(
                "claimed count=%d wanted=%d ready=%d", len(claimed), self._claimer.wanted,
                len(self._ready),
            )  # fmt: skip
            if len(claimed) < self._claimer.wanted:
                # Nothing more was due: look again on news, or at once if news came in while
                # the claim ran (a task enqueued after its snapshot).
                self._may_claim = self._news != self._news_at_claim
        return claimed

    def _record_successes(self, deadline_seconds=None):
        """Record the successes children reported since the last round, in one statement.

        Until it is written, such a task stays ``running`` under this worker's lease (renewed by
        the heartbeat); if this worker dies first, the lease lapses and the task runs again.
        """
        if not self._successes:
            return
        successes = self._successes
        try:
            self._retry(
                lambda: transitions.succeed_many(successes),
                f"record {len(successes)} successes",
                deadline_seconds=deadline_seconds,
            )
        except DatabaseError as exc:
            # Kept: written at the next round, or, if the worker exits first, left ``running``
            # under their lease and run again once it lapses (at least once).
            ids = ",".join(str(success.task_id) for success in successes[:20])
            logger.warning(
                "successes not recorded yet, database unreachable count=%d ids=%s%s error=%r",
                len(successes), ids, ",..." if len(successes) > 20 else "", first_line(exc),
            )  # fmt: skip
            return
        self._successes = []
