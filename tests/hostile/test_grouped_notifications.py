"""A bulk cancel of one owner's long tasks leaves one banner on their next page, not thousands."""

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from demo_project.demo.models import Notification
from jobs.models import Task
from jobs.states import Status
from tests.factories import MemberFactory, TaskFactory
from tests.helpers import staff

REPORT = "demo_project.demo.tasks.build_report"


def banners(client):
    response = client.get(reverse("task-list"))
    assert response.status_code == 200
    return [str(m) for m in get_messages(response.wsgi_request)]


# transaction=True: the finish signals (and the notifications) are sent at commit, as in a request.
@pytest.mark.django_db(transaction=True)
def test_cancelling_thousands_of_an_owners_tasks_shows_one_summary_banner():
    owner = MemberFactory(username="owner")
    n = 2_000  # any count past the few shown one by one gives one banner; 2,000 keeps it quick
    Task.objects.bulk_create(TaskFactory.build_batch(n, name=REPORT, owner=owner))
    operator = Client()
    operator.force_login(staff("view_task", "cancel_task"))
    first = Task.objects.order_by("pk").first()
    operator.post(
        reverse("admin:jobs_task_changelist"),
        {
            "action": "cancel_tasks",
            "select_across": "1",
            "index": "0",
            "_selected_action": [str(first.pk)],
        },
    )
    assert Task.objects.filter(status=Status.CANCELLED).count() == n

    client = Client()
    client.force_login(owner)
    assert banners(client) == ["2,000 tasks cancelled"]
    assert banners(client) == []  # shown once
    assert not Notification.objects.filter(shown_at__isnull=True).exists()


@pytest.mark.django_db
def test_a_few_of_a_kind_are_shown_as_they_are_and_many_are_counted():
    owner = MemberFactory(username="owner")
    texts = {
        "done": ["Report A is done.", "Report B is done: Report ready."],
        "failed": [
            *(f"Report {i} failed: Something went wrong." for i in range(4)),
            "Report E failed: The export it read was cancelled.",  # still a failure
        ],
        "cancelled": ["Report C was cancelled.", "Report D was cancelled by ops."],
    }
    for kind, kind_texts in texts.items():
        for text in kind_texts:
            Notification.objects.create(
                user=owner, text=text, succeeded=kind == "done", cancelled=kind == "cancelled"
            )
    client = Client()
    client.force_login(owner)
    assert banners(client) == [
        "Report A is done.",
        "Report B is done: Report ready.",
        "Report C was cancelled.",
        "Report D was cancelled by ops.",
        "5 tasks failed: see My tasks for what went wrong",
    ]
