"""The pool alone, no database and no process: how many tasks it wants, and how it hands them
out (its losses, with real children, are in ``tests/db/test_pool.py``)."""

import json
import uuid

import pytest

from jobs.worker.child import Child
from jobs.worker.pool import ChildPool
from jobs.worker.wire import Claimed


class Conn:
    def __init__(self):
        self.sent = []

    def send_bytes(self, data):
        self.sent.append(json.loads(data))


def child(busy=False) -> Child:
    child = Child(process=None, conn=Conn(), slot=None)
    if busy:
        child.batch = {0: claimed()}
    return child


def claimed() -> Claimed:
    return Claimed(uuid.uuid4(), 1, "w", "tests.testapp.tasks.add", "default", b'{"id": 1}')


def pool_of(*children, settings=None) -> ChildPool:
    pool = ChildPool(
        len(children), max_tasks=None, max_memory_bytes=None, retry=None, on_success=None,
        stopping=lambda: False, before_fork=lambda: [],
    )  # fmt: skip
    pool.children = list(children)
    return pool


@pytest.fixture(autouse=True)
def batches(settings):
    settings.JOBS_BATCH_SIZE, settings.JOBS_BATCH_SECONDS = 100, 0.02


def test_one_task_per_idle_child_until_tasks_report_how_long_they_take():
    pool = pool_of(child(), child(), child(busy=True))
    assert pool.batch_size_now() == 1
    assert pool.wanted(claim_seconds=0.01) == 2


def test_quick_tasks_come_in_batches_and_a_batch_more_per_child_at_hand():
    pool = pool_of(child(), child(busy=True))
    pool.task_seconds = 0.0001  # 200 fit in the budget: the batch size caps it
    assert pool.batch_size_now() == 100
    assert pool.wanted(claim_seconds=0.01) == 100 + 2 * 100
    pool.ready.extend(claimed() for _ in range(150))
    assert pool.wanted(claim_seconds=0.01) == 150


def test_slow_tasks_keep_at_hand_about_what_children_finish_during_a_claim():
    pool = pool_of(child(), child(), child(busy=True), child(busy=True))
    pool.task_seconds = 1.0
    assert pool.batch_size_now() == 1
    # 2 idle, and twice what 4 children finish during a 10 ms claim (0.04), plus one.
    assert pool.wanted(claim_seconds=0.01) == 2 + 2
    pool.task_seconds = 0.05  # 0.8 tasks finish during the claim: twice that, and one
    assert pool.wanted(claim_seconds=0.01) == 2 + 3
    assert pool.wanted(claim_seconds=1.0) == 2 + 4  # never more than one per child


def test_dispatch_sends_each_idle_child_a_batch_in_claim_order():
    busy, first, second = child(busy=True), child(), child()
    pool = pool_of(busy, first, second)
    pool.task_seconds = 0.01  # two fit in the budget
    waiting = [claimed() for _ in range(3)]
    pool.ready.extend(waiting)
    pool.dispatch()
    assert busy.conn.sent == []
    assert list(first.batch.values()) == waiting[:2]
    assert list(second.batch.values()) == waiting[2:]
    assert (first.batch_number, second.batch_number) == (1, 2)
    assert first.conn.sent[0]["budget"] == 0.02
    assert not pool.ready
    assert pool.in_hand() == [*busy.batch.values(), *waiting]


class Process:
    def __init__(self, sentinel):
        self.sentinel = sentinel


class Pipe(Conn):
    def __init__(self, fd):
        super().__init__()
        self.fd = fd

    def fileno(self):
        return self.fd


def test_claimed_tasks_taken_wait_in_order_behind_those_waiting_already():
    pool = pool_of(child())
    first, second, third = claimed(), claimed(), claimed()
    pool.take([first])
    pool.take([second, third])
    assert pool.waiting() == 3
    pool.dispatch()
    assert pool.waiting() == 2
    assert list(pool.ready) == [second, third]


def test_wait_handles_are_the_same_until_the_children_change():
    one = Child(process=Process(11), conn=Pipe(10), slot=None)
    two = Child(process=Process(21), conn=Pipe(20), slot=None)
    pool = pool_of(one, two)
    handles = pool.wait_handles()
    assert [fd for fd, _ in handles] == [10, 11, 20, 21]
    assert pool.wait_handles() is handles
    # Another child with the same descriptors, as after a replacement: the handles change.
    pool.children[1] = Child(process=Process(21), conn=Pipe(20), slot=None)
    assert pool.wait_handles() is not handles


def test_a_ready_handle_has_its_child_read_or_lost():
    one = Child(process=Process(11), conn=Pipe(10), slot=None)
    two = Child(process=Process(21), conn=Pipe(20), slot=None)
    pool = pool_of(one, two)
    seen = []
    pool.receive, pool.lost = (
        (lambda c: seen.append(("receive", c))),
        (lambda c: seen.append(("lost", c))),
    )
    handles = dict(pool.wait_handles())
    pool.handle_ready([handles[21], handles[10], handles[11]])  # one replied and exited
    assert seen == [("receive", one), ("lost", two)]


def async_claimed() -> Claimed:
    return Claimed(uuid.uuid4(), 1, "w", "tests.testapp.async_tasks.nap", "", b'{"id": 1}')


def test_async_tasks_go_together_shared_among_the_idle_children(settings):
    settings.JOBS_ASYNC_CONCURRENCY = 40
    first, second, busy = child(), child(), child(busy=True)
    pool = pool_of(first, second, busy)
    assert pool.batch_size_now() == 1  # nothing known yet: one each
    naps = [async_claimed() for _ in range(49)]
    plain = claimed()
    pool.ready.extend([*naps, plain])
    pool.dispatch()
    # Unknown lengths, but async: half each, the plain task after them left for a free child.
    assert list(first.batch.values()) == naps[:25]
    assert list(second.batch.values()) == naps[25:]
    assert list(pool.ready) == [plain]
    # The next claim takes as many as a child runs together, before any report.
    assert pool.batch_size_now() == 40


def test_an_async_batch_is_at_most_what_a_child_runs_together(settings):
    settings.JOBS_ASYNC_CONCURRENCY = 10
    only = child()
    pool = pool_of(only)
    pool.ready.extend(async_claimed() for _ in range(25))
    pool.dispatch()
    assert len(only.batch) == 10
    assert pool.waiting() == 15


def test_a_worker_of_async_tasks_claims_for_what_its_children_run_together(settings):
    settings.JOBS_ASYNC_CONCURRENCY = 10
    pool = pool_of(child(), child(busy=True))
    pool.task_seconds = 0.0001  # the loop's time per task: 200 would fit the budget
    pool.async_last = True
    assert pool.batch_size_now() == 10
    assert pool.wanted(claim_seconds=0.01) == 10 + 2 * 10
