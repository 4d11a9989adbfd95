"""The worker loop: when to claim, how many, and what to do on signals.

A worker claims as many due tasks as it has free slots, in one statement, and runs each on a
thread of its pool; the executor runs and records each one.
"""

import logging
import os
import signal
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from django.utils import timezone
from django.utils.module_loading import autodiscover_modules

from jobs import claiming, executor, maintenance, pausing
from jobs.conf import jobs_settings
from jobs.db import retry_on_database_error
from jobs.models import Task
from jobs.models import Worker as WorkerRecord
from jobs.states import Status

logger = logging.getLogger(__name__)


def make_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Worker:
    def __init__(
        self,
        *,
        queues=None,
        concurrency: int | None = None,
        burst: bool = False,
        poll_interval: float | None = None,
        lease_seconds: float | None = None,
    ):
        self.queues = sorted(set(queues or ()))
        self.concurrency = concurrency or jobs_settings.CONCURRENCY
        self.burst = burst
        self.poll_interval = poll_interval or jobs_settings.POLL_INTERVAL
        self.lease_seconds = lease_seconds or jobs_settings.LEASE_SECONDS
        self.worker_id = make_worker_id()
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._in_flight = set()
        self._lock = threading.Lock()
        self._next_maintenance = 0.0
        self._next_heartbeat = 0.0
        self._paused = frozenset()

    # Lifecycle ---------------------------------------------------------------------------------

    def run(self) -> int:
        """Serve until stopped (or, with ``burst``, until nothing is due); return an exit code."""
        autodiscover_modules("tasks")
        self._install_signal_handlers()
        retry_on_database_error(self._register, what="register worker", model=Task)
        logger.info(
            "worker started worker_id=%s queues=%s concurrency=%d burst=%s",
            self.worker_id,
            ",".join(self.queues) or "*",
            self.concurrency,
            self.burst,
        )
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="jobs-task") as pool:
            while not self._stopping.is_set():
                # Cleared before claiming, so a task finishing from here on wakes the wait below.
                self._wake.clear()
                self._heartbeat()
                self._maintain()
                self._paused = pausing.log_changes(
                    self._paused, self.queues, worker_id=self.worker_id
                )
                claimed = self._claim()
                for task in claimed:
                    self._start(pool, task)
                if self.burst and not claimed and not self._in_flight_count():
                    break
                self._wake.wait(self.poll_interval)
            logger.info(
                "worker stopping worker_id=%s in_flight=%d", self.worker_id, self._in_flight_count()
            )
        retry_on_database_error(self._unregister, what="unregister worker", model=Task)
        logger.info("worker stopped worker_id=%s", self.worker_id)
        return 0

    def stop(self):
        self._stopping.set()
        self._wake.set()

    def _install_signal_handlers(self):
        if threading.current_thread() is not threading.main_thread():
            return

        def handle(signum, frame):
            logger.info(
                "worker got signal=%s, finishing running tasks", signal.Signals(signum).name
            )
            self.stop()

        signal.signal(signal.SIGTERM, handle)
        signal.signal(signal.SIGINT, handle)

    # Claiming and running ----------------------------------------------------------------------

    def _free_slots(self) -> int:
        return self.concurrency - self._in_flight_count()

    def _in_flight_count(self) -> int:
        with self._lock:
            return len(self._in_flight)

    def _claim(self) -> list:
        free = self._free_slots()
        if free <= 0:
            return []
        return retry_on_database_error(
            lambda: claiming.claim(
                self.worker_id, free, queues=self.queues, lease_seconds=self.lease_seconds
            ),
            what="claim",
            model=Task,
        )

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
        WorkerRecord.objects.filter(pk=self.worker_id).update(
            stopped_at=timezone.now(), in_flight=0, last_heartbeat_at=timezone.now()
        )

    def _heartbeat(self):
        """Say this worker is alive and renew the leases of the tasks it is running."""
        if time.monotonic() < self._next_heartbeat:
            return
        self._next_heartbeat = time.monotonic() + self.lease_seconds / 3

        def beat():
            now = timezone.now()
            Task.objects.filter(worker_id=self.worker_id, status=Status.RUNNING).update(
                lease_expires_at=now + timedelta(seconds=self.lease_seconds)
            )
            WorkerRecord.objects.filter(pk=self.worker_id).update(
                last_heartbeat_at=now, in_flight=self._in_flight_count()
            )

        try:
            retry_on_database_error(beat, what="heartbeat", model=Task)
        except Exception:
            logger.exception("heartbeat failed worker_id=%s", self.worker_id)

    def _maintain(self):
        if time.monotonic() < self._next_maintenance:
            return
        self._next_maintenance = time.monotonic() + jobs_settings.MAINTENANCE_INTERVAL
        try:
            retry_on_database_error(maintenance.run, what="maintenance", model=Task)
        except Exception:
            logger.exception("maintenance failed worker_id=%s", self.worker_id)

    def _start(self, pool, task: Task):
        with self._lock:
            self._in_flight.add(task.pk)
        pool.submit(self._run_one, task)

    def _run_one(self, task: Task):
        try:
            executor.run(task)
        except Exception:
            # The outcome could not be recorded even after retries; the lease brings it back.
            logger.exception("task outcome not recorded task_id=%s", task.pk)
        finally:
            with self._lock:
                self._in_flight.discard(task.pk)
            self._wake.set()
