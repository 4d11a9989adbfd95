"""The pool of children built alone, with real child processes: replies, losses, limits."""

import json
import subprocess
import time
from multiprocessing import Pipe

import pytest

from jobs.db import retry_on_database_error
from jobs.models import Task
from jobs.states import Status
from jobs.worker.child import Child
from jobs.worker.pool import ChildPool
from jobs.worker.wire import Slot
from tests import helpers
from tests.factories import TaskFactory
from tests.helpers import claim_for_dispatch, claimed_from_task
from tests.testapp.tasks import add, die_by_signal, hang

WORKER_ID = "host:1:pool"


def retry(operation, what, **options):
    return retry_on_database_error(operation, what=what, model=Task, **options)


def new_pool(successes, *, stopping=False, concurrency=1) -> ChildPool:
    return ChildPool(
        concurrency, max_tasks=None, max_memory_bytes=None, retry=retry,
        on_success=successes.append, stopping=lambda: stopping, before_fork=lambda: [],
    )  # fmt: skip


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


@pytest.fixture
def started(no_success_receivers):
    """A pool of one real child; tests using it open connections of their own in the child, so
    they need committed rows (``transaction=True``)."""
    successes = []
    pool = new_pool(successes)
    pool.start()
    yield pool, successes
    pool.close()


def wait_for(predicate, seconds=20):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.mark.django_db(transaction=True)
@pytest.mark.process
def test_a_real_child_reports_its_successes_for_the_completer(started):
    pool, successes = started

    task = add.enqueue(2, 3)
    pool.ready.extend(claim_for_dispatch(WORKER_ID, 1, lease_seconds=60))
    pool.dispatch()
    (child,) = pool.children
    assert child.conn.poll(20)
    pool.receive(child)
    assert [(s.task_id, s.result) for s in successes] == [(task.pk, 5)]
    assert pool.busy() == 0
    assert pool.task_seconds is not None
    task.refresh_from_db()
    assert task.status == Status.RUNNING  # written by the completer, not here


@pytest.mark.django_db(transaction=True)
@pytest.mark.process
def test_a_child_that_dies_running_a_task_is_recorded_lost_and_replaced(started):
    pool, _ = started

    dying = die_by_signal.enqueue()
    behind = add.enqueue(1, 1)
    pool.ready.extend(claim_for_dispatch(WORKER_ID, 2, lease_seconds=60))
    pool.task_seconds = 0.001  # quick tasks: both in one batch
    pool.dispatch()
    (child,) = pool.children
    child.process.join(20)
    assert child.process.exitcode is not None

    pool.lost(child)

    dying.refresh_from_db()
    assert dying.status == Status.FAILED  # its only attempt
    assert "stopped unexpectedly" in dying.last_error
    behind.refresh_from_db()
    assert (behind.status, behind.attempts) == (Status.PENDING, 0)  # handed back, not run
    (replacement,) = pool.children
    assert replacement is not child
    assert replacement.process.is_alive()
    assert not pool.busy()


@pytest.mark.django_db(transaction=True)
@pytest.mark.process
def test_a_task_past_its_timeout_has_its_child_killed_and_its_loss_recorded(started):
    pool, _ = started

    stuck = hang.enqueue()  # timeout=1
    pool.ready.extend(claim_for_dispatch(WORKER_ID, 1, lease_seconds=60))
    pool.dispatch()
    (child,) = pool.children
    deadline = child.deadline()
    assert deadline is not None
    assert pool.next_deadline() == deadline
    pool.enforce_limits()  # not yet
    assert pool.children == [child]
    wait_for(lambda: time.monotonic() >= deadline)

    pool.enforce_limits()

    assert child.killed_for == "timeout"
    assert child.process.exitcode is not None
    stuck.refresh_from_db()
    assert stuck.status == Status.FAILED
    assert "timeout" in stuck.last_error
    assert pool.children != [child]
