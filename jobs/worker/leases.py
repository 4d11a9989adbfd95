"""The lease keeper: this worker's row, the heartbeats that renew its leases, and the tasks it
stops when a lease may lapse.

A claim holds a task under a lease of ``JOBS_LEASE_SECONDS``. The heartbeat renews the lease of
every task the worker holds (running in a child, waiting for one, or finished with a success not
written yet) every third of a lease or half of ``JOBS_CANCEL_GRACE``, whichever is shorter
(``interval``; 5 s by default, so that a task ignoring its cancellation is stopped soon after
the grace); a worker that vanishes stops renewing, and once its leases
lapse any worker's maintenance round rescues the tasks. The heartbeat also hands back rows this
worker holds in the database but not in hand (a claim whose reply was lost), says the worker is
alive (its row in ``jobs.models.Worker``), stops tasks that ignored their cancellation, and
reads the operator's request to stop after the current tasks (the admin's workers page).

Through a database outage the worker keeps running, but a lease can only be renewed through the
database: once a quarter of a lease is left since the last renewal (``margin``), the tasks under
it are stopped (``stop_unleased``), so that no other worker, rescuing them after their lease
lapsed, can ever run one beside this one. They stay ``running`` in the database and are rescued,
an attempt counted, once it answers.
"""

import logging
import time
import uuid
from datetime import timedelta

from django.db import DatabaseError, router, transaction
from django.utils import timezone

from jobs import transitions
from jobs.conf import jobs_settings
from jobs.db import first_line
from jobs.maintenance import pausing
from jobs.models import Task
from jobs.models import Worker as WorkerRecord
from jobs.states import Status
from jobs.worker import liveness
from jobs.worker.child import StopReason

logger = logging.getLogger(__name__)


class LeaseKeeper:
    """Renew the leases of what a worker holds; stop its tasks when a lease may lapse."""

    def __init__(
        self,
        worker_id: str,
        queues,
        *,
        queue_caps=None,
        concurrency: int,
        lease_seconds: float,
        retry,
        holding,
        completing,
        running,
        busy,
        claim_busy,
        stop,
        cancel=None,
        drain=None,
        recording=list,
        clock=time.monotonic,
    ):
        """Keep the leases of one worker.

        ``retry(operation, what, **options)`` runs a write, retried on database faults.
        ``holding()`` lists the claimed tasks not reported on (``jobs.worker.wire.Claimed``),
        ``completing()`` the ids of tasks whose success is not written yet (``recording()``:
        those of them the claim in flight is writing, in its transaction), ``running()`` the
        claimed tasks running in a child now, ``busy()`` how many children run a task now (never
        more than ``concurrency``); ``claim_busy()`` says whether a claim is under
        way; ``stop(reason, task_ids)`` stops the tasks ``task_ids`` (None: every task held);
        ``cancel(task_ids)`` cancels those of them that can be cancelled at once (async tasks,
        whose coroutines are cancelled on their loop), as soon as a heartbeat sees the request;
        ``drain()`` stops the worker after its current tasks, when a heartbeat finds that an
        operator asked for it on the worker's row (``Worker.stop_requested_at``).
        """
        self.worker_id, self.queues = worker_id, queues
        self.queue_caps = dict(queue_caps or {})  # as the worker's row records them
        self.concurrency, self.lease_seconds = concurrency, lease_seconds
        self._retry, self._clock = retry, clock
        self._holding, self._completing, self._running = holding, completing, running
        self._recording = recording
        self._busy = busy
        self._claim_busy, self._stop, self._cancel = claim_busy, stop, cancel
        self._drain = drain
        self._next_heartbeat = 0.0  # ``clock`` time of the next heartbeat
        self._last_renewal = 0.0  # ``clock`` time the last heartbeat that renewed leases began
        self._database_down_since: float | None = None  # ``clock`` time of the fault, if any
        self._unleased: set[uuid.UUID] = set()  # tasks stopped: their lease may have lapsed
        self._paused: frozenset[str] = frozenset()  # queues of this worker paused, as logged
        self._paused_types: frozenset[str] = frozenset()  # task types paused, as logged
        self._children: list[list[int]] = []  # [pid, start time] of each child, as last noted
        self._children_written: list[list[int]] | None = None  # as the row has them
        self._children_retry = 0.0  # ``clock`` time before which a failed write is not retried

    # The worker's row --------------------------------------------------------------------------

    def register(self, *, abandon=None):
        """Add this worker's row, retried on database faults; its leases count from now."""
        self._retry(self._create_row, "register_worker", abandon=abandon)
        self._last_renewal = self._clock()

    def _create_row(self):
        hostname, pid, _ = self.worker_id.rsplit(":", 2)
        here = liveness.this_host()
        WorkerRecord.objects.create(
            id=self.worker_id,
            hostname=hostname,
            pid=int(pid),
            boot_id=here.boot_id if here else "",
            pid_namespace=here.pid_namespace if here else None,
            process_start=liveness.own_start_time(),
            queues=self.queues,
            queue_caps=self.queue_caps,
            concurrency=self.concurrency,
        )

    def note_children(self, pids):
        """Record the children's pids and start times on the row when they change: a peer of
        this host rescues this worker's tasks only once none of them lives (``liveness``).
        A write that fails is left to the next heartbeat, which writes them too."""
        if [pair[0] for pair in self._children] == list(pids):
            if self._children_written == self._children or self._clock() < self._children_retry:
                return
        else:
            self._children = [
                [pid, stat.start_time] for pid in pids if (stat := liveness.read_stat(pid))
            ]
        children = self._children
        try:
            self._retry(
                lambda: WorkerRecord.objects.filter(pk=self.worker_id).update(children=children),
                "note children",
                deadline_seconds=0.5,
                abandon=lambda: True,  # one try: the heartbeat writes them otherwise
            )
        except DatabaseError:
            self._children_retry = self._clock() + 1.0
            return
        self._children_written = children

    def unregister(self, *, deadline_seconds=None):
        """Mark this worker's row stopped, retried on database faults."""

        def mark_stopped():
            now = timezone.now()
            WorkerRecord.objects.filter(pk=self.worker_id).update(
                stopped_at=now,
                in_flight=0,
                busy_processes=0,
                running_tasks=0,
                last_heartbeat_at=now,
            )

        self._retry(mark_stopped, "unregister_worker", deadline_seconds=deadline_seconds)

    # Heartbeats --------------------------------------------------------------------------------

    def interval(self) -> float:
        return min(self.lease_seconds / 3, jobs_settings.CANCEL_GRACE / 2)

    def next_at(self) -> float:
        """When (``clock`` time) the next heartbeat is due."""
        return self._next_heartbeat

    def beat_soon(self):
        """Have the next round beat at once (a claim may have committed rows unseen)."""
        self._next_heartbeat = 0.0

    def heartbeat(self):
        """Say this worker is alive, renew its leases, and stop tasks cancelled long ago."""
        if self._clock() < self._next_heartbeat:
            return
        self._next_heartbeat = self._clock() + self.interval()

        def beat():
            now = timezone.now()
            # Only the leases of tasks this worker holds: a claim whose reply was lost to a
            # database fault leaves rows "running" here that it does not have; those are handed
            # back.
            running = [claimed.id for claimed in self._holding()]
            running += self._completing()
            mine = Task.objects.filter(worker_id=self.worker_id, status=Status.RUNNING)
            self._renew(mine, running, now)
            # While a claim is under way, rows it took are not in hand yet: not lost.
            # Nor are the tasks stopped as their leases lapsed: maintenance rescues those,
            # counting the attempt they made.
            lost_claims = mine.exclude(pk__in=running).exclude(pk__in=self._unleased)
            if not self._claim_busy():
                for lost in lost_claims:
                    if transitions.release(lost):
                        logger.warning("lost claim handed back task_id=%s", lost.pk)
            row = WorkerRecord.objects.filter(pk=self.worker_id)
            row.update(
                children=self._children,
                last_heartbeat_at=now,
                in_flight=len(running),
                busy_processes=self._busy(),
                running_tasks=len(self._running()),
            )
            overdue = now - timedelta(seconds=jobs_settings.CANCEL_GRACE)
            requested = mine.filter(pk__in=running, cancel_requested_at__isnull=False)
            cancels = {
                task_id: asked is not None and asked <= overdue  # never None: filtered above
                for task_id, asked in requested.values_list("pk", "cancel_requested_at")
            }
            # One indexed read by primary key per heartbeat: the operator's stop request.
            drain = row.filter(stop_requested_at__isnull=False).exists()
            return cancels, drain

        started = self._clock()
        try:
            cancel_requests, drain = self._retry(
                beat,
                "heartbeat",
                deadline_seconds=min(self.interval(), jobs_settings.DATABASE_RETRY_SECONDS),
            )
        except DatabaseError as exc:
            if self._database_down_since is None:
                self._database_down_since = started
                logger.error(
                    "database unreachable, the worker keeps running and retries "
                    "running_tasks_stopped_in=%.1fs worker_id=%s error=%r",
                    max(0.0, self._last_renewal + self.lease_seconds - self.margin()
                        - self._clock()),
                    self.worker_id, first_line(exc),
                )  # fmt: skip
            # Sooner than a round: the leases wait on it.
            self._next_heartbeat = self._clock() + min(1.0, self.interval())
            return
        except Exception:
            logger.exception("heartbeat failed worker_id=%s", self.worker_id)
            return
        self._last_renewal = started
        if self._database_down_since is not None:
            logger.warning(
                "database reachable again after %.1fs worker_id=%s",
                self._clock() - self._database_down_since, self.worker_id,
            )  # fmt: skip
            self._database_down_since = None
        if drain and self._drain is not None:
            self._drain()
        # The claim itself skips paused queues; this only tells the operator reading the log.
        self._paused = pausing.log_changes(self._paused, self.queues, worker_id=self.worker_id)
        self._paused_types = pausing.log_task_type_changes(
            self._paused_types, worker_id=self.worker_id
        )
        running = {claimed.id for claimed in self._running()}
        if self._cancel is not None:
            self._cancel({task_id for task_id in cancel_requests if task_id in running})
        # Past the grace: tasks that ignored it (a sync task between its checkpoints, a
        # coroutine that swallowed its cancellation).
        stopping = {task_id for task_id, overdue in cancel_requests.items() if overdue} & running
        for task_id in stopping:
            logger.warning("task ignored its cancellation, stopping it id=%s", task_id)
        if stopping:
            self._stop(StopReason.CANCEL, stopping)

    def _renew(self, mine, running: list, now):
        """Renew the leases of ``running``, this worker's rows ``mine``.

        The successes the claim in flight records (``recording``) are written in the claim's
        transaction, on the claim thread's connection, while this runs on the loop's: renewing
        them, the heartbeat waited for the claim's row locks, or the claim for the renewal's
        (both seen in ``benchmarks/fleet.py``). Their leases were renewed while they were held,
        so they are renewed again only once less than half a lease is left (a claim stuck that
        long), and then not the rows the claim's transaction holds (``SKIP LOCKED``): the claim
        either records them, or fails and hands them back to be held, and a fault makes the
        next heartbeat come at once (``beat_soon``). A rescue cannot take a row meanwhile: it
        waits for the same lock, then finds the success written, or the lease as it was.
        """
        lease = {"lease_expires_at": now + timedelta(seconds=self.lease_seconds)}
        recording = set(self._recording())
        mine.filter(pk__in=[task_id for task_id in running if task_id not in recording]).update(
            **lease
        )
        if not recording:
            return
        low = now + timedelta(seconds=self.lease_seconds / 2)
        with transaction.atomic(using=router.db_for_write(Task)):  # SKIP LOCKED locks
            free = mine.filter(pk__in=recording, lease_expires_at__lt=low)
            free = free.select_for_update(skip_locked=True).values("pk")
            Task.objects.filter(pk__in=free).update(**lease)

    # Database outages --------------------------------------------------------------------------

    def margin(self) -> float:
        """Seconds before a lease lapses at which its task is stopped, the database silent."""
        return self.lease_seconds / 4

    def may_lapse(self) -> bool:
        """Whether the leases may lapse before the next renewal: writes must give up, for now."""
        return self._clock() - self._last_renewal >= self.lease_seconds - self.margin()

    def stop_unleased(self):
        """Stop the tasks whose lease may have lapsed: their children killed, the rest forgotten.

        They stay ``running`` in the database, under a lapsed lease: maintenance rescues them
        (an attempt counted) once the database answers. Tasks claimed but not started are
        forgotten too; their lease lapses, or the heartbeat hands them back.
        """
        if not self.may_lapse() or not self._holding():
            return
        # A late heartbeat (a slow round, a loaded host) rather than a silent database: if it
        # answers now, renewing beats killing. One try: the retries give up at once by now.
        self._next_heartbeat = 0.0
        self.heartbeat()
        if not self.may_lapse():
            return
        running = self._running()
        self._unleased.update(claimed.id for claimed in running)
        for claimed in running:
            logger.error(
                # It runs again, rescued, once the database answers.
                "task stopped, its lease could not be renewed id=%s name=%s "
                "database_silent_for=%.1fs",
                claimed.id, claimed.name, self._clock() - self._last_renewal,
            )  # fmt: skip
        self._stop(StopReason.LEASE, None)
