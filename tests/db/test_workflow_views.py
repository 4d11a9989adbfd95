"""A workflow's JSON status view, the owner's retry and cancel of it, and its template tag: the
task status view's rules (jobs.web.workflow_views)."""

import pytest
from django.contrib.auth.models import Permission
from django.template import Context, Template
from django.test import RequestFactory
from django.urls import reverse

import jobs
from jobs.models import Task, Workflow
from jobs.states import Status
from jobs.testing import drain
from tests.factories import TaskFactory, UserFactory, WorkflowFactory
from tests.helpers import staff
from tests.testapp import workflow_tasks as wt

pytestmark = pytest.mark.django_db

NOT_FOUND = {"error": "No such workflow."}


def status_url(workflow_or_id):
    return reverse("jobs:workflow-status", args=[getattr(workflow_or_id, "pk", workflow_or_id)])


def action_url(workflow):
    return reverse("jobs:workflow-action", args=[workflow.pk])


@pytest.fixture
def owner():
    return UserFactory(username="owner")


@pytest.fixture
def owner_client(client, owner):
    client.force_login(owner)
    return client


def test_the_owner_reads_the_batchs_progress_and_its_members(owner_client, owner):
    workflow = WorkflowFactory(
        owner=owner,
        summary="Import of 10 files",
        members=["succeeded"] * 6 + ["failed", "running", "pending", "blocked"],
    )
    response = owner_client.get(status_url(workflow))

    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    body = response.json()
    assert body["id"] == str(workflow.pk)
    assert (body["kind"], body["summary"], body["status"]) == (
        "batch",
        "Import of 10 files",
        "running",
    )
    assert body["is_finished"] is False
    assert body["message"] == "7 of 10 done, 1 failed."
    assert body["progress"] == {
        "percent": 70,
        "current": 7,
        "total": 10,
        "message": "7 of 10 done, 1 failed",
    }
    assert body["counts"]["succeeded"] == 6
    assert body["counts"]["running"] == 1
    assert body["counts"]["waiting"] == 2
    assert [member["summary"] for member in body["members"]] == [
        f"file{n}.csv" for n in range(1, 11)
    ]
    assert {member["status"] for member in body["members"]} == {
        "succeeded", "failed", "running", "pending", "blocked",
    }  # fmt: skip
    assert body["can_cancel"] is True
    assert body["can_retry"] is False  # running: its failed member is retried once it ends
    assert body["urls"] == {"status": status_url(workflow), "action": action_url(workflow)}


def test_a_real_batch_reports_its_callback_and_finishes(owner_client, owner):
    workflow = jobs.batch(
        [wt.double.s(n) for n in range(3)] + [wt.fail_now.s("bad file")],
        on_finish=wt.callback.s("finished"),
        owner=owner,
        summary="Four files",
    )
    body = owner_client.get(status_url(workflow)).json()
    assert body["callbacks"]["on_finish"]["status"] == "blocked"
    assert body["message"] == "0 of 4 done."

    drain()
    body = owner_client.get(status_url(workflow)).json()
    assert body["status"] == "failed"
    assert body["status_display"] == "Failed"
    assert body["is_finished"] is True
    assert body["message"] == "4 of 4 done, 1 failed."
    assert body["callbacks"]["on_finish"]["status"] == "succeeded"
    failed = [member for member in body["members"] if member["status"] == "failed"]
    assert [member["message"] for member in failed] == ["It failed: bad file"]
    assert body["can_retry"] is True
    assert body["can_cancel"] is False


def test_the_owner_retries_the_failed_members_only(owner_client, owner):
    workflow = jobs.batch([wt.double.s(1), wt.fail_now.s()], owner=owner)
    drain()
    response = owner_client.post(action_url(workflow), {"action": "retry"})
    assert response.status_code == 200
    body = response.json()
    assert body["action_message"] == "1 task queued again."
    assert body["status"] == "running"
    statuses = sorted(Task.objects.filter(workflow=workflow).values_list("status", flat=True))
    assert statuses == [Status.PENDING, Status.SUCCEEDED]

    # Running again: nothing to retry now, and saying so is a 409.
    again = owner_client.post(action_url(workflow), {"action": "retry"})
    assert again.status_code == 409
    assert again.json()["action_message"] == "This workflow cannot be retried."


def test_the_owner_cancels_a_running_batch_as_a_whole(owner_client, owner):
    workflow = jobs.batch(
        [wt.double.s(n) for n in range(3)], on_success=wt.callback.s("x"), owner=owner
    )
    response = owner_client.post(action_url(workflow), {"action": "cancel", "next": "/done/"})
    assert response.status_code == 302
    assert response["Location"] == "/done/"
    workflow.refresh_from_db()
    assert workflow.status == Workflow.State.CANCELLED
    assert set(Task.objects.filter(workflow=workflow).values_list("status", flat=True)) == {
        Status.CANCELLED
    }
    body = owner_client.get(status_url(workflow)).json()
    assert body["message"] == "Cancelled: 3 of 3 done, 3 cancelled."
    assert body["can_cancel"] is False


def test_an_unsafe_next_gets_json_not_a_redirect(owner_client, owner):
    workflow = WorkflowFactory(owner=owner, members=["pending"])
    response = owner_client.post(
        action_url(workflow), {"action": "cancel", "next": "https://evil.example/"}
    )
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"


def test_an_unknown_action_is_refused_and_changes_nothing(owner_client, owner):
    workflow = WorkflowFactory(owner=owner, members=["pending"])
    response = owner_client.post(action_url(workflow), {"action": "delete"})
    assert response.status_code == 400
    assert owner_client.get(action_url(workflow)).status_code == 405
    assert Task.objects.get(workflow=workflow).status == Status.PENDING


def test_holders_of_the_view_permission_read_anyones_workflow_but_act_only_with_more(client, owner):
    workflow = WorkflowFactory(owner=owner, members=["pending", "failed"])
    client.force_login(staff("view_task", username="viewer"))
    assert client.get(status_url(workflow)).json()["id"] == str(workflow.pk)
    body = client.get(status_url(workflow)).json()
    assert body["can_cancel"] is False
    refused = client.post(action_url(workflow), {"action": "cancel"})
    assert refused.status_code == 403
    assert refused.json() == {"error": "You may not cancel this workflow."}
    assert Workflow.objects.get(pk=workflow.pk).status == Workflow.State.RUNNING

    client.force_login(staff("view_task", "cancel_task", username="operator"))
    assert client.get(status_url(workflow)).json()["can_cancel"] is True
    assert client.post(action_url(workflow), {"action": "cancel"}).status_code == 200
    assert Workflow.objects.get(pk=workflow.pk).status == Workflow.State.CANCELLED


def test_retry_of_anothers_workflow_needs_the_retry_permission(client, owner):
    workflow = WorkflowFactory(owner=owner, failed=True, members=["succeeded", "failed"])
    client.force_login(staff("view_task", "cancel_task", username="canceller"))
    assert client.post(action_url(workflow), {"action": "retry"}).status_code == 403
    client.force_login(staff("view_task", "retry_task", username="retrier"))
    assert client.post(action_url(workflow), {"action": "retry"}).status_code == 200
    assert Workflow.objects.get(pk=workflow.pk).status == Workflow.State.RUNNING


def test_staff_without_permissions_see_nothing_of_others(client, owner):
    workflow = WorkflowFactory(owner=owner, members=["pending"])
    client.force_login(UserFactory(username="operator", is_staff=True))
    assert client.get(status_url(workflow)).json() == NOT_FOUND
    assert client.post(action_url(workflow), {"action": "cancel"}).status_code == 404
    assert Workflow.objects.get(pk=workflow.pk).status == Workflow.State.RUNNING


def test_an_anonymous_visitor_gets_404_not_a_login_redirect(client, owner):
    workflow = WorkflowFactory(owner=owner, members=["pending"])
    assert client.get(status_url(workflow)).status_code == 404
    assert client.post(action_url(workflow), {"action": "cancel"}).status_code == 404
    assert Workflow.objects.get(pk=workflow.pk).status == Workflow.State.RUNNING


@pytest.mark.parametrize(
    "workflow_id",
    [
        "foreign",
        "unknown",
        "a task's id",
        "not-a-uuid",
        "1234",
        "'; DROP TABLE jobs_workflow; --",
        "0b9e7a62-1f43-4c51-9d4a-3f3f5a1c0d11%00",
        "x" * 10_000,
    ],
)
def test_foreign_unknown_malformed_and_huge_ids_get_the_same_404(owner_client, owner, workflow_id):
    foreign = WorkflowFactory(owner=UserFactory(username="someone-else"))
    mine = TaskFactory(owner=owner)  # a task id is no workflow id
    ids = {
        "foreign": foreign.pk,
        "unknown": "0b9e7a62-1f43-4c51-9d4a-3f3f5a1c0d11",
        "a task's id": mine.pk,
    }
    url = status_url("placeholder").replace("placeholder", str(ids.get(workflow_id, workflow_id)))
    response = owner_client.get(url)
    assert response.status_code == 404
    assert response.json() == NOT_FOUND
    assert "no-store" in response["Cache-Control"]
    action = action_url(foreign).replace(str(foreign.pk), str(ids.get(workflow_id, workflow_id)))
    assert owner_client.post(action, {"action": "cancel"}).status_code == 404
    assert Workflow.objects.get(pk=foreign.pk).status == Workflow.State.RUNNING


def test_a_nul_in_the_id_is_a_404_on_every_database(owner_client):
    response = owner_client.get("/jobs/workflows/0b9e7a62-1f43-4c51-9d4a-3f3f5a1c0d11\x00/")
    assert response.status_code == 404


def test_a_workflow_without_owner_is_seen_only_by_viewers(owner_client):
    assert owner_client.get(status_url(WorkflowFactory(owner=None))).status_code == 404


def test_the_template_tag_renders_the_bar_that_progress_js_polls(owner):
    workflow = WorkflowFactory(
        owner=owner, summary="Import of 2 files", members=["succeeded", "pending"]
    )
    request = RequestFactory().get("/imports/")
    request.user = owner
    html = Template("{% load jobs_progress %}{% workflow_progress workflow %}").render(
        Context({"workflow": workflow, "request": request})
    )
    assert f'data-status-url="{status_url(workflow)}"' in html
    assert 'aria-valuenow="50"' in html
    assert 'aria-label="Progress of Import of 2 files"' in html
    assert "1 of 2 done." in html
    assert f'action="{action_url(workflow)}"' in html
    assert 'data-finished="false"' in html


def test_a_batch_that_names_its_members_says_so_in_its_status_and_its_bar(owner_client, owner):
    workflow = jobs.batch(
        [wt.double.s(n) for n in range(2)] + [wt.fail_now.s("bad file")],
        owner=owner,
        summary="Three files",
        noun="file",
        verb="imported",
    )
    body = owner_client.get(status_url(workflow)).json()
    assert body["message"] == "0 of 3 files imported."
    assert body["progress"]["message"] == "0 of 3 files imported"
    assert body["counts"]["unit"] == "files imported"
    drain()
    body = owner_client.get(status_url(workflow)).json()
    assert body["message"] == "2 of 3 files imported, 1 failed."  # the failed one was not
    request = RequestFactory().get("/imports/")
    request.user = owner
    html = Template("{% load jobs_progress %}{% workflow_progress workflow %}").render(
        Context({"workflow": Workflow.objects.get(pk=workflow.pk), "request": request})
    )
    assert "2 of 3 files imported, 1 failed." in html
    assert 'aria-valuenow="100"' in html  # the bar: every member finished


def test_a_batch_of_one_file_says_it_in_the_singular(owner_client, owner):
    workflow = jobs.batch([wt.double.s(1)], owner=owner, noun="file", verb="imported")
    assert owner_client.get(status_url(workflow)).json()["message"] == "0 of 1 file imported."
    drain()
    assert owner_client.get(status_url(workflow)).json()["message"] == "1 file imported."
    two = jobs.batch([wt.double.s(1), wt.double.s(2)], owner=owner, noun="file", verb="imported")
    drain()
    assert owner_client.get(status_url(two)).json()["message"] == "All 2 files imported."


@pytest.mark.parametrize(
    "words",
    [
        {"noun": "file\x00"},
        {"noun": "file", "verb": "\udcff"},
        {"noun": "f" * 500},
        {"verb": ""},
        {"noun": ["a", "b", "c"]},
    ],
)
def test_a_bad_noun_or_verb_is_refused_at_the_call_and_nothing_is_written(owner, words):
    with pytest.raises(jobs.PayloadError):
        jobs.batch([wt.double.s(1)], owner=owner, on_finish=wt.callback.s("x"), **words)
    with pytest.raises(jobs.PayloadError):
        jobs.chain(wt.double.s(1), wt.add_one.s(), owner=owner, **words)
    assert not Workflow.objects.exists()
    assert not Task.objects.exists()


def test_the_template_tag_offers_another_users_buttons_only_with_permissions(owner):
    workflow = WorkflowFactory(owner=owner, members=["pending"])
    request = RequestFactory().get("/")
    viewer = UserFactory(username="viewer")
    viewer.user_permissions.add(Permission.objects.get(codename="view_task"))
    request.user = viewer
    html = Template("{% load jobs_progress %}{% workflow_progress workflow %}").render(
        Context({"workflow": workflow, "request": request})
    )
    assert " hidden>Cancel</button>" in html  # a viewer without cancel_task
    request.user = owner
    html = Template("{% load jobs_progress %}{% workflow_progress workflow %}").render(
        Context({"workflow": workflow, "request": request})
    )
    assert " hidden>Cancel</button>" not in html


@pytest.mark.parametrize("kind", ["task", "workflow"])
def test_both_status_views_answer_alike_through_one_helper(client, owner, kind):
    """The task's and the workflow's views are jobs.web.owned's: the same headers for a polled
    page, the same refusals, in the same order, each naming its own kind of row."""
    row = (
        TaskFactory(owner=owner, succeeded=True)
        if kind == "task"
        else WorkflowFactory(owner=owner, succeeded=True, members=["succeeded"])
    )
    status = reverse(f"jobs:{kind}-status", args=[row.pk])
    action = reverse(f"jobs:{kind}-action", args=[row.pk])
    other = UserFactory(username="other")
    viewer = staff("view_task", username="viewer")
    missing = {"error": f"No such {kind}."}

    client.force_login(owner)
    answer = client.get(status)
    assert answer.status_code == 200
    assert "no-cache" in answer["Cache-Control"]
    assert "no-store" in answer["Cache-Control"]
    assert client.post(status).status_code == 405
    assert client.get(action).status_code == 405
    assert client.post(action, {"action": "explode"}).status_code == 400
    refused = client.post(action, {"action": "cancel"})
    assert refused.status_code == 409
    assert refused.json()["action_message"] == f"This {kind} cannot be cancelled."
    client.force_login(other)
    assert client.get(status).json() == missing
    assert client.post(action, {"action": "cancel"}).status_code == 404
    client.force_login(viewer)
    assert client.get(status).status_code == 200
    forbidden = client.post(action, {"action": "cancel"})
    assert forbidden.status_code == 403
    assert forbidden.json() == {"error": f"You may not cancel this {kind}."}
    client.logout()
    assert client.get(status).status_code == 404
