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
        assert liveness.confirmed_dead({"w": (child.pid, start)}, confirm_seconds=0.05) == []
    finally:
        child.kill()
        child.wait()


def test_a_killed_and_reaped_process_is_dead():
    child = start_sleeper()
    start = start_time_of(child.pid)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert liveness.confirmed_dead({"w": (child.pid, start)}, confirm_seconds=0.05) == ["w"]


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
