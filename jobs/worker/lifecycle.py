"""The worker: a supervisor that decides when tasks run, and a pool of child processes.

The supervisor never runs task code. It claims due tasks in one statement (on PostgreSQL in a
thread of its own; on SQLite inline, see ``jobs.worker.claimer``), as many as its children can
take (a batch each, sized so that a batch of recent tasks' length fits ``JOBS_BATCH_SECONDS``;
one task each while tasks are slow) and some more to keep at hand, so a child that finishes
never waits for a claim. It hands each child a batch; records the
successes children report, many at once and with its next claim (failures and retries the child
records itself); renews the leases of everything it holds; kills a child whose running task
overruns its timeout, ignores a cancellation, or grows past the memory limit, and hands back the
rest of that child's batch; replaces children that exit; and on SIGTERM/SIGINT stops claiming,
has children start nothing more, lets running tasks finish within the grace period, then hands
back the rest so another worker takes them at once.

``Worker`` is the lifecycle (start, the loop, shutdown), the signals and the wait; it holds its
parts, each the owner of its own state (read and changed through its methods only), and wires
them together with callbacks; they share the ``retry`` policy below and the wake-up pipe:

- ``pool``: the children, the tasks waiting for one, replies, losses, limits (``jobs.worker.pool``);
- ``claimer``: the claim thread (inline on SQLite), when a claim is worth starting (how many:
  the pool's ``wanted``), when the next delayed task is due (``jobs.worker.claimer``);
- ``completer``: successes held until written, with the next claim or on their own
  (``jobs.worker.completer``);
- ``leases``: the worker's row, heartbeats, tasks stopped when a lease may lapse
  (``jobs.worker.leases``);
- ``maintenance``: rescue, periodic tasks, pruning (``jobs.worker.maintenance_runner``).
"""

import logging
import os
import selectors
import signal
import socket
import time
import uuid

from django.db import DatabaseError

from jobs import transports
from jobs.conf import jobs_settings
from jobs.db import first_line, forget_queries, retry_on_database_error
from jobs.models import Task
from jobs.tasks.discovery import discover_task_modules
from jobs.transports.base import redact
from jobs.worker import session as session_proof
from jobs.worker import warmup
from jobs.worker.child import StopReason
from jobs.worker.claimer import Claimer
from jobs.worker.completer import Completer
from jobs.worker.leases import LeaseKeeper
from jobs.worker.liveness import PeerWatch, watches_sessions
from jobs.worker.maintenance_runner import MaintenanceRunner
from jobs.worker.pool import ChildPool
from jobs.worker.queue_caps import QueueCaps, cap_problem

logger = logging.getLogger(__name__)


def make_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Worker:
    """A supervisor and its children: run with ``run()``, stop with ``stop()`` or a signal."""

    def __init__(
        self,
        *,
        queues=None,
        queue_caps: dict[str, int] | None = None,
        concurrency: int | None = None,
        burst: bool = False,
        poll_interval: float | None = None,
        grace: float | None = None,
        max_tasks_per_child: int | None = None,
        max_memory_per_child: int | None = None,
    ):
        self.queues = sorted(set(queues or ()))
        self.concurrency = concurrency or jobs_settings.CONCURRENCY
        # The most tasks of a queue run at once here (``jobs.worker.queue_caps``).
        self.queue_caps = dict(queue_caps or {})
        problem = cap_problem(self.queue_caps, self.queues, self.concurrency)
        if problem:
            raise ValueError(f"queue_caps: {problem}")
        self.burst = burst
        self.poll_interval = poll_interval or jobs_settings.POLL_INTERVAL
        # When the next poll is due (monotonic): ``poll_interval`` after the last news. A wait
        # that ends for another timer (a heartbeat, a look at the peers) is no poll: taken for
        # one, every idle worker claimed and read its next due time twice a second, not once.
        self._poll_at = time.monotonic() + self.poll_interval
        self.grace = jobs_settings.SHUTDOWN_GRACE if grace is None else grace
        self.worker_id = make_worker_id()
        self.listener = transports.listener(self.queues)
        self._stop_requested = 0  # signals received: 1 = finish within grace, 2 = stop now
        # Monotonic time the grace ends; set with the first stop request (``stop``), never unset.
        self._stop_deadline: float | None = None
        self._wakeup_read, self._wakeup_write = os.pipe()
        # See _selector.
        self._selector_now: selectors.BaseSelector | None = None
        self._selector_built_for: tuple[object, ...] = ()
        max_memory_mib = max_memory_per_child or jobs_settings.MAX_MEMORY_PER_CHILD
        lease_seconds = jobs_settings.LEASE_SECONDS
        self.claimer = Claimer(self.worker_id, self.queues, lease_seconds, self._wakeup_write,
                               retry=self._retry, caps=QueueCaps(self.queue_caps),
                               holding=self._holding,
                               may_prepare=lambda: self.listener.keeps_sessions)  # fmt: skip
        self.completer = Completer(retry=self._retry, on_recorded=self._recorded)
        self.pool = ChildPool(
            self.concurrency,
            max_tasks=max_tasks_per_child or jobs_settings.MAX_TASKS_PER_CHILD,
            max_memory_bytes=int(max_memory_mib * 1024 * 1024) if max_memory_mib else None,
            retry=self._retry,
            on_success=self.completer.add,
            stopping=lambda: self._stop_requested > 0,
            before_fork=self._before_fork,
        )
        self.leases = LeaseKeeper(
            self.worker_id,
            self.queues,
            queue_caps=self.queue_caps,
            concurrency=self.concurrency,
            lease_seconds=lease_seconds,
            retry=self._retry,
            holding=self.pool.in_hand,
            completing=self.completer.task_ids,
            recording=self.completer.recording,
            running=self.pool.running,
            busy=self.pool.busy,
            claim_busy=lambda: self.claimer.busy,
            stop=self.pool.stop_tasks,
            cancel=self.pool.cancel_async,
            drain=self.drain,
        )
        self.maintenance = MaintenanceRunner(self.worker_id, retry=self._retry)
        # Dead workers: of this host by their pids, of any by their sessions' locks.
        self.peers = PeerWatch(self.worker_id, retry=self._retry, sessions=watches_sessions())
        self.session: session_proof.SessionLock | None = None  # this worker's, once started

    # Lifecycle ---------------------------------------------------------------------------------

    def run(self) -> int:
        """Serve until stopped (or, with ``burst``, until nothing is due); return an exit code."""
        discover_task_modules()  # a broken tasks module is logged, not fatal
        self._install_signal_handlers()
        # Registered before any child exists: a worker that cannot reach its database, or is
        # stopped meanwhile, has no process to stop.
        try:
            self.leases.register(abandon=lambda: self._stop_requested > 0)
        except DatabaseError as exc:
            if self._stop_requested:
                logger.info("worker stopped before it started worker_id=%s", self.worker_id)
                return 0
            logger.error(
                "worker not started, could not register in the database error=%r",
                first_line(exc),
            )
            return 1
        try:
            warmup.warm_children_path()  # before the fork, so that what it warms stays shared
            # Listen before the first claim: a task enqueued in between is found by that claim,
            # and every later one is announced.
            self.listener.fileno()
            self._first_bookkeeping()
            self.pool.start()
            self._start_session()  # once the listener has proven (or not) its sessions kept
            transport, broker = transports.backend()
            logger.info(
                "worker started worker_id=%s queues=%s concurrency=%d burst=%s listen=%s "
                "session_rescue=%s transport=%s" + (" broker=%s" if broker else ""),
                self.worker_id,
                ",".join(
                    f"{q}:{self.queue_caps[q]}" if q in self.queue_caps else q for q in self.queues
                )
                or "*",
                self.concurrency,
                self.burst,
                self.listener.supported,
                self.session is not None,
                transport,
                *([redact(broker)] if broker else []),
            )
            self._loop()
        finally:
            self._shutdown()
        return 0

    def _first_bookkeeping(self):
        """The first round's heartbeat, maintenance and peer check, before the children fork.

        Their first run fills the supervisor's lazy state (Django's cached properties and
        compiled queries, psycopg's adapters, specialised bytecode); done after the fork it
        copied 7 MiB of pages the children shared (docs/performance.md, "Memory and the drain's
        floor"). Done before, those pages stay shared. It is the work the loop's first round
        did anyway, in the same order and before the same first claim; it holds no task (the
        worker has none yet) and its connections are closed before each fork (``start_child``).
        """
        if self._stop_requested:
            return
        self.leases.heartbeat()
        self.maintenance.run_if_due()
        if self.peers.check_if_due():
            self.claimer.news()

    def _loop(self):
        pool = self.pool
        while True:
            self._after_fence()
            self.leases.note_children(pool.pids())
            self.leases.stop_unleased()
            if self._stop_requested:
                self.leases.heartbeat()  # the leases of tasks finishing within the grace
                self._collect_claim(wait=True)
                pool.ask_to_stop()
                self.completer.flush()
                pool.dispatch()  # the notices of what it wrote (jobs.worker.notices)
                if not pool.busy() or self._stop_requested > 1:
                    return
                if self._stop_deadline is not None and time.monotonic() >= self._stop_deadline:
                    logger.warning("grace period over worker_id=%s", self.worker_id)
                    return
            else:
                claimed = self._collect_claim()
                self._dispatch()
                if (
                    self.burst
                    and claimed == []
                    and not self.claimer.may_find_more
                    and not pool.busy()
                    and not pool.waiting()
                    and not pool.notices.pending()
                    and not self.completer.task_ids()
                    and not self.claimer.rate_held()
                ):
                    # The last claim found nothing, and nothing came in while it ran (a task
                    # that ended meanwhile may have made another due: a snooze of 0 s, a retry,
                    # a concurrency key's room), nothing runs, no success waits to be
                    # written (one that does may free a concurrency key's room for the next),
                    # and no due task waits for its rate window to end.
                    return
                self.leases.heartbeat()
                self.maintenance.run_if_due()
                if self.peers.check_if_due():
                    self.claimer.news()  # the rescued tasks are due now: claim them at once
                self._claim()
                self.claimer.plan_wake(idle=bool(pool.idle()) and not pool.waiting())
            if self._wait(self._wait_timeout()):
                self.claimer.news()
            pool.enforce_limits()

    def _shutdown(self):
        """Hand back what is still running, stop the children, and mark this worker stopped."""
        # Whatever fails here, the children below are stopped: no exit path leaves them.
        try:
            self._collect_claim(wait=True)
        except Exception:
            logger.exception("claim failed worker_id=%s", self.worker_id)
        try:
            self.claimer.close()
            self.completer.flush(deadline_seconds=self._grace_left())
            self.pool.hand_back_ready()
        except Exception:
            logger.exception("shutdown bookkeeping failed worker_id=%s", self.worker_id)
        self.pool.close()
        self.listener.close()
        self.maintenance.close()  # before unregister: the next leader need not wait its lease
        if self._selector_now is not None:
            self._selector_now.close()
        try:
            self.leases.unregister(deadline_seconds=self._grace_left())
        except DatabaseError as exc:
            logger.warning(
                "worker not marked stopped, database unreachable worker_id=%s error=%r",
                self.worker_id, first_line(exc),
            )  # fmt: skip
        if self.session is not None:
            self.session.close()  # after the row says stopped: no peer judges it any more
        logger.info("worker stopped worker_id=%s", self.worker_id)

    def stop(self, immediately=False):
        self._stop_requested = 2 if immediately else max(self._stop_requested, 1)
        if self._stop_deadline is None:
            self._stop_deadline = time.monotonic() + self.grace
        os.write(self._wakeup_write, b"\0")

    def drain(self):
        """Stop after the current tasks: claim nothing more, finish what runs, then exit.

        An operator's request (the admin's "stop after current tasks"), so no grace deadline:
        a running task ends as it would have, its timeout still enforced. A signal afterwards
        starts the grace as it would on a running worker; a second one stops at once.
        """
        if self._stop_requested:
            return
        logger.info("worker stopping after its current tasks worker_id=%s", self.worker_id)
        self._stop_requested = 1
        os.write(self._wakeup_write, b"\0")

    def _install_signal_handlers(self):
        def handle(signum, frame):
            # A drain has no deadline yet: its first signal is a first stop, with the grace.
            immediately = self._stop_deadline is not None
            logger.info(
                "worker stopping on signal signal=%s action=%s grace=%s",
                signal.Signals(signum).name,
                "stop_now" if immediately else "finish_running",
                self.grace,
            )
            self.stop(immediately=immediately)

        signal.signal(signal.SIGTERM, handle)
        signal.signal(signal.SIGINT, handle)

    def _before_fork(self) -> list[int]:
        """Ready for a fork (see ``Claimer.before_fork``); the descriptors a child must close."""
        self.claimer.before_fork()
        inherited = [self._wakeup_read, self._wakeup_write]
        if self.listener.connected:
            inherited.append(self.listener.fileno())
        if self.session is not None and (lock_fd := self.session.fileno()) is not None:
            inherited.append(lock_fd)  # a child must not keep the lock's session open
        return inherited

    # The session proof (jobs.worker.session) ---------------------------------------------------

    def _start_session(self):
        why_not = session_proof.unavailable(self.listener)
        if why_not is not None:
            # Said plainly when asked for: this worker is rescued by its lease (or its pid).
            log = logger.warning if jobs_settings.SESSION_RESCUE else logger.info
            log("session rescue off worker_id=%s reason=%s", self.worker_id,
                why_not.replace(" ", "_"))  # fmt: skip
            return
        self.session = session_proof.SessionLock(
            self.worker_id,
            fence=lambda: self.pool.kill_all_now(StopReason.SESSION),
            wake=lambda: os.write(self._wakeup_write, b"\0"),
        )
        self.session.start()

    def _after_fence(self):
        """Record what the session's fence killed; stop a worker its peers judged dead."""
        session = self.session
        if session is None:
            return
        if session.take_fenced():
            self.pool.stop_tasks(StopReason.SESSION, None)
        if session.orphaned and self._stop_requested < 2:
            self.stop(immediately=True)

    def _dispatch(self):
        """Hand tasks to idle children, unless the session's proof is lost (see the module)."""
        session = self.session
        if session is None:
            self.pool.dispatch()
            return
        with session.guard:
            if session.held:
                self.pool.dispatch()

    # Database outages --------------------------------------------------------------------------
    # The worker keeps running through one: every write is retried, but none for longer than
    # the leases of its tasks are sure to hold, nor past a stop's grace period. Once a lease
    # may have lapsed, the task under it is stopped (``LeaseKeeper.stop_unleased``): another
    # worker may rescue it, and a task never runs twice at the same time.

    def _retry(self, operation, what: str, **options):
        """``retry_on_database_error`` as the worker's bookkeeping uses it (see above)."""
        options.setdefault("abandon", self._give_up_bookkeeping)
        if self._stop_requested and options.get("deadline_seconds") is None:
            options["deadline_seconds"] = 1.0  # stopping: the loop must keep reading children
        return retry_on_database_error(operation, what=what, model=Task, **options)

    def _give_up_bookkeeping(self) -> bool:
        """Whether a write the database refuses must be left undone, for now or for good."""
        if self._stop_requested > 1 or self.leases.may_lapse():
            return True
        return self._stop_deadline is not None and time.monotonic() >= self._stop_deadline

    def _grace_left(self):
        """Seconds a stopping worker may still spend on writes; None when it is not stopping."""
        if self._stop_deadline is None:
            return None
        return max(0.0, self._stop_deadline - time.monotonic())

    # Claims ------------------------------------------------------------------------------------

    def _recorded(self, successes, applied):
        self.pool.notices.recorded(successes, applied)  # the pool is made after the completer

    def _holding(self):
        return self.pool.in_hand()  # the pool is made after the claimer, which asks later

    def _claim(self):
        """Start a claim, in the claim thread, if tasks are wanted and none is under way.

        Reported successes are recorded with it (see ``jobs.worker.completer``). With nothing to
        claim, they are written once they have waited ``Completer.DELAY`` or are many.
        """
        if not self.claimer.can_start() or self.leases.may_lapse():
            return
        if self.session is not None and not self.session.held:
            return  # its tasks could not run: a peer may take them over
        wanted = self.claimer.how_many(self.pool.wanted)
        if wanted <= 0:
            if self.completer.due():
                self.completer.flush()
                self.pool.dispatch()  # the notices of what it wrote, to idle children
            return
        self.claimer.start(
            wanted,
            self.completer.take(),
            on_fault=self.leases.beat_soon,  # a claim may have committed unseen: check at once
            # Stopping, nothing more is claimed: the successes it records are written apart.
            abandon=lambda: self._stop_requested > 0 or self._give_up_bookkeeping(),
        )

    def _collect_claim(self, *, wait=False) -> list | None:
        """Take in the tasks of a finished claim (None if no claim finished)."""
        try:
            claimed = self.claimer.collect(wait=wait)
        except DatabaseError as exc:
            self.completer.claim_done(recorded=False)
            if not self._stop_requested:
                logger.warning("claim failed, database unreachable error=%r", first_line(exc))
            return None
        if claimed is not None:
            self.completer.claim_done(recorded=True, applied=self.claimer.recorded)
            self.pool.take(claimed)
        return claimed

    # Waiting -----------------------------------------------------------------------------------

    def _wait_timeout(self) -> float:
        now = time.monotonic()
        timeout = max(0.0, min(self.poll_interval, self._poll_at - now))
        if self._stop_deadline is not None:
            timeout = min(timeout, max(0.0, self._stop_deadline - now))
        deadline = self.pool.next_deadline()
        if deadline is not None:
            timeout = min(timeout, max(0.0, deadline - now))
        if not self._stop_requested:
            timeout = min(timeout, max(0.0, min(self.leases.next_at(), self.peers.next_at()) - now))
            # Held successes are written when a claim may start, with it or on their own
            # (``_claim``): waking for them while a claim runs, or pauses after a fault, only
            # spun the loop (measured: the supervisor busy the whole of every claim longer than
            # ``Completer.DELAY``, under load, taking the CPU the claim waited for).
            flush_at = self.completer.flush_at() if self.claimer.can_start() else None
            if flush_at is not None:
                timeout = min(timeout, max(0.0, flush_at - now))
            wake_at = self.claimer.wake_at()
            if wake_at is not None and wake_at - now < timeout:
                timeout = max(0.0, wake_at - now)
                self._poll_at = min(self._poll_at, wake_at)  # a delayed task's due time: a poll
        return timeout

    def _wait(self, timeout: float) -> bool:
        """Wait for children, notifications, or the timeout; whether there is news.

        News is what may make a claim worth trying again: a notification, a child that
        finished or exited, or the poll's timeout (``poll_interval`` after the last news, or a
        delayed task's due time; not another timer's). Not the wake-up pipe alone (a signal, or the
        claim thread saying it is done).
        """
        listen_fd = self.listener.fileno()  # (re)connecting sends the listen probe's NOTIFY
        forget_queries()  # once per round of the loop (see jobs.db), the probe's included
        events = self._selector(listen_fd).select(timeout)
        if any(key.data is None for key, _ in events):
            os.read(self._wakeup_read, 64)
        polled = not events and time.monotonic() >= self._poll_at - 0.001
        news = polled or any(key.data and key.data[0] == "child" for key, _ in events)
        if any(key.data == ("listen", None) for key, _ in events):
            queues = self.listener.drain()
            logger.debug("woken queues=%s", ",".join(sorted(queues)))
            herd = self.listener.wakes_all  # see Claimer.notified
            news = self.claimer.notified(self.poll_interval, herd=herd) or news
        self.pool.handle_ready(
            [key.data[1] for key, _ in events if key.data and key.data[0] == "child"]
        )
        if news:
            self._poll_at = time.monotonic() + self.poll_interval
        return news

    def _selector(self, listen_fd):
        """What ``_wait`` waits on, kept between calls: registering two descriptors per child
        at every call was most of the cost of a wait. Built again when the children (their
        ``ChildPool.wait_handles``) or the LISTEN connection change; it holds the objects it was
        built for, so that none is freed and another takes its place (and its descriptor
        numbers) unnoticed."""
        handles = self.pool.wait_handles()
        built_for = (self.listener.connection, handles)
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
            for fd, handle in handles:
                selector.register(fd, selectors.EVENT_READ, ("child", handle))
            self._selector_now, self._selector_built_for = selector, built_for
        return self._selector_now
