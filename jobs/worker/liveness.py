"""Proof that another worker is dead: its pid on this host, its database session on any
(issue 16, instant rescue).

A lapsed lease proves death only after LEASE_SECONDS. On the same host a pid says more, and
sooner: a pid that is gone, a zombie, or reused by another process (its start time differs
from the one the worker recorded) belongs to a dead worker. A pid is only judged when the
boot id and the pid namespace match ours, since a pid means nothing across boots or
namespaces, and only once the children recorded on its row (``Worker.children``) are gone
too, so that a supervisor killed alone is rescued after its children, never beside them. Each
reading is confirmed by a second one, DEATH_CONFIRM_SECONDS later (``Suspects``: kept until
the watch's next look, never slept for), so a /proc read racing a fork or an exec never
rescues a live worker's tasks.

On any host, where the worker holds a session lock (``jobs.worker.session``), its key free in
``pg_locks`` at two looks FREE_CONFIRM_SECONDS apart, with the same key and heartbeat on its
row, proves its session gone; ``jobs.transitions.rescue_dead`` checks both again under the
row's lock.

Every worker watches the others (``PeerWatch``, from its main loop every ``CHECK_INTERVAL``,
or ``SESSION_CHECK_INTERVAL`` when it watches sessions): a /proc read for each live worker of
its boot and pid namespace (their rows read every PEERS_REFRESH_SECONDS, and at each look while
one is suspected), one query for the keys of the others, and
``rescue_dead`` for those confirmed dead, so the tasks of a SIGKILLed worker run again within
about a second (same host) or two (another) instead of after their lease.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from django.db import DatabaseError, connections, router

from jobs import sql, transitions
from jobs.conf import jobs_settings
from jobs.db import first_line
from jobs.models import Worker as WorkerRecord
from jobs.worker.session import FREE_CONFIRM_SECONDS

logger = logging.getLogger(__name__)

PROC = Path("/proc")
CHECK_INTERVAL = 0.5  # seconds between two looks at the other workers of this host
# Watching sessions too, more often: a key is confirmed free FREE_CONFIRM_SECONDS after it was
# first seen free, and the first sighting must come soon for a rescue within 2 s.
SESSION_CHECK_INTERVAL = 0.25
DEATH_CONFIRM_SECONDS = 0.4
# How long the list of this host's live workers is trusted between two reads of it, while none
# of them looks dead: each look reads /proc, the database only this often (and at every look
# while one is suspected, so that a death is confirmed on a fresh row).
PEERS_REFRESH_SECONDS = 5.0
# /proc/PID/stat field 22 (starttime, clock ticks since boot); field 3 is the state.
STARTTIME_FIELD = 22
STATE_FIELD = 3
FIRST_FIELD_AFTER_COMM = 3


@dataclass(frozen=True)
class HostIdentity:
    """What must match before a pid recorded by another worker can be judged here."""

    boot_id: str
    pid_namespace: int


def read_boot_id(proc: Path = PROC) -> str | None:
    try:
        text = (proc / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
    return text or None


def read_pid_namespace(proc: Path = PROC) -> int | None:
    try:
        return os.stat(proc / "self/ns/pid").st_ino
    except OSError:
        return None


def this_host(proc: Path = PROC) -> HostIdentity | None:
    """Our identity, or None where /proc does not tell (not Linux, or a hardened mount)."""
    boot_id = read_boot_id(proc)
    namespace = read_pid_namespace(proc)
    if boot_id is None or namespace is None:
        return None
    return HostIdentity(boot_id=boot_id, pid_namespace=namespace)


@dataclass(frozen=True)
class ProcStat:
    state: str
    start_time: int


def parse_stat(text: str) -> ProcStat | None:
    """Parse /proc/PID/stat; None when it is not what the kernel writes.

    The command name (field 2) is in parentheses and may itself hold spaces and ')', so the
    fields are split after the last ')'.
    """
    close = text.rfind(")")
    if close < 0:
        return None
    fields = text[close + 1 :].split()
    state_index = STATE_FIELD - FIRST_FIELD_AFTER_COMM
    start_index = STARTTIME_FIELD - FIRST_FIELD_AFTER_COMM
    if len(fields) <= start_index:
        return None
    state = fields[state_index]
    start = fields[start_index]
    if len(state) != 1 or not start.isdigit():
        return None
    return ProcStat(state=state, start_time=int(start))


def read_stat(pid: int, proc: Path = PROC) -> ProcStat | None:
    try:
        return parse_stat((proc / str(pid) / "stat").read_text())
    except (OSError, UnicodeDecodeError):
        return None


def own_start_time(proc: Path = PROC) -> int | None:
    """Our start time, to store on the Worker row (Worker.process_start)."""
    stat = read_stat(os.getpid(), proc)
    return stat.start_time if stat else None


def looks_dead(pid: object, start_time: object, proc: Path = PROC) -> bool:
    """One reading: the pid is gone, a zombie (or dead), or now another process.

    Values that are not a real pid or start time (0, negative, not an int) prove nothing,
    so they answer False: a worker is never rescued on a bad row.
    """
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    if not isinstance(start_time, int) or isinstance(start_time, bool) or start_time <= 0:
        return False
    if not (proc / str(pid)).exists():
        return True
    stat = read_stat(pid, proc)
    if stat is None:
        # The directory exists but stat is unreadable: we cannot tell; say alive.
        return not (proc / str(pid)).exists()
    return stat.state in ("Z", "X", "x") or stat.start_time != start_time


def may_judge(boot_id: object, pid_namespace: object, here: HostIdentity | None) -> bool:
    """Only a worker of our boot and our pid namespace can be judged by its pid."""
    return (
        here is not None
        and isinstance(boot_id, str)
        and boot_id == here.boot_id
        and isinstance(pid_namespace, int)
        and pid_namespace == here.pid_namespace
    )


def children_dead(children: object, proc: Path = PROC) -> bool:
    """Whether every child recorded on a Worker row (``[[pid, start time], ...]``) looks dead.

    A supervisor killed alone leaves its children for the moment it takes them to see it go
    (``jobs.worker.child``): its tasks are rescued only once they are gone too. A value that is
    not such a list proves nothing: the worker is then not judged by its pid.
    """
    if not isinstance(children, list):
        return False
    for entry in children:
        if not (isinstance(entry, list) and len(entry) == 2):
            return False
        if not looks_dead(entry[0], entry[1], proc):
            return False
    return True


class Suspects:
    """Workers that looked dead at one reading, until a second one, ``confirm_seconds`` later
    and with the same evidence, confirms it; checked at the watch's next look, never waited for."""

    def __init__(self, confirm_seconds: float):
        self.confirm_seconds = confirm_seconds
        self._first: dict[str, tuple[float, object]] = {}  # id -> (first seen dead, evidence)

    def see(self, worker_id: str, evidence: object, dead: bool, now: float) -> bool:
        """Note one reading; whether it confirms the death (same evidence, long enough ago)."""
        if not dead:
            self._first.pop(worker_id, None)
            return False
        first = self._first.get(worker_id)
        if first is None or first[1] != evidence:
            self._first[worker_id] = (now, evidence)
            return False
        return now >= first[0] + self.confirm_seconds  # as next_at reckons it

    def __bool__(self) -> bool:
        """Whether any worker is suspected now."""
        return bool(self._first)

    def keep_only(self, worker_ids):
        """Forget the workers no longer listed (stopped, rescued, removed)."""
        for worker_id in set(self._first) - set(worker_ids):
            del self._first[worker_id]

    def next_at(self) -> float:
        """When (``clock`` time) the first suspicion can be confirmed; never, with none."""
        return min((at + self.confirm_seconds for at, _ in self._first.values()), default=INF)


INF = float("inf")


class PeerWatch:
    """Rescue the tasks of dead workers: of this host by their pids, of any host by their
    database session (``jobs.worker.session``) where ``sessions`` is on."""

    def __init__(self, worker_id: str, *, retry, sessions: bool = False, clock=time.monotonic,
                 proc: Path = PROC):  # fmt: skip
        """Write through ``retry(operation, what, **options)``, retried on database faults."""
        self.worker_id, self._retry, self._clock, self._proc = worker_id, retry, clock, proc
        self._here = this_host(proc)  # None: /proc tells nothing, so no pid is ever judged
        self.sessions = sessions
        self.interval = SESSION_CHECK_INTERVAL if sessions else CHECK_INTERVAL
        self._pids = Suspects(DEATH_CONFIRM_SECONDS)
        self._keys = Suspects(FREE_CONFIRM_SECONDS)
        self._next_check = clock() + self.interval  # the first, once the worker is up
        self._peers: dict[str, tuple[int, int, object]] | None = None  # as last read
        self._peers_read_until = -INF

    def next_at(self) -> float:
        """When (``clock`` time) the next check is due; never, with nothing to judge by."""
        if self._here is None and not self.sessions:
            return INF
        return min(self._next_check, self._pids.next_at(), self._keys.next_at())

    def check_if_due(self) -> int:
        """Rescue the tasks of the workers proven dead if a check is due; how many."""
        now = self._clock()
        if now < self.next_at():
            return 0
        self._next_check = now + self.interval
        try:
            dead, sessions = self._retry(
                lambda: self._look(now), "read the other workers", deadline_seconds=1.0
            )
            if not dead:
                return 0
            self._peers = None  # the rescue removes their rows: read them again next time
            logger.warning(
                "workers found dead worker_ids=%s by=%s",
                ",".join(sorted(dead)),
                ",".join("session" if wid in sessions else "pid" for wid in sorted(dead)),
            )
            return self._retry(
                lambda: transitions.rescue_dead(dead, sessions=sessions),
                "rescue dead workers",
                deadline_seconds=1.0,
            )
        except DatabaseError as exc:
            logger.warning("dead workers not checked error=%r", first_line(exc))
            return 0

    def _look(self, now: float) -> tuple[list[str], dict]:
        """One look at the others: the ids proven dead, and for those proven by their session
        the (key, heartbeat) seen free, for ``rescue_dead`` to check again under a lock."""
        local = self._local_peers(now)
        dead = []
        for wid, (pid, start, children) in local.items():
            gone = looks_dead(pid, start, self._proc) and children_dead(children, self._proc)
            if self._pids.see(wid, (pid, start), gone, now):
                dead.append(wid)
        self._pids.keep_only(local)
        sessions = {}
        if self.sessions:
            peers = self._session_peers()
            for wid, key, heartbeat_at, held in peers:
                if wid in local and not children_dead(local[wid][2], self._proc):
                    held = True  # a child of this host still runs: not yet
                if self._keys.see(wid, (key, heartbeat_at), not held, now) and wid not in dead:
                    sessions[wid] = (key, heartbeat_at)
            self._keys.keep_only(peer[0] for peer in peers)
        return [*dead, *sessions], sessions

    def _local_peers(self, now: float) -> dict[str, tuple[int, int, object]]:
        """The live workers of this host: ``{id: (pid, start time, children)}``, read from the
        database every PEERS_REFRESH_SECONDS, or at once while one of them is suspected.

        Read at every look, 16 workers of one host made about 30 queries a second between
        them, the supervisor's loop waiting for each: a fleet of 16 drained at half the rate
        it had before the watch. A worker registered since the last read is watched from the
        next (its tasks rescued within PEERS_REFRESH_SECONDS more, or by its lease); one that
        stopped since is suspected at most once, and the fresh read drops it.
        """
        if self._peers is None or self._pids or now >= self._peers_read_until:
            self._peers = self._read_local_peers()
            self._peers_read_until = now + PEERS_REFRESH_SECONDS
        return self._peers

    def _read_local_peers(self) -> dict[str, tuple[int, int, object]]:
        here = self._here
        if here is None:
            return {}
        rows = WorkerRecord.objects.filter(
            stopped_at__isnull=True, boot_id=here.boot_id, pid_namespace=here.pid_namespace
        ).exclude(pk=self.worker_id)
        return {
            wid: (pid, start, children)
            for wid, pid, start, children in rows.values_list(
                "pk", "pid", "process_start", "children"
            )
            if start is not None
        }

    def _session_peers(self) -> list[tuple]:
        connection = connections[router.db_for_read(WorkerRecord)]
        with connection.cursor() as cursor:
            cursor.execute(sql.dialect(connection).session_peers_sql(connection), [self.worker_id])
            return cursor.fetchall()


def watches_sessions() -> bool:
    """Whether this worker watches its peers' sessions: on PostgreSQL unless turned off. A
    worker behind a pooler, holding no lock of its own, still reads the others' in pg_locks."""

    if jobs_settings.SESSION_RESCUE is False:
        return False
    return bool(sql.dialect(router.db_for_read(WorkerRecord)).SESSION_LOCKS)
