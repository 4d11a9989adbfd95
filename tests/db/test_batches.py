"""Batches: claimed rows as children get them, batch runs in a child, hand-back of the rest."""

import json
import time

import pytest
from django.utils import timezone

from jobs import transitions
from jobs.models import Task
from jobs.states import Status
from jobs.worker import claiming
from jobs.worker.batches import _BatchRunner
from jobs.worker.wire import Claimed, Slot, batch_message, encode_task, task_from_values
from tests.factories import TaskFactory, UserFactory
from tests.helpers import claim_for_dispatch, retry

pytestmark = pytest.mark.django_db


def test_a_claimed_row_rebuilds_the_task_exactly():
    """What the claim returns for a child (row_to_json on PostgreSQL) is the row, field by field."""
    TaskFactory(
        payload={"args": [1.5, "é", None], "kwargs": {"nested": {"a": [1, 2]}}},
        summary="Import of contacts.csv",
        owner=UserFactory(),
        steps={"parse": {"done": True}},
        progress_total=10,
        idempotency_key="key-1",
    )
    (claimed,) = claim_for_dispatch("w", 5, lease_seconds=30)
    copy = task_from_values(json.loads(claimed.row))
    stored = Task.objects.get(pk=claimed.id)
    assert not copy._state.adding
    for field in Task._meta.concrete_fields:
        assert getattr(copy, field.attname) == getattr(stored, field.attname), field.name
    assert (claimed.attempts, claimed.worker_id, claimed.name) == (1, "w", stored.name)


def test_claim_for_dispatch_returns_the_highest_priority_first():
    low = TaskFactory(priority=0)
    high = TaskFactory(priority=9)
    claimed = claim_for_dispatch("w", 5, lease_seconds=30)
    assert [c.id for c in claimed] == [high.pk, low.pk]


def test_release_many_hands_back_only_attempts_still_running_under_the_worker():
    mine = TaskFactory(status=Status.RUNNING, attempts=2, worker_id="w")
    finished = TaskFactory(status=Status.SUCCEEDED, attempts=1, worker_id="w")
    rescued = TaskFactory(status=Status.RUNNING, attempts=3, worker_id="other")
    released = transitions.release_many(
        [(task.pk, 2 if task is mine else task.attempts, "w") for task in (mine, finished, rescued)]
    )
    assert released == 1
    mine.refresh_from_db()
    assert (mine.status, mine.attempts, mine.worker_id) == (Status.PENDING, 1, "")
    assert mine.run_after <= timezone.now()
    assert Task.objects.get(pk=finished.pk).status == Status.SUCCEEDED
    assert Task.objects.get(pk=rescued.pk).status == Status.RUNNING


class Pipe:
    """The child's end of the pipe, as the runner sees it: replies are collected."""

    def __init__(self):
        self.replies = []

    def send_bytes(self, data):
        self.replies.append(json.loads(data))


def running_adds(count):
    tasks = TaskFactory.create_batch(
        count, name="tests.testapp.tasks.add", status=Status.RUNNING, attempts=1, worker_id="w",
        payload={"args": [1, 2], "kwargs": {}},
    )  # fmt: skip
    return [json.loads(encode_task(Task.objects.get(pk=task.pk))) for task in tasks]


@pytest.fixture
def runner(no_success_receivers):
    slot = Slot()
    yield _BatchRunner(Pipe(), slot, max_tasks=None, max_memory=None)
    slot.close()


def test_a_batch_runs_in_order_and_reports_once(runner):
    rows = running_adds(3)
    runner.run({"batch": 4, "tasks": rows, "budget": 10.0})
    (reply,) = runner.conn.replies
    assert reply["final"]
    assert reply["returned"] == []
    assert [(index, outcome, result) for index, outcome, result, _ in reply["results"]] == [
        (0, "deferred", 3), (1, "deferred", 3), (2, "deferred", 3),
    ]  # fmt: skip
    assert runner.slot.current()[:2] == (4, 2)  # the last task it started


def test_a_batch_starts_nothing_once_its_time_budget_is_spent(runner):
    rows = running_adds(3)
    runner.run({"batch": 1, "tasks": rows, "budget": 0.0})
    (reply,) = runner.conn.replies
    assert [result[0] for result in reply["results"]] == [0]  # the first always runs
    assert reply["returned"] == [1, 2]


def test_a_batch_stops_when_the_worker_asks(runner):
    rows = running_adds(2)
    runner.slot.ask_to_stop()
    runner.run({"batch": 1, "tasks": rows, "budget": 10.0})
    assert runner.conn.replies[-1]["returned"] == [1]


def test_a_long_batch_reports_as_it_goes(runner, monkeypatch):
    monkeypatch.setattr(_BatchRunner, "REPORT_INTERVAL", 0.0)
    rows = running_adds(3)
    runner.run({"batch": 1, "tasks": rows, "budget": 10.0})
    assert [len(reply["results"]) for reply in runner.conn.replies] == [1, 1, 1]
    assert [reply["final"] for reply in runner.conn.replies] == [False, False, True]


def test_a_batch_message_carries_the_rows_as_they_are():
    claimed = [
        Claimed(None, 1, "w", "n", "", b'{"id": "a"}'),
        Claimed(None, 1, "w", "n", "", b'{"id": "b"}'),
    ]
    message = json.loads(batch_message(3, claimed, 0.02))
    assert message == {"batch": 3, "budget": 0.02, "tasks": [{"id": "a"}, {"id": "b"}]}


def test_the_slot_is_shared_with_a_forked_child():
    import os

    slot = Slot()
    pid = os.fork()
    if pid == 0:  # the child: say what it runs, then leave without running anything else
        slot.start(7, 3, 12.5)
        os._exit(0)
    deadline = time.monotonic() + 10
    while slot.current() != (7, 3, 12.5) and time.monotonic() < deadline:
        time.sleep(0.01)
    os.waitpid(pid, 0)
    assert slot.current() == (7, 3, 12.5)
    slot.close()


# Outside a test's transaction, as the claim thread runs it.
@pytest.mark.django_db(transaction=True)
def test_claim_and_record_records_successes_and_claims_at_once(
    django_assert_max_num_queries, no_success_receivers
):
    from django.db import connection

    mine = TaskFactory(status=Status.RUNNING, attempts=1, worker_id="w")
    taken_over = TaskFactory(status=Status.RUNNING, attempts=2, worker_id="other")
    waiting = TaskFactory()
    finished_at = timezone.now()
    successes = [
        transitions.Success(mine.pk, 1, "w", {"rows": 3}, finished_at),
        transitions.Success(taken_over.pk, 1, "w", None, finished_at),
    ]
    # One transaction, one commit: BEGIN, the successes' UPDATE in the savepoint that would
    # isolate a refused one (SAVEPOINT, UPDATE, RELEASE), the claim, COMMIT.
    most = 6 if connection.vendor == "postgresql" else 10
    with django_assert_max_num_queries(most):
        claimed, recorded = claiming.claim_and_record("w", 5, successes, lease_seconds=30)
    assert [c.id for c in claimed] == [waiting.pk]
    assert recorded == {mine.pk}
    mine.refresh_from_db()
    assert (mine.status, mine.result, mine.finished_at) == (
        Status.SUCCEEDED, {"rows": 3}, finished_at,
    )  # fmt: skip
    assert Task.objects.get(pk=taken_over.pk).status == Status.RUNNING
    assert Task.objects.get(pk=waiting.pk).status == Status.RUNNING


@pytest.mark.django_db(transaction=True)  # the claim thread has a connection of its own
def test_the_claim_thread_wakes_the_loop_only_once_its_claim_is_done(monkeypatch):
    import os
    import select
    from concurrent.futures import Future

    from jobs.worker.claimer import Claimer

    set_result = Future.set_result

    def slow_set_result(future, result):  # widens the window a too early wake-up falls in
        time.sleep(0.05)
        set_result(future, result)

    monkeypatch.setattr(Future, "set_result", slow_set_result)
    waiting = TaskFactory()
    wake_read, wake_write = os.pipe()
    claimer = Claimer("w", [], 30, wake_write, retry=retry)
    try:
        for _ in range(3):  # a wake-up before the outcome is set would show as None here
            claimer.start(1, [])
            assert select.select([wake_read], [], [], 10)[0]
            os.read(wake_read, 64)
            claimed = claimer.collect()
            assert claimed is not None
            assert [c.id for c in claimed] in ([waiting.pk], [])
    finally:
        claimer.close()
        os.close(wake_read)
        os.close(wake_write)
    assert Task.objects.get(pk=waiting.pk).worker_id == "w"


def test_a_slot_read_never_returns_a_half_written_record():
    import threading

    slot = Slot()
    slot.start(1, 0, 100.0)
    # The writer descheduled halfway through its next write: counter odd, record half new.
    Slot._SEQ.pack_into(slot._map, 0, slot._seq + 1)
    Slot._RECORD.pack_into(slot._map, Slot._RECORD_AT, 2, 5, 0.0, 0, 0)
    read = []
    reader = threading.Thread(target=lambda: read.append(slot.current()), daemon=True)
    reader.start()
    reader.join(0.2)
    assert reader.is_alive()  # it waits for the write to finish rather than read it half done
    slot.start(2, 5, 200.0)
    reader.join(5)
    assert read == [(2, 5, 200.0)]
    slot.close()


def test_a_failure_outside_a_task_reports_the_finished_ones_first(runner, monkeypatch):
    """The child exits on it (the supervisor records the task as lost), but the tasks finished
    before it are reported, not handed back and run again."""
    from jobs.execution import executor

    rows = running_adds(3)
    real_run = executor.run

    def run_failing_on_the_second(task, **options):
        if str(task.pk) == rows[1]["id"]:
            raise RuntimeError("not the task's doing")
        return real_run(task, **options)

    monkeypatch.setattr(executor, "run", run_failing_on_the_second)
    with pytest.raises(RuntimeError):
        runner.run({"batch": 2, "tasks": rows, "budget": 10.0})
    (reply,) = runner.conn.replies
    assert (reply["batch"], reply["final"]) == (2, False)
    assert [(index, outcome) for index, outcome, _, _ in reply["results"]] == [(0, "deferred")]
    assert runner.slot.current()[:2] == (2, 1)  # the supervisor records this one as lost
