"""The completer against the database: held successes written on their own, or by a claim."""

import os
from datetime import UTC, datetime

import pytest

from jobs.db import retry_on_database_error
from jobs.models import Task
from jobs.states import Status
from jobs.transitions import Success
from jobs.worker.claimer import Claimer
from jobs.worker.completer import Completer
from tests import helpers
from tests.factories import TaskFactory

WORKER_ID = "host:1:completer"


def retry(operation, what, **options):
    return retry_on_database_error(operation, what=what, model=Task, **options)


def reported(task, result) -> Success:
    return Success(task.pk, task.attempts, task.worker_id, result, datetime.now(UTC))


@pytest.mark.django_db
def test_a_flush_records_every_held_success_with_its_result():
    TaskFactory.create_batch(2)
    first, second = helpers.claim(WORKER_ID, 2, lease_seconds=60)
    completer = Completer(retry=retry)
    completer.add(reported(first, {"rows": 3}))
    completer.add(reported(second, None))
    completer.flush()
    assert completer.task_ids() == []
    for task in (first, second):
        task.refresh_from_db()
        assert task.status == Status.SUCCEEDED
    assert first.result == {"rows": 3}


@pytest.mark.django_db
def test_a_success_of_an_attempt_no_longer_running_here_is_not_recorded():
    """Rescued and claimed again meanwhile (its lease lapsed): the newer attempt is left alone."""
    TaskFactory()
    (task,) = helpers.claim(WORKER_ID, 1, lease_seconds=60)
    Task.objects.filter(pk=task.pk).update(attempts=2, worker_id="another-worker")
    completer = Completer(retry=retry)
    completer.add(reported(task, 1))
    completer.flush()
    task.refresh_from_db()
    assert (task.status, task.attempts, task.worker_id) == (Status.RUNNING, 2, "another-worker")


@pytest.mark.django_db(transaction=True)  # the claim thread has a connection of its own
def test_held_successes_are_written_by_the_next_claim_in_its_statement():
    TaskFactory()
    (done,) = helpers.claim(WORKER_ID, 1, lease_seconds=60)
    waiting = TaskFactory()
    completer = Completer(retry=retry)
    completer.add(reported(done, 7))
    wake_read, wake_write = os.pipe()
    claimer = Claimer(WORKER_ID, [], 60, wake_write, retry=retry)
    try:
        claimer.start(5, completer.take())
        claimed = claimer.collect(wait=True)
        completer.claim_done(recorded=True)
    finally:
        claimer.close()
        os.close(wake_read)
        os.close(wake_write)
    assert [c.id for c in claimed] == [waiting.pk]
    assert completer.task_ids() == []
    done.refresh_from_db()
    assert (done.status, done.result) == (Status.SUCCEEDED, 7)
