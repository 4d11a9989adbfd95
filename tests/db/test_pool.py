"""The pool of children built alone: what it records for a child that died
(tests/process/test_pool.py runs real children)."""

import json
import subprocess
import time
from multiprocessing import Pipe

import pytest

from jobs.states import Status
from jobs.worker.child import Child
from jobs.worker.wire import Slot
from tests import helpers
from tests.factories import TaskFactory
from tests.helpers import claimed_from_task, new_pool

WORKER_ID = "host:1:pool"


class ExitedProcess:
    """A child process that has exited (a real one, reaped): what ``lost`` is called for."""

    def __init__(self):
        process = subprocess.Popen(["true"])
        process.wait()
        self.pid, self.exitcode = process.pid, 1

    def join(self, timeout=None):
        pass


@pytest.mark.django_db
def test_a_lost_child_has_its_unread_replies_taken_first():
    """A child that reported finished tasks and then died (or was killed): those tasks are
    recorded as it reported them, not handed back to run again."""
    TaskFactory.create_batch(3)
    finished, running, unstarted = helpers.claim(WORKER_ID, 3, lease_seconds=60)
    ours, theirs = Pipe()
    reply = {"batch": 1, "results": [[0, "deferred", 3, time.time()]], "busy": 0.1, "final": False}
    theirs.send_bytes(json.dumps(reply).encode())
    theirs.close()
    child = Child(process=ExitedProcess(), conn=ours, slot=Slot())
    child.batch = dict(enumerate(claimed_from_task(t) for t in (finished, running, unstarted)))
    child.batch_number, child.timeouts = 1, {0: 10.0, 1: 10.0, 2: 10.0}
    child.slot.start(1, 1, time.monotonic())  # running the second task when it died
    successes = []
    pool = new_pool(successes, stopping=True)  # no new child for this test
    pool.children = [child]

    pool.lost(child)

    assert [success.task_id for success in successes] == [finished.pk]
    for task in (finished, running, unstarted):
        task.refresh_from_db()
    assert (finished.status, finished.attempts) == (Status.RUNNING, 1)  # its success is held
    assert running.status == Status.RETRYING  # recorded lost: crashed, transient
    assert (unstarted.status, unstarted.attempts) == (Status.PENDING, 0)  # handed back
    assert pool.children == []
    assert pool.busy() == 0
