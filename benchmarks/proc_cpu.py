"""CPU time and context switches of a set of processes, read from ``/proc`` (Linux).

``benchmarks/fleet.py`` reads them for a fleet's process trees (each supervisor and its
children) and for the PostgreSQL backends serving them, before and after a drain, to say what a
task costs in CPU at each fleet size, and how much of the machine's CPU the drain had.
"""

import os
from dataclasses import dataclass

TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Usage:
    cpu: float = 0.0  # user + system seconds
    voluntary: int = 0  # context switches: waits (a read, a lock, a sleep)
    involuntary: int = 0  # preempted: another process had the core

    def __sub__(self, other: "Usage") -> "Usage":
        return Usage(
            self.cpu - other.cpu,
            self.voluntary - other.voluntary,
            self.involuntary - other.involuntary,
        )

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            self.cpu + other.cpu,
            self.voluntary + other.voluntary,
            self.involuntary + other.involuntary,
        )


def usage(pid: int) -> Usage:
    """The process's own CPU (all its threads) and context switches; zero once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        # Every thread's context switches (the process's own status counts its main thread).
        voluntary = involuntary = 0
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/status") as status:
                for line in status:
                    if line.startswith("voluntary_ctxt_switches:"):
                        voluntary += int(line.split(":")[1])
                    elif line.startswith("nonvoluntary_ctxt_switches:"):
                        involuntary += int(line.split(":")[1])
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return Usage()
    # fields[11], [12]: utime, stime (the 14th and 15th of the line, after pid and comm).
    return Usage((int(fields[11]) + int(fields[12])) / TICKS, voluntary, involuntary)


def descendants(roots: list[int]) -> list[int]:
    """``roots`` and every process under them, now."""
    parents: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as stat:
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        parents.setdefault(ppid, []).append(int(name))
    found, todo = [], list(roots)
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(parents.get(pid, []))
    return found


def total(pids: list[int]) -> dict[int, Usage]:
    return {pid: usage(pid) for pid in pids}


def spent(before: dict[int, Usage], after: dict[int, Usage]) -> Usage:
    """What the processes in ``before`` spent until ``after`` (one gone meanwhile counts
    nothing: a fleet's processes live through a drain)."""
    result = Usage()
    for pid, then in before.items():
        now = after.get(pid)
        if now is not None and now.cpu >= then.cpu:
            result = result + (now - then)
    return result


def machine_busy() -> tuple[float, float]:
    """The machine's CPU seconds so far: (busy, all), from ``/proc/stat``."""
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return (sum(values) - idle) / TICKS, sum(values) / TICKS
