"""Proof that a worker on this host is dead, read from /proc (issue 16, instant rescue).

A lapsed lease proves death only after LEASE_SECONDS. On the same host a pid says more, and
sooner: a pid that is gone, a zombie, or reused by another process (its start time differs
from the one the worker recorded) belongs to a dead worker. A pid is only judged when the
boot id and the pid namespace match ours, since a pid means nothing across boots or
namespaces. Each reading is taken twice, DEATH_CONFIRM_SECONDS apart, before a worker is called
dead, so a /proc read racing a fork or an exec never rescues a live worker's tasks.

Every worker watches the others of its host (``PeerWatch``, from its main loop every
``CHECK_INTERVAL``): one query for the rows of live workers of its boot and pid namespace, a
/proc read for each, and ``jobs.transitions.rescue_dead`` for those confirmed dead, so the
tasks of a SIGKILLed worker run again within about a second instead of after their lease. A
worker on another host is still rescued only when its lease lapses.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.db import DatabaseError

from jobs import transitions
from jobs.db import first_line
from jobs.models import Worker as WorkerRecord

logger = logging.getLogger(__name__)

PROC = Path("/proc")
CHECK_INTERVAL = 0.5  # seconds between two looks at the other workers of this host
DEATH_CONFIRM_SECONDS = 0.4
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


def confirmed_dead(
    candidates: dict[str, tuple[int, int]],
    *,
    proc: Path = PROC,
    confirm_seconds: float = DEATH_CONFIRM_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Worker ids whose (pid, start time) looks dead at two readings confirm_seconds apart."""
    first = [wid for wid, (pid, start) in candidates.items() if looks_dead(pid, start, proc)]
    if not first:
        return []
    sleep(confirm_seconds)
    return [wid for wid in first if looks_dead(*candidates[wid], proc)]


class PeerWatch:
    """Rescue the tasks of the workers of this host that died, checked every CHECK_INTERVAL."""

    def __init__(self, worker_id: str, *, retry, clock=time.monotonic, proc: Path = PROC):
        """Write through ``retry(operation, what, **options)``, retried on database faults."""
        self.worker_id, self._retry, self._clock, self._proc = worker_id, retry, clock, proc
        self._here = this_host(proc)  # None: /proc tells nothing, so nothing is ever judged
        self._next_check = clock() + CHECK_INTERVAL  # the first, once the worker is up

    def next_at(self) -> float:
        """When (``clock`` time) the next check is due; never, where /proc says nothing."""
        return self._next_check if self._here is not None else float("inf")

    def check_if_due(self) -> int:
        """Rescue the tasks of this host's dead workers if a check is due; how many."""
        if self._here is None or self._clock() < self._next_check:
            return 0
        self._next_check = self._clock() + CHECK_INTERVAL
        try:
            peers = self._retry(self._peers, "read workers of this host", deadline_seconds=1.0)
            if not peers:  # alone on this host (the common case): one query, nothing more
                return 0
            dead = confirmed_dead(peers, proc=self._proc)
            if not dead:
                return 0
            logger.warning("workers found dead worker_ids=%s", ",".join(sorted(dead)))
            return self._retry(
                lambda: transitions.rescue_dead(dead), "rescue dead workers", deadline_seconds=1.0
            )
        except DatabaseError as exc:
            logger.warning("dead workers not checked error=%r", first_line(exc))
            return 0

    def _peers(self) -> dict[str, tuple[int, int]]:
        here = self._here
        assert here is not None
        rows = WorkerRecord.objects.filter(
            stopped_at__isnull=True, boot_id=here.boot_id, pid_namespace=here.pid_namespace
        ).exclude(pk=self.worker_id)
        return {
            wid: (pid, start)
            for wid, pid, start in rows.values_list("pk", "pid", "process_start")
            if start is not None
        }
