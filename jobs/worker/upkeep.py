"""The supervisor's upkeep: its worker row, heartbeats that renew leases, maintenance rounds.

A mixin of ``jobs.worker.lifecycle.Worker``, apart so each module stays readable; only ``Worker``
uses it.
"""

import logging
import time
from datetime import timedelta

from django.db import DatabaseError
from django.utils import timezone

from jobs import transitions
from jobs.conf import jobs_settings
from jobs.db import first_line, retry_on_database_error
from jobs.maintenance import pausing
from jobs.maintenance import rescue as maintenance
from jobs.models import Task
from jobs.models import Worker as WorkerRecord
from jobs.states import Status

logger = logging.getLogger("jobs.worker")  # the same logger name as before the split


class Upkeep:
    """Expects the attributes ``Worker.__init__`` sets."""

    # Database outages --------------------------------------------------------------------------
    # The worker keeps running through one: every write is retried, but none for longer than
    # the leases of its tasks are sure to hold, nor past a stop's grace period. Once a lease
    # may have lapsed, the task under it is stopped (``_stop_unleased``): another worker may
    # rescue it, and a task never runs twice at the same time.

    def _retry(self, operation, what: str, **options):
        """``retry_on_database_error`` as the worker's bookkeeping uses it (see above)."""
        options.setdefault("abandon", self._give_up_bookkeeping)
        if self._stop_requested and options.get("deadline_seconds") is None:
            options["deadline_seconds"] = 1.0  # stopping: the loop must keep reading children
        return retry_on_database_error(operation, what=what, model=Task, **options)

    def _give_up_bookkeeping(self) -> bool:
        """Whether a write the database refuses must be left undone, for now or for good."""
        if self._stop_requested > 1 or self._leases_may_lapse():
            return True
        return bool(self._stop_requested) and time.monotonic() >= self._stop_deadline

    def _grace_left(self):
        """Seconds a stopping worker may still spend on writes; None when it is not stopping."""
        if not self._stop_requested:
            return None
        return max(0.0, self._stop_deadline - time.monotonic())

    def lease_margin(self) -> float:
        """Seconds before a lease lapses at which its task is stopped, the database silent."""
        return self.lease_seconds / 4

    def _leases_may_lapse(self) -> bool:
        return time.monotonic() - self._last_renewal >= self.lease_seconds - self.lease_margin()

    def _stop_unleased(self):
        """Stop the tasks whose lease may have lapsed: kill their children, forget the rest.

        They stay ``running`` in the database, under a lapsed lease: maintenance rescues them
        (an attempt counted) once the database answers. Tasks claimed but not started are
        forgotten too; their lease lapses, or the heartbeat hands them back.
        """
        if not self._leases_may_lapse() or not (self._busy() or self._ready):
            return
        # A late heartbeat (a slow round, a loaded host) rather than a silent database: if it
        # answers now, renewing beats killing. One try: the retries give up at once by now.
        self._next_heartbeat = 0.0
        self._heartbeat()
        if not self._leases_may_lapse():
            return
        busy = [child for child in self.children if child.busy]
        running = [child.batch[child.running()[0]] for child in busy if child.running()]
        self._unleased.update(claimed.id for claimed in running)
        for claimed in running:
            logger.error(
                # It runs again, rescued, once the database answers.
                "task stopped, its lease could not be renewed id=%s name=%s "
                "database_silent_for=%.1fs",
                claimed.id, claimed.name, time.monotonic() - self._last_renewal,
            )  # fmt: skip
        for child in busy:
            self._kill_and_replace(child, "lease")
        self._ready.clear()

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

    def _heartbeat_interval(self) -> float:
        return min(self.lease_seconds / 3, jobs_settings.CANCEL_GRACE / 2)

    def _heartbeat(self):
        """Say this worker is alive, renew its leases, and stop tasks cancelled long ago."""
        if time.monotonic() < self._next_heartbeat:
            return
        self._next_heartbeat = time.monotonic() + self._heartbeat_interval()

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
            # Nor are the tasks stopped as their leases lapsed: maintenance rescues those,
            # counting the attempt they made.
            lost_claims = mine.exclude(pk__in=running).exclude(pk__in=self._unleased)
            for lost in [] if self._claimer.busy else lost_claims:
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

        started = time.monotonic()
        try:
            ignoring_cancel = self._retry(
                beat,
                "heartbeat",
                deadline_seconds=min(
                    self._heartbeat_interval(), jobs_settings.DATABASE_RETRY_SECONDS
                ),
            )
        except DatabaseError as exc:
            if self._database_down_since is None:
                self._database_down_since = started
                logger.error(
                    "database unreachable, the worker keeps running and retries "
                    "running_tasks_stopped_in=%.1fs worker_id=%s error=%r",
                    max(0.0, self._last_renewal + self.lease_seconds - self.lease_margin()
                        - time.monotonic()),
                    self.worker_id, first_line(exc),
                )  # fmt: skip
            # Sooner than a round: the leases wait on it.
            self._next_heartbeat = time.monotonic() + min(1.0, self._heartbeat_interval())
            return
        except Exception:
            logger.exception("heartbeat failed worker_id=%s", self.worker_id)
            return
        self._last_renewal = started
        if self._database_down_since is not None:
            logger.warning(
                "database reachable again after %.1fs worker_id=%s",
                time.monotonic() - self._database_down_since, self.worker_id,
            )  # fmt: skip
            self._database_down_since = None
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
            self._retry(lambda: maintenance.run(worker_id=self.worker_id), "maintenance")
        except DatabaseError as exc:
            logger.warning("maintenance skipped, database unreachable error=%r", first_line(exc))
        except Exception:
            logger.exception("maintenance failed worker_id=%s", self.worker_id)
