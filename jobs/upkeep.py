"""The supervisor's upkeep: its worker row, heartbeats that renew leases, maintenance rounds.

A mixin of ``jobs.worker.Worker``, apart so each module stays readable; only ``Worker`` uses it.
"""

import logging
import time
from datetime import timedelta

from django.utils import timezone

from jobs import maintenance, pausing, transitions
from jobs.conf import jobs_settings
from jobs.db import retry_on_database_error
from jobs.models import Task
from jobs.models import Worker as WorkerRecord
from jobs.states import Status

logger = logging.getLogger("jobs.worker")  # the same logger name as before the split


class Upkeep:
    """Expects the attributes ``Worker.__init__`` sets."""

    def _register(self):
        hostname, pid, _ = self.worker_id.rsplit(":", 2)
        WorkerRecord.objects.create(
            id=self.worker_id,
            hostname=hostname,
            pid=int(pid),
            queues=self.queues,
            concurrency=self.concurrency,
        )

    def _unregister(self):
        now = timezone.now()
        WorkerRecord.objects.filter(pk=self.worker_id).update(
            stopped_at=now, in_flight=0, last_heartbeat_at=now
        )

    def _heartbeat(self):
        """Say this worker is alive, renew its leases, and stop tasks cancelled long ago."""
        if time.monotonic() < self._next_heartbeat:
            return
        self._next_heartbeat = time.monotonic() + min(
            self.lease_seconds / 3, jobs_settings.CANCEL_GRACE / 2
        )

        def beat():
            now = timezone.now()
            # Only the leases of tasks this worker holds: a claim whose reply was lost to a
            # database fault leaves rows "running" here that it does not have; those are handed
            # back.
            running = [claimed.id for claimed in self._in_hand()]
            running += [success.task_id for success in self._successes]
            running += [success.task_id for success in self._claimer.recording]
            mine = Task.objects.filter(worker_id=self.worker_id, status=Status.RUNNING)
            mine.filter(pk__in=running).update(
                lease_expires_at=now + timedelta(seconds=self.lease_seconds)
            )
            # While a claim is under way, rows it took are not in hand yet: not lost.
            for lost in [] if self._claimer.busy else mine.exclude(pk__in=running):
                if transitions.release(lost):
                    logger.warning("lost claim handed back task_id=%s", lost.pk)
            WorkerRecord.objects.filter(pk=self.worker_id).update(
                last_heartbeat_at=now, in_flight=len(running)
            )
            overdue = now - timedelta(seconds=jobs_settings.CANCEL_GRACE)
            return set(
                mine.filter(pk__in=running, cancel_requested_at__lte=overdue).values_list(
                    "pk", flat=True
                )
            )

        try:
            ignoring_cancel = retry_on_database_error(beat, what="heartbeat", model=Task)
        except Exception:
            logger.exception("heartbeat failed worker_id=%s", self.worker_id)
            return
        # The claim itself skips paused queues; this only tells the operator reading the log.
        self._paused = pausing.log_changes(self._paused, self.queues, worker_id=self.worker_id)
        for child in list(self.children):
            running = child.running()
            task_id = child.batch[running[0]].id if running else None
            if task_id in ignoring_cancel:
                logger.warning("task ignored its cancellation, stopping it id=%s", task_id)
                self._kill_and_replace(child, "cancel")

    def _maintain(self):
        if time.monotonic() < self._next_maintenance:
            return
        self._next_maintenance = time.monotonic() + jobs_settings.MAINTENANCE_INTERVAL
        try:
            retry_on_database_error(
                lambda: maintenance.run(worker_id=self.worker_id), what="maintenance", model=Task
            )
        except Exception:
            logger.exception("maintenance failed worker_id=%s", self.worker_id)
