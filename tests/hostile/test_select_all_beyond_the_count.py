"""The confirmation of "select all" beyond the exact count: what it pins, what it refuses.

The list's exact count is lowered to 5 here, so a handful of tasks is "beyond the count" (the
20,000-task case, with memory bounds, is in test_bulk_actions.py).
"""

import pytest
from django.contrib.auth.models import Permission
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from jobs.admin import paginator, select_all
from jobs.models import Task
from jobs.states import Status
from tests.factories import TaskFactory
from tests.helpers import staff

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:jobs_task_changelist")


@pytest.fixture(autouse=True)
def exact_count_of_five(monkeypatch):
    monkeypatch.setattr(paginator, "EXACT_COUNT_LIMIT", 5)


@pytest.fixture
def canceller(client):
    client.force_login(staff("view_task", "cancel_task", "retry_task", username="canceller"))
    return client


def ask(client, action, url=CHANGELIST):
    first = Task.objects.order_by("pk").first()
    data = {"action": action, "select_across": "1", "index": "0"}
    return client.post(url, {**data, "_selected_action": [str(first.pk)]})


def confirmation(page, **changes):
    context = page.context
    data = {
        "action": context["action"],
        "select_across": "1",
        "_selected_action": context["selected"],
        context["counted_field"]: context["token"],
        "post": "yes",
    }
    return {**data, **changes}


def messages_of(response):
    return [str(m) for m in get_messages(response.wsgi_request)]


def is_confirmation_page(response):
    names = [t.name for t in getattr(response, "templates", [])]
    return "admin/jobs/task/confirm_select_all.html" in names


def test_retry_confirms_what_it_will_requeue_and_skip(canceller):
    TaskFactory.create_batch(6, failed=True)
    TaskFactory(succeeded=True)
    page = ask(canceller, "retry_tasks")
    assert page.context["plan"] == ["6 will be requeued", "1 will be skipped: already succeeded"]

    response = canceller.post(CHANGELIST, confirmation(page), follow=True)
    assert messages_of(response) == ["6 tasks requeued; 1 skipped: already succeeded"]
    assert Task.objects.filter(status=Status.PENDING).count() == 6


def test_a_running_task_reporting_progress_is_still_the_task_counted(canceller):
    TaskFactory.create_batch(6)
    running = TaskFactory(running=True)
    page = ask(canceller, "cancel_tasks")
    assert page.context["plan"] == ["6 will be cancelled", "1 running will be asked to stop"]
    # What the task's context writes when it reports progress.
    Task.objects.filter(pk=running.pk).update(progress_current=3, updated_at=timezone.now())

    response = canceller.post(CHANGELIST, confirmation(page), follow=True)
    assert messages_of(response) == ["6 tasks cancelled; 1 running task asked to stop"]
    running.refresh_from_db()
    assert running.cancel_requested_at is not None


def test_a_task_claimed_after_the_count_is_skipped_as_changed(canceller):
    tasks = TaskFactory.create_batch(6)
    page = ask(canceller, "cancel_tasks")
    # A worker claims one meanwhile (what the claim writes).
    now = timezone.now()
    claimed = Task.objects.filter(pk=tasks[0].pk)
    claimed.update(status=Status.RUNNING, started_at=now, updated_at=now, attempts=1)

    response = canceller.post(CHANGELIST, confirmation(page), follow=True)
    assert messages_of(response) == ["5 tasks cancelled; 1 skipped: changed since the count"]
    assert claimed.get().cancel_requested_at is None  # never counted running: left alone


@pytest.mark.parametrize("forgery", ["tampered", "other_action", "other_filters", "no_post"])
def test_a_forged_or_foreign_confirmation_counts_again_and_does_nothing(canceller, forgery):
    TaskFactory.create_batch(6, queue="a")
    TaskFactory.create_batch(6, queue="b")
    page = ask(canceller, "cancel_tasks", url=f"{CHANGELIST}?queue=a")
    data, url = confirmation(page), f"{CHANGELIST}?queue=a"
    if forgery == "tampered":
        data[select_all.COUNTED_FIELD] = data[select_all.COUNTED_FIELD].replace('"n":6', '"n":9')
        data[select_all.COUNTED_FIELD] += "x"
    elif forgery == "other_action":
        data["action"] = "retry_tasks"
    elif forgery == "other_filters":
        url = f"{CHANGELIST}?queue=b"
    else:
        del data["post"]

    response = canceller.post(url, data)
    assert is_confirmation_page(response)
    assert not Task.objects.exclude(status=Status.PENDING).exists()


def test_the_confirmation_needs_the_csrf_token():
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff("view_task", "cancel_task", username="canceller"))
    TaskFactory.create_batch(6)
    listing = client.get(CHANGELIST)
    csrf = listing.context["csrf_token"]
    first = Task.objects.order_by("pk").first()
    data = {"action": "cancel_tasks", "select_across": "1", "index": "0"}
    page = client.post(
        CHANGELIST, {**data, "_selected_action": [str(first.pk)], "csrfmiddlewaretoken": csrf}
    )
    assert is_confirmation_page(page)
    assert 'name="csrfmiddlewaretoken"' in page.content.decode()

    assert client.post(CHANGELIST, confirmation(page)).status_code == 403
    assert not Task.objects.exclude(status=Status.PENDING).exists()
    done = client.post(CHANGELIST, confirmation(page, csrfmiddlewaretoken=csrf), follow=True)
    assert messages_of(done) == ["6 tasks cancelled"]


def test_the_confirmation_checks_the_permission_again(canceller):
    TaskFactory.create_batch(6)
    page = ask(canceller, "cancel_tasks")
    user = page.wsgi_request.user
    user.user_permissions.remove(Permission.objects.get(codename="cancel_task"))

    response = canceller.post(CHANGELIST, confirmation(page), follow=True)
    assert response.status_code == 200
    assert not is_confirmation_page(response)
    assert not Task.objects.exclude(status=Status.PENDING).exists()


def test_a_user_without_the_view_permission_gets_no_confirmation(client):
    client.force_login(staff("cancel_task", username="blind"))
    TaskFactory.create_batch(6)
    assert ask(client, "cancel_tasks").status_code == 403
    assert not Task.objects.exclude(status=Status.PENDING).exists()
