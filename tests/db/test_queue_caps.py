"""Per-queue caps against the database: the claim takes at most a capped queue's room and goes
on claiming the others; the worker and the command refuse a cap they cannot keep."""

import os

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Count
from django.utils import timezone

from jobs.models import Task
from jobs.states import Status
from jobs.transitions import Success
from jobs.worker import claiming
from jobs.worker.claimer import Claimer
from jobs.worker.lifecycle import Worker
from jobs.worker.queue_caps import QueueCaps
from tests import helpers
from tests.factories import TaskFactory

pytestmark = pytest.mark.django_db


def claim(limit, groups):
    return helpers.claim_for_dispatch("w1", limit, groups=groups, lease_seconds=30)


def test_a_capped_queue_gives_at_most_its_room_and_the_others_the_rest():
    TaskFactory.create_batch(5, queue="imports", priority=10)  # first in one claim of all
    TaskFactory.create_batch(5, queue="emails")
    TaskFactory(queue="default")
    claimed = claim(6, [(["imports"], 2), (["default", "emails"], None)])
    by_queue = dict(Task.objects.running().values_list("queue").annotate(n=Count("*")))
    assert by_queue == {"imports": 2, "emails": 4}
    # A queue claimed alone comes back known (a capped one always is); several together not.
    assert sorted(c.queue for c in claimed) == ["", "", "", "", "imports", "imports"]


def test_a_queue_at_its_cap_is_passed_over_and_the_others_still_claimed():
    TaskFactory.create_batch(3, queue="imports", priority=10)
    TaskFactory.create_batch(3, queue="emails")
    assert len(claim(10, [(["imports"], 0), (["emails"], None)])) == 3
    assert set(Task.objects.running().values_list("queue", flat=True)) == {"emails"}
    assert Task.objects.pending().filter(queue="imports").count() == 3


def test_the_wanted_count_is_shared_in_turn_and_never_passed():
    TaskFactory.create_batch(4, queue="imports")
    TaskFactory.create_batch(4, queue="emails")
    # The first group takes what it may; what it leaves of the limit goes to the next.
    claimed = claim(3, [(["emails"], 8), (["imports"], 2)])
    assert [c.queue for c in claimed] == ["emails"] * 3
    Task.objects.update(status=Status.PENDING, worker_id="")
    claimed = claim(3, [(["imports"], 2), (["emails"], 8)])
    assert [c.queue for c in claimed] == ["imports", "imports", "emails"]


def test_successes_are_recorded_with_a_claim_of_many_groups():
    done = TaskFactory(running=True, worker_id="w1", attempts=1)
    TaskFactory(queue="imports")
    TaskFactory(queue="emails")
    TaskFactory(queue="default", priority=-1)
    success = Success(done.pk, 1, "w1", None, timezone.now())
    claimed, recorded = claiming.claim_and_record(
        "w1",
        5,
        [success],
        groups=[(["imports"], 1), (["default", "emails"], None)],
        lease_seconds=30,
    )
    assert recorded == {done.pk}
    assert sorted(c.queue for c in claimed) == ["", "", "imports"]
    done.refresh_from_db()
    assert done.status == Status.SUCCEEDED


@pytest.mark.django_db(transaction=True)  # the claim thread's own connection sees the rows
def test_the_claimer_never_holds_more_than_a_cap():
    TaskFactory.create_batch(6, queue="imports")
    TaskFactory.create_batch(6, queue="emails")
    held = []
    read, write = os.pipe()
    claimer = Claimer("w1", ["emails", "imports"], 30, write, retry=helpers.retry,
                      caps=QueueCaps({"imports": 2}), holding=lambda: held)  # fmt: skip
    try:
        for _ in range(3):
            claimer.start(4, [])
            held += claimer.collect(wait=True)
        imports = [c for c in held if c.queue == "imports"]
        assert len(imports) == 2  # three claims of 4: the cap held them at 2
        assert len(held) == 6 + 2  # every e-mail, two imports
        held.remove(imports[0])  # one import reported: room for one more
        claimer.start(4, [])
        more = claimer.collect(wait=True)
        assert [c.queue for c in more] == ["imports"]
    finally:
        claimer.close()
        os.close(read)
        os.close(write)


def test_a_worker_refuses_caps_it_cannot_keep():
    with pytest.raises(ValueError, match="from 1 to the worker's concurrency \\(2\\), got 3"):
        Worker(queues=["imports"], queue_caps={"imports": 3}, concurrency=2)
    with pytest.raises(ValueError, match="not among the worker's queues"):
        Worker(queues=["emails"], queue_caps={"imports": 1}, concurrency=2)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--queues", "imports:12", "--concurrency", "10"], "the cap of the queue 'imports' is 12"),
        (["--queues", "imports:5", "--concurrency", "4"], "lower the cap or raise --concurrency"),
    ],
)
def test_runworker_refuses_a_cap_above_its_concurrency(args, message):
    with pytest.raises(CommandError, match=message) as refused:
        call_command("runworker", *args)
    assert refused.value.returncode == 2  # a usage error, as the other bad values of --queues


def test_runworker_refuses_a_cap_above_the_default_concurrency(settings):
    settings.JOBS_CONCURRENCY = 3
    with pytest.raises(CommandError, match=r"above the worker's concurrency \(3,"):
        call_command("runworker", "--queues", "imports:4")
