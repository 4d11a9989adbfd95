"""The pool of children built alone, with real child processes: their successes, deaths and
timeouts (tests/db/test_pool.py has the pool reading a dead child's replies)."""

import time

import pytest

from jobs.states import Status
from tests.helpers import claim_for_dispatch, new_pool
from tests.testapp.tasks import add, die_by_signal, hang

WORKER_ID = "host:1:pool"


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
def test_a_real_child_reports_its_successes_for_the_completer(started):
    pool, successes = started

    task = add.enqueue(2, 3).record
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
def test_a_child_that_dies_running_a_task_is_recorded_lost_and_replaced(started):
    pool, _ = started

    dying = die_by_signal.enqueue().record
    behind = add.enqueue(1, 1).record
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
def test_a_task_past_its_timeout_has_its_child_killed_and_its_loss_recorded(started):
    pool, _ = started

    stuck = hang.enqueue().record  # timeout=1
    pool.ready.extend(claim_for_dispatch(WORKER_ID, 1, lease_seconds=60))
    pool.dispatch()
    (child,) = pool.children
    deadline = child.deadline()
    assert deadline is not None
    assert pool.next_deadline() == deadline
    pool.enforce_limits()  # not yet
    assert pool.children == [child]

    def enforced():
        # The deadline counts from when the child starts the task, a moment after the dispatch
        # (the deadline read above may be the dispatch's): enforce until it passes.
        pool.enforce_limits()
        return child.killed_for

    wait_for(enforced)

    assert child.killed_for == "timeout"
    assert child.process.exitcode is not None
    stuck.refresh_from_db()
    assert stuck.status == Status.FAILED
    assert "timeout" in stuck.last_error
    assert pool.children != [child]
