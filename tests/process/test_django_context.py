"""A Django ``@task(takes_context=True)`` on a real worker: its progress in the status view's
JSON, and the view's Cancel stopping it at its next checkpoint."""

import pytest
from django.urls import reverse

from jobs.backends import TaskResultStatus
from jobs.models import Task
from jobs.states import Status
from tests.conftest import wait_for
from tests.helpers import staff
from tests.testapp import django_tasks

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_status_view_shows_its_progress_and_its_cancel_stops_it(start_worker, client):
    result = django_tasks.import_until_cancelled.enqueue(999)
    client.force_login(staff("view_task", "cancel_task"))
    status_url = reverse("jobs:task-status", args=[result.id])
    start_worker("--concurrency", "1")

    def reported():
        body = client.get(status_url).json()
        return body if body["progress"]["current"] else None

    body = wait_for(reported, timeout=30, message="the task's progress in the status view")
    assert body["status"] == "running"
    assert body["progress"] == {
        "percent": 33,
        "current": 333,
        "total": 999,
        "message": "Imported 333 of 999 rows",
    }
    assert body["message"] == "Imported 333 of 999 rows"
    assert body["attempts"] == 1
    assert body["can_cancel"] is True

    action = client.post(reverse("jobs:task-action", args=[result.id]), {"action": "cancel"})
    assert action.json()["message"] == "Cancelling…"
    wait_for(
        lambda: Task.objects.get(pk=result.id).status == Status.CANCELLED,
        timeout=15,
        message="the task stopped at its next checkpoint",
    )
    body = client.get(status_url).json()
    assert (body["status"], body["message"], body["is_finished"]) == (
        "cancelled",
        "Cancelled by staff.",  # not its owner: the page says who
        True,
    )
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[-1].exception_class_path == "jobs.exceptions.TaskCancelled"
