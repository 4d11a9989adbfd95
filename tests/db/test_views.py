"""The JSON status view, the owner's actions, and the progress template tag."""

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.template import Context, Template
from django.test import Client, RequestFactory
from django.urls import reverse
from django.utils import timezone

from jobs import transitions
from jobs.humanize import moment_text
from jobs.models import Task
from jobs.states import Status
from jobs.tasks.retry import GENERIC_FAILURE_MESSAGE
from tests.factories import TaskFactory, UserFactory
from tests.helpers import run_next, staff
from tests.testapp import tasks

pytestmark = pytest.mark.django_db


def status_url(task_or_id):
    return reverse("jobs:task-status", args=[getattr(task_or_id, "pk", task_or_id)])


def action_url(task):
    return reverse("jobs:task-action", args=[task.pk])


@pytest.fixture
def owner():
    return UserFactory(username="owner")


@pytest.fixture
def owner_client(client, owner):
    client.force_login(owner)
    return client


def test_the_owner_reads_status_progress_attempts_and_an_estimate(owner_client, owner):
    started = timezone.now() - timedelta(seconds=30)
    task = TaskFactory(
        running=True,
        owner=owner,
        summary="Import of contacts.csv",
        started_at=started,
        progress_current=600,
        progress_total=1000,
        progress_message="Imported 600 of 1,000 rows",
    )
    response = owner_client.get(status_url(task))

    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    body = response.json()
    assert body["id"] == str(task.pk)
    assert body["name"] == "tests.testapp.tasks.add"
    assert body["summary"] == "Import of contacts.csv"
    assert body["status"] == "running"
    assert body["progress"] == {
        "percent": 60,
        "current": 600,
        "total": 1000,
        "message": "Imported 600 of 1,000 rows",
    }
    assert body["message"] == "Imported 600 of 1,000 rows"
    assert (body["attempts"], body["max_attempts"]) == (1, 3)
    # 600 rows in ~30 s: the other 400 take ~20 s more.
    assert 18 <= body["eta_seconds"] <= 22
    assert body["can_cancel"] is True
    assert body["can_retry"] is False
    assert body["error"] is None
    assert body["started_at"] == started.isoformat()
    assert body["finished_at"] is None
    assert body["urls"] == {"status": status_url(task), "action": action_url(task)}


def test_holders_of_the_view_permission_read_anyones_task(client, owner):
    task = TaskFactory(owner=owner)
    operator = UserFactory(username="operator")
    operator.user_permissions.add(Permission.objects.get(codename="view_task"))
    client.force_login(operator)
    assert client.get(status_url(task)).json()["id"] == str(task.pk)


def test_staff_without_permissions_see_nothing_of_others(client, owner):
    task = TaskFactory(owner=owner, failed=True)
    client.force_login(UserFactory(username="operator", is_staff=True))
    assert client.get(status_url(task)).json() == {"error": "No such task."}
    assert client.post(action_url(task), {"action": "retry"}).status_code == 404
    task.refresh_from_db()
    assert task.status == Status.FAILED


@pytest.mark.parametrize(
    "task_id",
    ["foreign", "unknown", "not-a-uuid", "1234", "'; DROP TABLE jobs_task; --"],
)
def test_foreign_unknown_and_malformed_ids_get_the_same_404(owner_client, task_id):
    foreign = TaskFactory(owner=UserFactory(username="someone-else"))
    ids = {"foreign": foreign.pk, "unknown": "0b9e7a62-1f43-4c51-9d4a-3f3f5a1c0d11"}
    response = owner_client.get(status_url(ids.get(task_id, task_id)))
    assert response.status_code == 404
    assert response.json() == {"error": "No such task."}
    assert "no-store" in response["Cache-Control"]


def test_an_anonymous_visitor_gets_404_not_a_login_redirect(client, owner):
    task = TaskFactory(owner=owner)
    assert client.get(status_url(task)).status_code == 404
    assert client.post(action_url(task), {"action": "cancel"}).status_code == 404
    task.refresh_from_db()
    assert task.status == Status.PENDING


def test_a_task_without_owner_is_seen_only_by_viewers(owner_client):
    assert owner_client.get(status_url(TaskFactory(owner=None))).status_code == 404


def test_an_unexpected_error_shows_a_generic_message_and_never_a_traceback(owner_client, owner):
    task = tasks.buggy.using(owner=owner).enqueue().record
    run_next()
    response = owner_client.get(status_url(task))
    text = response.content.decode()
    body = json.loads(text)
    assert body["status"] == "failed"
    assert body["error"] == GENERIC_FAILURE_MESSAGE
    assert body["message"] == GENERIC_FAILURE_MESSAGE
    assert body["can_retry"] is True
    for leak in ("Traceback", "KeyError", "missing", "error_details", "tasks.py"):
        assert leak not in text


def test_a_permanent_error_shows_its_message_and_offers_no_retry(owner_client, owner):
    task = tasks.bad_file.using(owner=owner).enqueue().record
    run_next()
    body = owner_client.get(status_url(task)).json()
    assert body["error"] == "Unsupported file format: please upload a CSV"
    assert body["can_retry"] is False
    assert "image/png" not in json.dumps(body)  # the developer detail stays in the record


def test_the_result_is_shown_only_when_the_task_marked_it_public(owner_client, owner):
    private = TaskFactory(succeeded=True, owner=owner, result={"secret": 1})
    public = TaskFactory(succeeded=True, owner=owner, result={"url": "/r/1"}, result_public=True)
    assert owner_client.get(status_url(private)).json()["result"] is None
    body = owner_client.get(status_url(public)).json()
    assert body["result"] == {"url": "/r/1"}
    assert body["progress"]["percent"] == 100
    assert body["is_finished"] is True


def test_the_owner_retries_a_failed_task_keeping_its_error_history(owner_client, owner):
    task = tasks.buggy.using(owner=owner).enqueue().record
    run_next()
    response = owner_client.post(action_url(task), {"action": "retry"})
    assert response.status_code == 200
    assert response.json()["status"] == "pending"
    task.refresh_from_db()
    assert task.status == Status.PENDING
    assert len(task.error_details) == 1


def test_a_task_that_cannot_be_retried_is_refused_with_409(owner_client, owner):
    permanent = tasks.bad_file.using(owner=owner).enqueue().record
    run_next()
    succeeded = TaskFactory(succeeded=True, owner=owner)
    for task in (permanent, succeeded):
        response = owner_client.post(action_url(task), {"action": "retry"})
        assert response.status_code == 409
        assert response.json()["action_message"] == "This task cannot be retried."
    assert Task.objects.get(pk=succeeded.pk).status == Status.SUCCEEDED


def test_retrying_a_cancelled_task_is_refused_saying_why_and_what_to_do(client, owner):
    cancelled = TaskFactory(cancelled=True, owner=owner)
    operator = staff("view_task", "retry_task", username="operator")
    for user in (owner, operator):
        client.force_login(user)
        response = client.post(action_url(cancelled), {"action": "retry"})
        assert response.status_code == 409
        assert response.json()["action_message"] == (
            "A cancelled task cannot be retried here: enqueue it again, or ask an operator to "
            "retry it in the admin."
        )
        assert response.json()["can_retry"] is False
    assert Task.objects.get(pk=cancelled.pk).status == Status.CANCELLED


def test_the_owner_cancels_a_pending_task_at_once(owner_client, owner):
    task = TaskFactory(owner=owner)
    body = owner_client.post(action_url(task), {"action": "cancel"}).json()
    assert body["status"] == "cancelled"
    assert body["can_cancel"] is False
    assert Task.objects.get(pk=task.pk).status == Status.CANCELLED


def test_cancelling_a_running_task_asks_it_to_stop(owner_client, owner):
    task = TaskFactory(running=True, owner=owner)
    body = owner_client.post(action_url(task), {"action": "cancel"}).json()
    assert body["status"] == "running"
    assert body["cancel_requested"] is True
    assert body["message"] == "Cancelling…"
    assert body["action_message"] == "Cancelling…"
    assert Task.objects.get(pk=task.pk).cancel_requested_at is not None


def test_a_finished_task_cannot_be_cancelled(owner_client, owner):
    task = TaskFactory(succeeded=True, owner=owner)
    assert owner_client.post(action_url(task), {"action": "cancel"}).status_code == 409


def test_another_user_cannot_act_on_a_task(client, owner):
    task = TaskFactory(owner=owner)
    client.force_login(UserFactory(username="mallory"))
    assert client.post(action_url(task), {"action": "cancel"}).status_code == 404
    assert Task.objects.get(pk=task.pk).status == Status.PENDING


def test_actions_need_a_csrf_token(owner):
    task = TaskFactory(owner=owner)
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    assert client.post(action_url(task), {"action": "cancel"}).status_code == 403
    assert Task.objects.get(pk=task.pk).status == Status.PENDING

    client.get("/")  # the demo's page sets the CSRF cookie
    token = client.cookies["csrftoken"].value
    response = client.post(action_url(task), {"action": "cancel"}, HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 200


def test_an_unknown_action_is_a_400_and_methods_are_checked(owner_client, owner):
    task = TaskFactory(owner=owner)
    assert owner_client.post(action_url(task), {"action": "delete"}).status_code == 400
    assert owner_client.get(action_url(task)).status_code == 405
    assert owner_client.post(status_url(task)).status_code == 405


def test_a_plain_form_post_redirects_back_to_a_safe_next_url(owner_client, owner):
    task = TaskFactory(owner=owner)
    response = owner_client.post(action_url(task), {"action": "cancel", "next": "/tasks/"})
    assert response.status_code == 302
    assert response["Location"] == "/tasks/"
    other = TaskFactory(owner=owner)
    response = owner_client.post(
        action_url(other), {"action": "cancel", "next": "https://evil.example.com/"}
    )
    assert response.status_code == 200  # an unsafe next is ignored: JSON instead


def render_progress(task, user):
    request = RequestFactory().get("/tasks/")
    request.user = user
    template = Template("{% load jobs_progress %}{% task_progress task %}")
    return template.render(Context({"task": task, "request": request, "csrf_token": "tok"}))


def test_the_tag_renders_an_accessible_bar_and_the_state_as_of_rendering(owner):
    task = TaskFactory(
        running=True,
        owner=owner,
        summary="Import of contacts.csv",
        progress_current=600,
        progress_total=1000,
        progress_message="Imported 600 of 1,000 rows",
    )
    html = render_progress(task, owner)
    assert 'role="progressbar"' in html
    assert 'aria-valuemin="0"' in html
    assert 'aria-valuemax="100"' in html
    assert 'aria-valuenow="60"' in html
    assert 'aria-label="Progress of Import of contacts.csv"' in html
    assert "Imported 600 of 1,000 rows" in html
    assert f'data-status-url="{status_url(task)}"' in html
    assert 'name="csrfmiddlewaretoken" value="tok"' in html
    # Each button names its task; shown: the owner may cancel.
    assert 'data-jobs-cancel aria-label="Cancel Import of contacts.csv">' in html
    assert 'data-jobs-retry aria-label="Retry Import of contacts.csv" hidden>' in html
    # The live region starts empty (nothing is announced on load), the ETA outside it.
    assert '<p class="jobs-announce" aria-live="polite" data-jobs-announce></p>' in html
    assert html.count("aria-live") == 1


def test_the_tag_leaves_out_aria_valuenow_when_progress_is_unknown(owner):
    html = render_progress(TaskFactory(owner=owner), owner)
    assert "aria-valuenow" not in html
    assert "Waiting to start" in html


def test_the_assets_tag_ships_the_script_and_stylesheet():
    html = Template("{% load jobs_progress %}{% task_progress_assets %}").render(Context())
    assert 'src="/static/jobs/progress.js"' in html
    assert 'href="/static/jobs/progress.css"' in html


def test_a_retrying_task_says_which_attempt_failed_and_when_the_next_is(client, owner):
    now = timezone.now()
    task = TaskFactory(
        owner=owner,
        status=Status.RETRYING,
        attempts=2,
        max_attempts=5,
        last_error="The mail server did not answer.",
        run_after=now + timedelta(seconds=30),
    )
    client.force_login(owner)
    body = client.get(status_url(task)).json()
    assert body["message"].startswith(
        "Attempt 2 of 5 failed: The mail server did not answer. Next try in "
    )
    assert moment_text(task.run_after) in body["message"]


def test_a_task_cancelled_by_an_operator_says_who_and_by_the_owner_does_not(client, owner):
    operator = staff("view_task", "cancel_task", username="ops")
    by_operator, by_owner = TaskFactory(owner=owner), TaskFactory(owner=owner)
    client.force_login(operator)
    client.post(action_url(by_operator), {"action": "cancel"})
    client.force_login(owner)
    client.post(action_url(by_owner), {"action": "cancel"})
    first, second = (client.get(status_url(t)).json() for t in (by_operator, by_owner))
    assert (first["status"], first["message"], first["cancelled_by"]) == (
        "cancelled", "Cancelled by ops.", "ops",
    )  # fmt: skip
    assert (second["message"], second["cancelled_by"]) == ("Cancelled.", None)
    # Retried, it is no longer anyone's cancellation.
    by_operator.refresh_from_db()
    assert by_operator.cancelled_by == operator
    transitions.requeue_many(Task.objects.filter(pk=by_operator.pk))
    by_operator.refresh_from_db()
    assert by_operator.cancelled_by is None
