"""The completer: successes that children report, held until they are written (at least once).

A child records a failure, retry or cancellation itself; a plain success it reports to the
supervisor with its result, and the supervisor writes many at once (a success a receiver of
``task_succeeded``/``task_finished``, or of Django Tasks' ``task_finished``, waits for is the
exception: the child records it, with the others of its batch in one statement, so that
receivers run there). The path that keeps "at least once" true, step by step; this module
holds the successes, the worker's loop (``jobs.worker.lifecycle.Worker``) says when to write:

1. ``add``: a child reported a success. In the database the task is still ``running``, under
   this worker's lease.
2. ``task_ids``: while held, its lease is renewed like that of a task still running (the
   heartbeat asks for these ids, ``jobs.worker.leases``), so no other worker rescues it.
3. Written with the next claim: when the loop starts one (``Worker._claim``), ``take`` hands
   the held successes to it (``jobs.worker.claimer``), and the claim records them first
   (``jobs.worker.claiming.claim_and_record``: ``transitions.succeed_many``, then the claim,
   two statements in one transaction: one commit for both, all or nothing). Once the loop
   collects the claim (``Worker._collect_claim``), ``claim_done`` forgets them, or, if the claim
   failed, holds them again, first in line. With no claim to start, the loop calls ``flush``,
   which writes them on their own (``jobs.transitions.succeed_many``, guarded like every
   outcome by task, attempt, worker and status ``running``) once the oldest has waited
   ``DELAY`` or ``BATCH`` are held (``due``; ``flush_at`` tells the worker's wait when, if a
   claim may start: while one runs, or pauses after a fault, they wait for the next).
4. Not written, the database unreachable: still held, renewed, and written at a later round.
   If the worker exits or dies first, the tasks stay ``running`` under their lease, which
   lapses; maintenance rescues them and they run again. Never lost, at least once; effects that
   must not repeat go through ``jobs.execution.effects.once``.

Modelled on River's ``JobCompleter``: one owner for outcomes the supervisor records.
"""

import logging
import time

from django.db import DatabaseError

from jobs import transitions
from jobs.db import first_line

logger = logging.getLogger(__name__)


class Completer:
    """Hold reported successes until they are written; see the module's docstring."""

    # Seconds a reported success may wait to be written with the next claim, and how many may.
    DELAY = 0.05
    BATCH = 1000

    def __init__(self, *, retry, clock=time.monotonic, on_recorded=None):
        """Write through ``retry(operation, what, **options)``, retried on database faults;
        ``on_recorded(successes, applied)`` is told of each write, with the ids it applied to
        (a child waits for the word on some: ``jobs.worker.notices``)."""
        self._retry = retry
        self._on_recorded = on_recorded
        self._clock = clock
        self._held: list[transitions.Success] = []  # reported, not handed to a claim yet
        self._held_since = 0.0  # when the oldest of them was reported (``clock`` time)
        self._with_claim: list[transitions.Success] = []  # handed to the claim in flight

    def add(self, success: transitions.Success):
        """Hold a success a child reported, until it is written."""
        if not self._held:
            self._held_since = self._clock()
        self._held.append(success)

    def task_ids(self) -> list:
        """The tasks whose success is not written yet: their leases must be renewed."""
        return [s.task_id for s in self._held] + [s.task_id for s in self._with_claim]

    def recording(self) -> list:
        """The tasks of ``task_ids`` whose success the claim in flight is recording: its
        transaction may hold their rows (the heartbeat renews them only if their lease runs
        low, and skips the rows it holds: ``jobs.worker.leases``)."""
        return [s.task_id for s in self._with_claim]

    # With the next claim -----------------------------------------------------------------------

    def take(self) -> list[transitions.Success]:
        """Hand the held successes to a claim, which records them in its transaction."""
        assert not self._with_claim, "one claim at a time"
        self._with_claim, self._held = self._held, []
        return self._with_claim

    def claim_done(self, *, recorded: bool, applied=None):
        """Forget the successes the claim recorded (``applied``: the ids it applied to); or hold
        them again if it failed."""
        written, self._with_claim = self._with_claim, []
        if not recorded:
            self._held = written + self._held  # not recorded: they stay to do
        elif written and self._on_recorded is not None:
            self._on_recorded(written, applied if applied is not None else set())

    # On their own ------------------------------------------------------------------------------

    def due(self) -> bool:
        """Whether the held successes should be written now, with no claim to carry them."""
        if not self._held:
            return False
        overdue = self._clock() - self._held_since >= self.DELAY
        return overdue or len(self._held) >= self.BATCH

    def flush_at(self) -> float | None:
        """When (``clock`` time) the held successes are due by age; None when none is held."""
        return self._held_since + self.DELAY if self._held else None

    def flush(self, deadline_seconds=None):
        """Write the held successes in one statement; on a database outage, keep holding them.

        Until it is written, such a task stays ``running`` under this worker's lease (renewed by
        the heartbeat); if this worker dies first, the lease lapses and the task runs again.
        """
        if not self._held:
            return
        successes = self._held
        try:
            applied = self._retry(
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
        self._held = []
        if self._on_recorded is not None:
            self._on_recorded(successes, applied if isinstance(applied, set) else set())
