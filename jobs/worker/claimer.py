"""A worker's claims, run in a thread of their own so that the worker's loop never waits on them
(on PostgreSQL; on SQLite they run inline, see ``Claimer.inline``).

A claim is a round trip to the database and a commit: milliseconds, during which children that
finish would otherwise wait for their next task. With the claim in this thread, the loop keeps
handing out tasks claimed earlier, and the claim's reply wakes the loop through its wake-up
pipe. One claim at a time; the thread has a database connection of its own.

Children are forked by the supervisor's main thread. Before a fork the thread's connection is
closed (``before_fork``): a forked child drops the other threads' state, and a connection object
freed in the child would tell the server to end the session the supervisor still uses.

It also decides when a claim is worth starting (how many tasks to ask for is the pool's
business, ``jobs.worker.pool.ChildPool.wanted``): not while one runs, not for a second after a
claim the database refused, and, after a claim that found fewer due tasks than it asked for,
not until there is news (a notification, a finished child, a poll); and when the next delayed
task is due, so that the worker wakes for it.
"""

import logging
import os
import random
import time
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime

from django.db import DatabaseError, connections, router
from django.utils import timezone

from jobs import sql
from jobs.db import forget_queries
from jobs.models import Task
from jobs.worker import claiming
from jobs.worker.queue_caps import QueueCaps
from jobs.worker.wire import Claimed

logger = logging.getLogger(__name__)


class Claimer:
    """Claim tasks for one worker, one claim at a time, and say when a claim is worth starting."""

    PAUSE_AFTER_FAULT = 1.0  # seconds between claims while the database does not answer
    # A worker whose claim on a notification found nothing lets the next notifications pass
    # for this long, doubled at each such empty claim up to ``deaf_cap`` (see ``notified``).
    DEAF_FIRST = 0.05
    # The longest such pause: a quarter of the poll interval, and never over a second. Capped
    # at the poll interval alone, a burst enqueued while most of an idle fleet sat out waited
    # for them a whole interval (30 s with --poll-interval 30) on the few that answered.
    DEAF_MAX = 1.0

    def __init__(self, worker_id: str, queues, lease_seconds: float, wakeup_fd: int, *,
                 retry, caps: QueueCaps | None = None, holding=list,
                 may_prepare=lambda: False):  # fmt: skip
        """Claim for ``worker_id``, waking its loop through ``wakeup_fd`` once a claim is done.

        ``retry(operation, what, **options)`` runs the claims and the reads (``next_due_at``),
        retried on database faults within the worker's limits (the claim thread calls it too).
        ``caps``: the per-queue caps, given each claim their rooms from ``holding()`` (the
        claimed tasks the worker holds), read in the loop's thread as the claim starts.
        ``may_prepare()``: whether the claim may be a prepared statement (the task database's
        connections keep their session, ``jobs.worker.notify.Listener.keeps_sessions``), asked
        in the loop's thread as each claim starts.
        """
        self.worker_id, self.queues, self.lease_seconds = worker_id, queues, lease_seconds
        self.caps = caps or QueueCaps({})
        self._holding = holding
        self._may_prepare = may_prepare
        self._wakeup_fd = wakeup_fd
        self._retry = retry
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jobs-claim")
        self._future: Future[tuple[list[Claimed], set]] | None = None
        self._used = False  # the thread exists once a claim ran
        self.recorded: set = set()  # the ids of the successes the last claim collected recorded
        # SQLite has one writer at a time and no network to wait for: a claim in a thread of
        # its own would only contend for the lock with the loop's other writes (measured: the
        # drain 1,600 -> 1,300 tasks/s, and a second connection's cache). It runs inline there.
        self.inline = sql.dialect(router.db_for_write(Task)).ONE_WRITER
        self._wanted = 0  # how many tasks the claim in flight asked for
        self.seconds = 0.0  # how long recent claims took (a moving average)
        # False after a claim found fewer due tasks than it asked for, until there is news.
        self.may_find_more = True
        self._news = 0  # news counted (see ``news``), and as the claim in flight started:
        self._news_at_start = 0
        self.started_at: datetime | None = None  # when the last claim started (database time)
        self._not_before = 0.0  # monotonic time before which no claim starts (after a fault)
        self._next_due: float | None = None  # monotonic time the earliest delayed task becomes due
        self._heard = 0  # notifications heard, answered or not (see ``plan_wake``)
        self._planned_for: tuple | None = None  # (news, heard, started_at) as it was last read
        self._planned: float | None = None  # what was read then
        self._deaf_until = 0.0  # monotonic time before which notifications are let pass
        self._deaf_seconds = 0.0  # the last such pause (halved by each claim that takes tasks)
        self._notified = False  # a notification came since the last claim started
        self._claim_on_notification = False  # the claim in flight started after one
        self._poll_interval = 1.0  # as the worker last said (``notified``): caps the pause

    @property
    def busy(self) -> bool:
        return self._future is not None

    def news(self):
        """Note news that may make a claim worth trying again (a notification, a child that
        finished or exited, a poll)."""
        self.may_find_more = True
        self._news += 1

    def notified(self, poll_interval: float, *, herd: bool = True) -> bool:
        """Note a notification (tasks enqueued somewhere); whether it is news worth a claim.

        One NOTIFY reaches every idle worker of the fleet, and all of them would claim at once
        for what is often one task: N-1 empty claims. A worker whose claim after a
        notification found nothing sits the next ones out for a while (50 ms, doubling at
        each such empty claim up to ``deaf_cap``: a quarter of ``poll_interval``, at most 1 s;
        halved at each claim that takes tasks, jittered so the fleet's pauses spread out); the
        workers that did get tasks, and those whose pause ended, answer the next. Its poll and
        its children's news still wake it meanwhile; a burst that the answering workers cannot
        take alone waits at most one pause for the others.
        A broker's message wakes one worker (``herd=False``): there is no herd to thin, and
        every one is answered.
        """
        self._heard += 1
        if not herd:
            self.news()
            return True
        if time.monotonic() < self._deaf_until:
            return False
        self.news()
        self._notified, self._poll_interval = True, poll_interval
        return True

    @classmethod
    def deaf_cap(cls, poll_interval: float) -> float:
        """The longest pause after empty notified claims, for a worker polling so often."""
        return min(cls.DEAF_MAX, poll_interval / 4)

    def can_start(self) -> bool:
        """Whether a claim may start now: none is under way, and none failed a moment ago."""
        return self._future is None and time.monotonic() >= self._not_before

    def how_many(self, wanted) -> int:
        """How many tasks to claim now: ``wanted(seconds)``, given how long recent claims took
        (the pool's answer, ``jobs.worker.pool.ChildPool.wanted``); none after a claim that
        found fewer due tasks than it asked for, until there is news."""
        return wanted(self.seconds) if self.may_find_more else 0

    def start(self, wanted: int, successes: list, on_fault=None, abandon=None):
        """Claim ``wanted`` tasks and record ``successes`` with them, in the thread."""
        assert self._future is None, "one claim at a time"
        self._used = True
        self._wanted = wanted
        self._news_at_start, self.started_at = self._news, timezone.now()
        self._claim_on_notification, self._notified = self._notified, False
        groups = self.caps.groups(self.queues, self._holding()) if self.caps else None
        prepare = self._may_prepare()

        def round_trip():
            forget_queries()  # the claim thread's own connection logs too (see jobs.db)
            started = time.monotonic()
            try:
                return self._retry(
                    lambda: claiming.claim_and_record(
                        self.worker_id, wanted, successes, queues=self.queues,
                        groups=groups, lease_seconds=self.lease_seconds, prepare=prepare,
                    ),
                    "claim", on_fault=on_fault, abandon=abandon,
                )  # fmt: skip
            finally:
                self.seconds = 0.8 * self.seconds + 0.2 * (time.monotonic() - started)

        if self.inline:
            self._future = Future()
            try:
                self._future.set_result(round_trip())
            except Exception as exc:
                self._future.set_exception(exc)
        else:
            self._future = self._executor.submit(round_trip)
        # Wake the loop once the outcome is set, not before: a loop woken by the function's own
        # last line would find the claim not done yet, and sleep a whole poll interval.
        self._future.add_done_callback(lambda _: os.write(self._wakeup_fd, b"\0"))

    def collect(self, *, wait: bool = False) -> list | None:
        """The tasks the claim took once it is done (None while it runs, or if none ran).

        Raises what the claim raised (a database fault that outlasted the retries); the
        successes given to ``start`` are then not recorded, and no claim starts for
        ``PAUSE_AFTER_FAULT`` seconds.
        """
        if self._future is None or not (wait or self._future.done()):
            return None
        future, self._future = self._future, None
        try:
            claimed, self.recorded = future.result()
        except DatabaseError:
            self._not_before = time.monotonic() + self.PAUSE_AFTER_FAULT
            raise
        logger.debug("claimed count=%d wanted=%d", len(claimed), self._wanted)
        self.caps.note(claimed)
        if claimed:
            # Halved, not forgotten: a worker that wins one task in ten still sits most out.
            self._deaf_seconds /= 2
        elif self._claim_on_notification:
            doubled = max(self.DEAF_FIRST, 2 * self._deaf_seconds)
            self._deaf_seconds = min(self.deaf_cap(self._poll_interval), doubled)
            self._deaf_until = time.monotonic() + self._deaf_seconds * random.uniform(0.5, 1.0)
        if len(claimed) < self._wanted:
            # Nothing more was due: look again on news, or at once if news came in while the
            # claim ran (a task enqueued after its snapshot).
            self.may_find_more = self._news != self._news_at_start
        return claimed

    def plan_wake(self, *, idle: bool):
        """Note when the next delayed task is due if the worker is ``idle`` (no child busy,
        nothing waiting) and no claim runs; else forget it (see ``wake_at``).

        Read again only when it may have changed: after news, a notification (heard even while
        they are let pass: it may announce a delayed task), or a claim. At every round of the
        loop, its two queries were half an idle worker's CPU (its heartbeat's and its looks at
        the peers' rounds included: measured with py-spy).
        """
        if not idle or self.busy:
            self._next_due = None
            return
        key = (self._news, self._heard, self.started_at)
        if key != self._planned_for:
            self._planned_for, self._planned = key, self.next_due_at()
        self._next_due = self._planned

    def wake_at(self) -> float | None:
        """When (monotonic) the worker must wake for the next delayed task; None: no need."""
        return self._next_due

    def next_due_at(self) -> float | None:
        """Monotonic time at which the earliest delayed task is due, so it starts on time."""
        try:
            due_at = self._retry(lambda: claiming.next_due_at(queues=self.queues), "next_due")
            # A full rate window holding back due tasks: wake as it ends, not at the next poll.
            opens_at = self._retry(self._next_window_at, "next_window")
        except DatabaseError:
            return None  # the poll interval decides; the heartbeat tells of the outage
        if opens_at is not None and (due_at is None or opens_at < due_at):
            return time.monotonic() + max(0.0, (opens_at - timezone.now()).total_seconds())
        seconds = (due_at - timezone.now()).total_seconds() if due_at else 0
        if due_at and self.started_at and due_at > self.started_at:
            return time.monotonic() + max(0.0, seconds)  # due after the last claim looked
        # Due already but not claimed (taken by another worker, or its queue is paused): the
        # poll interval decides, rather than spinning.
        return time.monotonic() + seconds if seconds > 0 else None

    def _next_window_at(self):
        # Windows ending after the last claim started, not after now: one that ended in between
        # was full when the claim looked, and its tasks are for the next claim, at once.
        since = self.started_at or timezone.now()
        return claiming.next_window_at(queues=self.queues, now=since)

    def rate_held(self) -> bool:
        """Whether a due task waited for its rate window when the last claim looked (a burst
        worker waits for it)."""
        try:
            return self._retry(self._next_window_at, "next_window") is not None
        except DatabaseError:
            return False

    def before_fork(self):
        """Let the claim in flight finish, and close the thread's connection (see above)."""
        if not self._used or self.inline:
            return
        if self._future is not None:
            self._future.exception()  # wait; the loop collects the outcome
        self._executor.submit(connections.close_all).result()

    def close(self):
        if self._used and not self.inline:
            self._executor.submit(connections.close_all).result()
        self._executor.shutdown(wait=True)
