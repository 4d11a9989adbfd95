"""The per-queue caps of one worker, alone: rooms from what it holds, groups in turn."""

import uuid

from jobs.worker.queue_caps import QueueCaps, cap_problem
from jobs.worker.wire import Claimed


def claimed(queue=""):
    return Claimed(uuid.uuid4(), 1, "w", "tests.testapp.tasks.add", "default", b"{}", queue)


def test_rooms_count_the_capped_tasks_held_and_free_as_they_leave():
    caps = QueueCaps({"imports": 2, "emails": 8})
    first, second = claimed("imports"), claimed("imports")
    mail = [claimed("emails") for _ in range(3)]
    caps.note([first, second, *mail, claimed("")])
    assert caps.rooms([first, second, *mail]) == {"imports": 0, "emails": 5}
    # The first import reported (or lost, or handed back): no longer held, its room is free.
    assert caps.rooms([second, *mail]) == {"imports": 1, "emails": 5}
    assert caps.held() == {"imports": 1, "emails": 3}
    # Once gone it stays gone, even were the same id held again by mistake.
    assert caps.rooms([first, second]) == {"imports": 1, "emails": 8}


def test_tasks_of_queues_without_a_cap_are_not_counted():
    caps = QueueCaps({"imports": 2})
    other = [claimed("emails"), claimed("")]
    caps.note(other)
    assert caps.rooms(other) == {"imports": 2}


def test_groups_take_each_capped_queue_alone_and_the_others_together_in_turn():
    caps = QueueCaps({"imports": 2, "emails": 8})
    queues = ["default", "emails", "imports", "reports"]
    seen = [caps.groups(queues, []) for _ in range(3)]
    for groups in seen:
        assert sorted(map(str, groups)) == sorted(
            map(str, [(["imports"], 2), (["emails"], 8), (["default", "reports"], None)])
        )
    assert len({str(groups[0]) for groups in seen}) == 3  # each group first in turn


def test_a_worker_whose_queues_are_all_capped_has_no_uncapped_group():
    caps = QueueCaps({"imports": 2})
    assert caps.groups(["imports"], []) == [(["imports"], 2)]


def test_cap_problems():
    assert cap_problem({"imports": 2}, ["imports"], 10) is None
    assert cap_problem({}, [], 10) is None
    assert "from 1 to the worker's concurrency (10), got 11" in cap_problem(
        {"imports": 11}, ["imports"], 10
    )
    assert "got 0" in cap_problem({"imports": 0}, ["imports"], 10)
    assert "got True" in cap_problem({"imports": True}, ["imports"], 10)
    assert "got 2.0" in cap_problem({"imports": 2.0}, ["imports"], 10)
    assert "not among the worker's queues" in cap_problem({"imports": 2}, ["emails"], 10)
    assert "not among the worker's queues" in cap_problem({"imports": 2}, [], 10)
