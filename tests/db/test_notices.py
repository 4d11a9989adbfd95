"""Successes of Django's ``@task`` written by the supervisor, and Django's ``task_finished`` sent
by the child on the supervisor's word (jobs.worker.notices), or by the supervisor for a child
that is gone.

Without a receiver of jobs' own signals (the demo's is disconnected here), a child reports such
a success ``notify`` and writes nothing; it calls Django's hook once told the row is written.
"""

import json
import logging
from datetime import UTC, datetime
from multiprocessing import Pipe

import django
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs import transitions
from jobs.backends import TaskResultStatus, task_finished
from jobs.models import Task
from jobs.states import Status
from jobs.worker.batches import _BatchRunner
from jobs.worker.notices import Notices
from jobs.worker.wire import NOTIFY, Claimed, Slot, encode_task
from tests.factories import TaskFactory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_success_receivers")]

DJANGO_LOGGER = "django.tasks" if django.VERSION >= (6,) else "django_tasks"


def running_multiply(a, b):
    task = TaskFactory(
        running=True,
        name="tests.testapp.django_tasks.multiply",
        backend="default",
        payload={"args": [a, b], "kwargs": {}},
    )
    return Task.objects.get(pk=task.pk)


@pytest.fixture
def finished():
    """What each task_finished receiver saw: the result's id and status, and the row's status."""
    seen = []

    def receiver(sender, task_result, **kwargs):
        seen.append(
            (task_result.id, task_result.status, Task.objects.get(pk=task_result.id).status)
        )

    task_finished.connect(receiver)
    yield seen
    task_finished.disconnect(receiver)


class Runner:
    """A child's batch runner in this process, on a real pipe: what it replies, batch by batch."""

    def __init__(self):
        self.supervisor, child = Pipe()
        self.slot = Slot()
        self.runner = _BatchRunner(child, self.slot, None, None)
        self.number = 0

    def run(self, tasks, **notice):
        self.number += 1
        message = {"batch": self.number, "budget": 10.0, "tasks": tasks}
        message.update({key: [str(i) for i in ids] for key, ids in notice.items()})
        self.runner.run(json.loads(json.dumps(message)))
        return json.loads(self.supervisor.recv_bytes())


def rows(*tasks):
    return [json.loads(encode_task(task)) for task in tasks]


def success(task, result):
    return transitions.Success(task.pk, task.attempts, task.worker_id, result, datetime.now(UTC))


def test_the_child_writes_nothing_and_finishes_each_once_on_the_word(finished, caplog):
    tasks = [running_multiply(n, 10) for n in range(3)]
    child = Runner()
    caplog.set_level(logging.INFO, logger=DJANGO_LOGGER)
    with CaptureQueriesContext(connection) as queries:
        reply = child.run(rows(*tasks))
    assert queries.captured_queries == []  # no statement in the child for its successes
    assert [entry[:3] for entry in reply["results"]] == [[n, NOTIFY, n * 10] for n in range(3)]
    assert finished == []  # not before the row is written
    applied = transitions.succeed_many([success(t, n * 10) for n, t in enumerate(tasks)])
    assert applied == {task.pk for task in tasks}

    reply = child.run([], finished=[task.pk for task in tasks])

    assert reply["results"] == []
    assert reply["final"]
    assert finished == [
        (str(task.pk), TaskResultStatus.SUCCESSFUL, Status.SUCCEEDED) for task in tasks
    ]
    ends = [r.getMessage() for r in caplog.records if "state=SUCCESSFUL" in r.getMessage()]
    assert ends == [f"Task id={t.pk} path={t.name} state=SUCCESSFUL" for t in tasks]
    child.run([], finished=[task.pk for task in tasks])  # told twice: sent once all the same
    assert len(finished) == 3
    assert child.runner.awaiting == {}


def test_the_word_comes_before_the_tasks_of_its_batch(finished):
    first, second = running_multiply(1, 1), running_multiply(2, 2)
    child = Runner()
    child.run(rows(first))
    transitions.succeed_many([success(first, 1)])
    reply = child.run(rows(second), finished=[first.pk])
    assert finished == [(str(first.pk), TaskResultStatus.SUCCESSFUL, Status.SUCCEEDED)]
    assert [entry[:2] for entry in reply["results"]] == [[0, NOTIFY]]
    assert list(child.runner.awaiting) == [str(second.pk)]


def test_a_success_no_longer_this_workers_finishes_with_nothing(finished):
    lapsed = running_multiply(4, 4)
    child = Runner()
    child.run(rows(lapsed))
    Task.objects.filter(pk=lapsed.pk).update(worker_id="another-worker")  # rescued meanwhile

    child.run([], refused=[lapsed.pk])

    assert finished == []
    assert child.runner.awaiting == {}


def claimed_of(task):
    return Claimed(task.pk, task.attempts, task.worker_id, task.name, task.backend, b"{}")


class GoneChild:
    """A child the pool no longer has (recycled, lost): only what ``Notices`` reads of it."""

    notice_finished: list
    notice_refused: list
    noticing: list

    def __init__(self):
        self.notice_finished, self.notice_refused, self.noticing = [], [], []


def retry(operation, what, **options):
    return operation()


def test_the_supervisor_finishes_what_a_gone_child_waited_for(finished):
    done, other_attempt = running_multiply(5, 5), running_multiply(6, 6)
    notices = Notices(retry=retry, children=list)  # no child alive
    gone = GoneChild()
    notices.add(gone, claimed_of(done), 2.0)
    notices.add(gone, claimed_of(other_attempt), 2.0)
    applied = transitions.succeed_many([success(done, 25), success(other_attempt, 36)])
    # Another worker's attempt since (the row was rescued, run again and finished there).
    Task.objects.filter(pk=other_attempt.pk).update(attempts=other_attempt.attempts + 1)

    notices.recorded([success(done, 25), success(other_attempt, 36)], applied)

    assert finished == [(str(done.pk), TaskResultStatus.SUCCESSFUL, Status.SUCCEEDED)]
    notices.recorded([success(done, 25)], applied)  # told again: nothing more is sent
    assert len(finished) == 1
