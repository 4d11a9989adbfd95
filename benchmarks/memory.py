"""Memory of worker processes: summed RSS and PSS of a process and its descendants, sampled."""

import contextlib
import threading
from pathlib import Path


def process_tree(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        current = todo.pop()
        pids.append(current)
        with contextlib.suppress(OSError):
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
            todo.extend(int(child) for child in children)
    return pids


def memory_of(pid: int) -> tuple[int, int]:
    """Resident and proportional set size of ``pid`` in bytes (0, 0 once it is gone)."""
    rss = pss = 0
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Rss:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("Pss:"):
                pss = int(line.split()[1]) * 1024
    return rss, pss


class MemorySampler(threading.Thread):
    """Sample the summed RSS and PSS of every worker process (supervisors and children)."""

    def __init__(self, processes):
        super().__init__(daemon=True)
        self.processes = processes
        self.peak_rss = self.peak_pss = 0
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            rss = pss = 0
            for process in self.processes:
                for pid in process_tree(process.pid):
                    one_rss, one_pss = memory_of(pid)
                    rss, pss = rss + one_rss, pss + one_pss
            self.peak_rss, self.peak_pss = max(self.peak_rss, rss), max(self.peak_pss, pss)
            self.done.wait(0.05)
