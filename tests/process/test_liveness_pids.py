"""Same-host proof of death from /proc, read for real processes: killed, zombie, alive."""

import os
import signal
import subprocess
import sys

from jobs.worker import liveness


def start_sleeper():
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def start_time_of(pid):
    stat = liveness.read_stat(pid)
    assert stat is not None
    return stat.start_time


def test_a_live_process_is_not_dead():
    child = start_sleeper()
    try:
        start = start_time_of(child.pid)
        assert not liveness.looks_dead(child.pid, start)
        assert not liveness.children_dead([[child.pid, start]])
    finally:
        child.kill()
        child.wait()


def test_a_killed_and_reaped_process_is_dead():
    child = start_sleeper()
    start = start_time_of(child.pid)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert liveness.looks_dead(child.pid, start)
    assert liveness.children_dead([[child.pid, start]])
    assert liveness.children_dead([])  # no child recorded: nothing to wait for


def test_suspects_are_confirmed_by_a_second_reading_with_the_same_evidence():
    suspects = liveness.Suspects(0.4)
    assert not suspects.see("w", (1, 2), True, now=10.0)  # first reading
    assert suspects.next_at() == 10.4
    assert not suspects.see("w", (1, 2), True, now=10.3)  # too soon
    assert not suspects.see("w", (1, 3), True, now=10.5)  # other evidence: starts again
    assert suspects.see("w", (1, 3), True, now=10.9)
    assert not suspects.see("w", (1, 3), False, now=11.0)  # alive: forgotten
    assert suspects.next_at() == float("inf")


def test_a_zombie_is_dead():
    child = start_sleeper()
    start = start_time_of(child.pid)
    os.kill(child.pid, signal.SIGKILL)
    try:
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # dead, not reaped
        assert liveness.read_stat(child.pid).state == "Z"
        assert liveness.looks_dead(child.pid, start)
    finally:
        child.wait()
