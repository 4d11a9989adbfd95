"""The worker's maintenance rounds: rescue, periodic tasks and pruning, every
``JOBS_MAINTENANCE_INTERVAL`` seconds (the duties themselves are in ``jobs.maintenance``).

One worker of the fleet runs them, its leader: the holder of the ``MaintenanceLock`` named
``leader``, a lease of ``JOBS_LEADER_LEASE_SECONDS`` (4 maintenance intervals by default) that
the leader renews at each round. Every other worker tries to take it at each of its rounds and
skips the round while it cannot, so 16 workers cost the database one round per interval, not 16.
When the leader dies its lease lapses and the next worker whose round comes takes it over; a
leader that stops cleanly gives it back at once (``close``). Each duty stays safe to run from
many workers at once (see ``jobs.maintenance.rounds``): a leader stalled past its lease and its
successor overlapping for a round do no harm. The instant rescue of dead workers' tasks is not
a maintenance duty and runs on every worker.

A round the database refuses is skipped, not retried past the worker's own limits (``retry``).
"""

import logging
import time

from django.db import DatabaseError
from django.utils import timezone

from jobs.conf import jobs_settings
from jobs.db import first_line
from jobs.maintenance import locks, rounds

logger = logging.getLogger(__name__)

LEADER_LOCK = "leader"
# The default lease, in maintenance intervals: a leader may miss three rounds (a slow round, a
# database fault retried) before another worker takes over.
LEADER_LEASE_INTERVALS = 4


def leader_lease_seconds() -> float:
    """``JOBS_LEADER_LEASE_SECONDS``, or 4 maintenance intervals when it is None (jobs.E024)."""
    configured = jobs_settings.LEADER_LEASE_SECONDS
    if configured is None:
        return LEADER_LEASE_INTERVALS * jobs_settings.MAINTENANCE_INTERVAL
    return float(configured)


class MaintenanceRunner:
    """Run a maintenance round when one is due and this worker leads the fleet's maintenance."""

    def __init__(self, worker_id: str, *, retry, clock=time.monotonic):
        """Run rounds through ``retry(operation, what, **options)``, retried on database faults."""
        self.worker_id = worker_id
        self._retry, self._clock = retry, clock
        self._next_round = 0.0  # ``clock`` time the next round is due
        self.leading = False  # whether this worker held the leader's lease at its last round

    def run_if_due(self):
        """Run a round if the interval since the last one has passed and this worker leads."""
        if self._clock() < self._next_round:
            return
        self._next_round = self._clock() + jobs_settings.MAINTENANCE_INTERVAL
        try:
            if self._retry(self._lead, "maintenance leader"):
                self._retry(lambda: rounds.run(worker_id=self.worker_id), "maintenance")
        except DatabaseError as exc:
            logger.warning("maintenance skipped, database unreachable error=%r", first_line(exc))
        except Exception:
            logger.exception("maintenance failed worker_id=%s", self.worker_id)

    def _lead(self) -> bool:
        """Renew or take the leader's lease; log when this worker starts or stops leading."""
        leading = locks.hold_lock(
            LEADER_LOCK, self.worker_id, now=timezone.now(), hold_seconds=leader_lease_seconds()
        )
        if leading != self.leading:
            logger.info(
                "maintenance %s worker_id=%s",
                "leader now" if leading else "leader elsewhere",
                self.worker_id,
            )
        self.leading = leading
        return leading

    def close(self):
        """Give the leader's lease back, so that another worker takes over at its next round."""
        if not self.leading:
            return
        try:
            locks.release_lock(LEADER_LOCK, self.worker_id)
        except DatabaseError as exc:
            logger.warning("maintenance leader not released error=%r", first_line(exc))
        self.leading = False
