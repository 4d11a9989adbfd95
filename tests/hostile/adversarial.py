"""Helpers of the adversarial-task suite: bystander tasks, worker process groups, process checks."""

import contextlib
import os
import signal
from pathlib import Path

from jobs.models import Task
from jobs.states import Status
from tests.conftest import WorkerProcess, wait_for
from tests.testapp import tasks
from tests.testapp.models import SideEffect

# Short leases and rounds, and the "task started" lines (DEBUG) that tests wait for.
FAST = {
    "JOBS_LEASE_SECONDS": "1",
    "JOBS_MAINTENANCE_INTERVAL": "0.3",
    "JOBS_LOG_LEVEL": "DEBUG",
}


def enqueue_bystanders(prefix: str, count: int = 3) -> list[Task]:
    """Well-behaved tasks run by the same worker as a hostile one."""
    return [tasks.record_effect.enqueue(f"{prefix}-{number}").record for number in range(count)]


def assert_succeeded_once(bystanders: list[Task]):
    """Each bystander succeeded on its first attempt and had its effect exactly once."""
    for bystander in bystanders:
        bystander.refresh_from_db()
        assert (bystander.status, bystander.attempts) == (Status.SUCCEEDED, 1), bystander
        assert bystander.error_details == []
        assert SideEffect.objects.filter(key=bystander.result).count() == 1


def started_pid(key: str) -> int:
    """The pid a task of ``hostile_tasks`` recorded as ``key:pid`` for a process it started."""
    effect = wait_for(
        lambda: SideEffect.objects.filter(key__startswith=f"{key}:").first(),
        message=f"{key}'s process started",
    )
    return int(effect.key.rsplit(":", 1)[1])


def is_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped by its new parent, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def session_members(session: int) -> list[int]:
    """Every live process of session ``session``: a worker started in its own, and everything
    it started (its children lead process groups of their own, in the same session)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[3]) == session and fields[0] != "Z":
            members.append(int(entry.name))
    return members


class GroupWorker(WorkerProcess):
    """A ``runworker`` leading a process group (and session) of its own, as under systemd, a
    terminal, ``timeout`` or a container runtime, so that a test can signal the whole group."""

    def __init__(self, args, env, log_path):
        super().__init__(args, env, log_path, start_new_session=True)

    def signal_group(self, signum):
        os.killpg(self.process.pid, signum)

    def stop(self):
        for pid in session_members(self.process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        super().stop()


def until_started(worker, task, timeout=30):
    line = f"task started name={task.name} id={task.pk}"
    wait_for(lambda: line in worker.output, timeout, message=f"{task.name} started")
