"""Django's task_finished for a task whose child process was lost, with the pool's real children.

Adapts the backend-agnostic part of Django's test_immediate_backend.test_catches_exception and
of the backport's test_signals (task_finished for a failed task) to the deaths a worker's child
can die: killed by a signal, past its timeout, over the memory limit. The supervisor records
those outcomes, and sends task_finished there, in the worker's main process (this test's).
"""

import sys
import time

import pytest

from jobs.backends import TaskResultStatus, task_finished
from jobs.exceptions import MemoryLimitExceeded, TaskTimeout, WorkerCrashed
from jobs.models import Task
from jobs.worker.pool import ChildPool
from tests.helpers import claim_for_dispatch, new_pool
from tests.testapp import django_tasks

WORKER_ID = "host:1:contract"

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def finished_results():
    seen = []

    def receiver(sender, task_result, **kwargs):
        seen.append((task_result, sys.exc_info()[1]))

    task_finished.connect(receiver)
    yield seen
    task_finished.disconnect(receiver)


@pytest.fixture
def pool_of(no_success_receivers):
    pools = []

    def make(*, max_memory_bytes=None) -> ChildPool:
        pool = new_pool([], max_memory_bytes=max_memory_bytes)
        pool.start()
        pools.append(pool)
        return pool

    yield make
    for pool in pools:
        pool.close()


def dispatched(pool, task, *, max_attempts=1):
    result = task.enqueue()
    Task.objects.filter(pk=result.id).update(max_attempts=max_attempts)
    pool.ready.extend(claim_for_dispatch(WORKER_ID, 1, lease_seconds=60))
    pool.dispatch()
    (child,) = pool.children
    return result, child


def wait_for(predicate, seconds=20):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_task_finished_when_the_child_died(pool_of, finished_results):
    pool = pool_of()
    result, child = dispatched(pool, django_tasks.die)
    child.process.join(20)
    pool.lost(child)
    ((finished, exception),) = finished_results
    assert (finished.id, finished.status) == (result.id, TaskResultStatus.FAILED)
    assert finished.errors[-1].exception_class is WorkerCrashed
    assert isinstance(exception, WorkerCrashed)  # handled while the signal is sent


def test_task_finished_when_the_task_timed_out(pool_of, finished_results, settings):
    settings.JOBS_DEFAULT_TIMEOUT = 0.5  # Django tasks have no timeout of their own
    pool = pool_of()
    result, child = dispatched(pool, django_tasks.hang)

    def enforced():
        # Until the deadline passes: it counts from when the child starts the task, which may
        # be a moment after the dispatch.
        pool.enforce_limits()
        return child.killed_for

    wait_for(enforced)
    assert child.killed_for == "timeout"
    ((finished, exception),) = finished_results
    assert (finished.id, finished.status) == (result.id, TaskResultStatus.FAILED)
    assert finished.errors[-1].exception_class is TaskTimeout
    assert isinstance(exception, TaskTimeout)


def test_task_finished_when_the_child_was_killed_for_memory(pool_of, finished_results):
    pool = pool_of(max_memory_bytes=1)  # any child is over it
    result, child = dispatched(pool, django_tasks.hang)
    wait_for(lambda: child.running() is not None)  # started: its loss is recorded, not handed back
    pool.enforce_limits()
    assert child.killed_for == "memory"
    ((finished, _),) = finished_results
    assert (finished.id, finished.status) == (result.id, TaskResultStatus.FAILED)
    assert finished.errors[-1].exception_class is MemoryLimitExceeded


def test_no_task_finished_when_the_lost_task_will_be_retried(pool_of, finished_results):
    """A loss with attempts left is a retry (READY), not a finish."""
    pool = pool_of()
    result, child = dispatched(pool, django_tasks.die, max_attempts=2)
    child.process.join(20)
    pool.lost(child)
    assert finished_results == []
    assert django_tasks.die.get_result(result.id).status == TaskResultStatus.READY
