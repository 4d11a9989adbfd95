"""The worker's maintenance rounds: rescue, periodic tasks and pruning, every
``JOBS_MAINTENANCE_INTERVAL`` seconds (the duties themselves are in ``jobs.maintenance``).

Every worker runs them: each duty is safe to run from many workers at once. A round the
database refuses is skipped, not retried past the worker's own limits (``retry``).
"""

import logging
import time

from django.db import DatabaseError

from jobs.conf import jobs_settings
from jobs.db import first_line
from jobs.maintenance import rounds

logger = logging.getLogger(__name__)


class MaintenanceRunner:
    """Run a maintenance round when one is due."""

    def __init__(self, worker_id: str, *, retry, clock=time.monotonic):
        """Run rounds through ``retry(operation, what, **options)``, retried on database faults."""
        self.worker_id = worker_id
        self._retry, self._clock = retry, clock
        self._next_round = 0.0  # ``clock`` time the next round is due

    def run_if_due(self):
        """Run a round if the interval since the last one has passed."""
        if self._clock() < self._next_round:
            return
        self._next_round = self._clock() + jobs_settings.MAINTENANCE_INTERVAL
        try:
            self._retry(lambda: rounds.run(worker_id=self.worker_id), "maintenance")
        except DatabaseError as exc:
            logger.warning("maintenance skipped, database unreachable error=%r", first_line(exc))
        except Exception:
            logger.exception("maintenance failed worker_id=%s", self.worker_id)
