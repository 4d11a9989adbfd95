"""What the owner reads after a cancel or a requeue: the truth about the task now."""

import pytest
from django.urls import reverse

from jobs import transitions
from jobs.states import Status
from tests.factories import MemberFactory, TaskFactory
from tests.helpers import run_next
from tests.testapp import tasks as test_tasks

pytestmark = pytest.mark.django_db


def test_a_task_cancelled_while_retrying_no_longer_promises_another_try(client):
    owner = MemberFactory()
    task = test_tasks.always_transient.using(owner=owner).enqueue()
    task = run_next()
    assert task.status == Status.RETRYING
    retry_message = task.last_error
    assert "we will retry" in retry_message

    assert transitions.cancel(task) is transitions.CancelOutcome.CANCELLED

    task.refresh_from_db()
    assert task.status == Status.CANCELLED
    assert task.last_error == "Cancelled."
    assert len(task.error_details) == 1  # the failed attempt stays on record for developers
    client.force_login(owner)
    body = client.get(reverse("jobs:task-status", args=[task.pk])).json()
    assert retry_message not in (body["message"], body["error"])
    assert body["error"] == "Cancelled."


def test_cancelling_many_retrying_tasks_replaces_each_ones_retry_message():
    retrying = TaskFactory.create_batch(
        3, retrying=True, last_error="Something went wrong on our side. We will try again shortly."
    )
    transitions.cancel_many(TaskFactory._meta.model.objects.filter(pk__in=[t.pk for t in retrying]))
    for task in retrying:
        task.refresh_from_db()
        assert (task.status, task.last_error) == (Status.CANCELLED, "Cancelled.")


@pytest.mark.parametrize("trait", ["failed", "cancelled"])
def test_a_requeued_task_starts_its_progress_bar_again(client, trait):
    owner = MemberFactory()
    task = TaskFactory(
        owner=owner,
        progress_current=60,
        progress_total=100,
        progress_message="Imported 60 of 100 rows",
        steps={"validate": {"total": 100}},
        **{trait: True},
    )
    assert transitions.requeue(task)

    task.refresh_from_db()
    assert task.status == Status.PENDING
    assert (task.progress_current, task.progress_total, task.progress_message) == (0, None, "")
    assert task.result is None
    assert not task.result_public
    # Recorded steps stay, so the new run resumes after them as a retry would.
    assert task.steps == {"validate": {"total": 100}}
    client.force_login(owner)
    body = client.get(reverse("jobs:task-status", args=[task.pk])).json()
    assert body["progress"] == {"percent": None, "current": 0, "total": None, "message": ""}
    assert body["message"] == "Waiting to start…"
