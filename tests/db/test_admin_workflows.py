"""The workflow admin (jobs.admin.workflows): members, what they wait for, callbacks, actions
on the whole workflow behind the task actions' permissions; the dashboard's blocked column."""

import pytest
from django.urls import reverse

import jobs
from jobs import signals
from jobs.models import Task, Workflow
from jobs.states import Status
from jobs.testing import drain
from tests.factories import TaskFactory, WorkflowFactory
from tests.helpers import staff
from tests.testapp import workflow_tasks as wt

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:jobs_workflow_changelist"


def page(workflow):
    return reverse("admin:jobs_workflow_change", args=[workflow.pk])


def test_the_workflow_page_shows_members_what_they_wait_for_and_the_callback(client):
    workflow = jobs.chain(wt.double.s(1), wt.add_one.s(), summary="Two steps")
    batch = jobs.batch([wt.double.s(2)], on_success=wt.callback.s("ok"), summary="One file")
    first = Task.objects.get(workflow=workflow, status=Status.PENDING)
    client.force_login(staff("view_task"))

    html = client.get(page(workflow)).content.decode()
    assert "0 of 2 done" in html
    assert "add_one" in html
    assert "double" in html
    assert f"double {first.pk} (pending)" in html  # what the second link waits for
    html = client.get(page(batch)).content.decode()
    assert "on_success" in html
    drain()
    html = client.get(page(batch)).content.decode()
    assert "1 of 1 done" in html


def test_the_workflow_pages_say_what_its_members_are(client):
    batch = jobs.batch([wt.double.s(2)], summary="One file", noun="file", verb="imported")
    client.force_login(staff("view_task"))
    assert "0 of 1 file imported" in client.get(page(batch)).content.decode()
    drain()
    assert "1 of 1 file imported" in client.get(reverse(CHANGELIST)).content.decode()


def test_the_task_page_shows_its_workflow_and_what_it_waits_for(client):
    workflow = jobs.chain(wt.double.s(1), wt.add_one.s(), summary="Two steps")
    first = Task.objects.get(workflow=workflow, status=Status.PENDING)
    second = Task.objects.get(workflow=workflow, status=Status.BLOCKED)
    client.force_login(staff("view_task"))
    html = client.get(reverse("admin:jobs_task_change", args=[second.pk])).content.decode()
    assert page(workflow) in html
    assert f"double {first.pk} (pending)" in html


def test_staff_without_view_task_see_no_workflow(client):
    workflow = WorkflowFactory(members=["pending"])
    client.force_login(staff(username="bare"))
    assert client.get(page(workflow)).status_code == 403
    assert client.get(reverse(CHANGELIST)).status_code == 403


def act(client, action, *workflows):
    return client.post(
        reverse(CHANGELIST),
        {"action": action, "_selected_action": [str(w.pk) for w in workflows]},
        follow=True,
    )


def test_cancel_needs_cancel_task_and_cancels_the_whole_workflow(client):
    workflow = WorkflowFactory(members=["pending", "blocked", "succeeded"])
    client.force_login(staff("view_task", "retry_task", username="no-cancel"))
    act(client, "cancel_workflows", workflow)
    assert Workflow.objects.get(pk=workflow.pk).status == Workflow.State.RUNNING
    assert Task.objects.filter(workflow=workflow, status=Status.CANCELLED).count() == 0

    client.force_login(staff("view_task", "cancel_task", username="canceller"))
    response = act(client, "cancel_workflows", workflow)
    assert "1 workflow cancelled (2 tasks)" in response.content.decode()
    assert Workflow.objects.get(pk=workflow.pk).status == Workflow.State.CANCELLED
    statuses = sorted(Task.objects.filter(workflow=workflow).values_list("status", flat=True))
    assert statuses == [Status.CANCELLED, Status.CANCELLED, Status.SUCCEEDED]


def test_retry_needs_retry_task_and_requeues_only_the_failed_members(client):
    workflow = jobs.batch([wt.double.s(1), wt.fail_now.s()])
    drain()
    client.force_login(staff("view_task", "cancel_task", username="no-retry"))
    act(client, "retry_workflows", workflow)
    assert Workflow.objects.get(pk=workflow.pk).status == Workflow.State.FAILED

    client.force_login(staff("view_task", "retry_task", username="retrier"))
    response = act(client, "retry_workflows", workflow)
    assert "1 task of 1 workflow requeued" in response.content.decode()
    statuses = sorted(Task.objects.filter(workflow=workflow).values_list("status", flat=True))
    assert statuses == [Status.PENDING, Status.SUCCEEDED]


def test_the_action_messages_say_one_in_the_singular_and_two_in_the_plural(client):
    client.force_login(staff("view_task", "cancel_task", "retry_task", username="operator"))
    one = WorkflowFactory(members=["pending"])
    assert "1 workflow cancelled (1 task)" in act(client, "cancel_workflows", one).content.decode()
    two = [WorkflowFactory(members=["pending", "blocked"]) for _ in range(2)]
    finished = WorkflowFactory(members=["succeeded"], succeeded=True)
    html = act(client, "cancel_workflows", *two, finished).content.decode()
    assert "2 workflows cancelled (4 tasks); 1 skipped: already finished" in html

    failed = [jobs.batch([wt.fail_now.s(), wt.fail_now.s()]) for _ in range(2)]
    drain()
    html = act(client, "retry_workflows", failed[0]).content.decode()
    assert "2 tasks of 1 workflow requeued" in html
    drain()
    html = act(client, "retry_workflows", *failed, finished).content.decode()
    assert "4 tasks of 2 workflows requeued; 1 skipped: nothing failed" in html


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("action", "signal", "traits", "said", "status"),
    [
        ("cancel_workflows", "task_cancelled", {}, "1 workflow cancelled (1 task)", "cancelled"),
        ("retry_workflows", "task_requeued", {"failed": True}, "1 task of 1 workflow", "running"),
    ],
)
def test_a_workflow_deleted_while_the_action_runs_is_skipped(
    client, action, signal, traits, said, status
):
    """The selection was read, then one of its workflows was pruned before its turn: the action
    goes on with the others and says what it did, no error page."""
    client.force_login(staff("view_task", "cancel_task", "retry_task", username="operator"))
    members = ["failed"] if traits else ["pending"]
    first, second = (WorkflowFactory(members=members, **traits) for _ in range(2))

    def prune_the_other(sender, task, **kwargs):
        other = second if task.workflow_id == first.pk else first
        Workflow.objects.filter(pk=other.pk).delete()

    getattr(signals, signal).connect(prune_the_other, dispatch_uid="prune-the-other")
    try:
        response = act(client, action, first, second)
    finally:
        getattr(signals, signal).disconnect(dispatch_uid="prune-the-other")
    assert response.status_code == 200
    assert said in response.content.decode()
    assert Workflow.objects.count() == 1
    assert Workflow.objects.get().status == status


def test_the_dashboard_counts_blocked_tasks_apart_from_waiting_ones(client):
    TaskFactory(status=Status.BLOCKED)
    TaskFactory(status=Status.BLOCKED)
    TaskFactory()
    client.force_login(staff("view_task"))
    response = client.get(reverse("admin:jobs_task_dashboard"))
    row = next(q for q in response.context["queues"] if q["name"] == "default")
    labels = response.context["statuses"]
    counts = dict(zip(labels, (count for count, _ in row["counts"]), strict=True))
    assert counts["Blocked"] == 2
    assert counts["Pending"] == 1


def button(workflow, action):
    return reverse(f"admin:jobs_workflow_{action}", args=[workflow.pk])


def test_the_page_offers_cancel_while_it_runs_and_retry_once_it_failed(client):
    workflow = WorkflowFactory(members=["pending", "running"])
    client.force_login(staff("view_task", "cancel_task", "retry_task", username="operator"))
    html = client.get(page(workflow)).content.decode()
    assert button(workflow, "cancel") in html
    assert button(workflow, "retry") not in html

    response = client.post(button(workflow, "cancel"), follow=True)
    assert response.redirect_chain == [(page(workflow), 302)]
    html = response.content.decode()
    assert "1 workflow cancelled (2 tasks)" in html  # the running one asked to stop
    assert button(workflow, "cancel") not in html
    assert Workflow.objects.get(pk=workflow.pk).status == Workflow.State.CANCELLED
    failed = jobs.batch([wt.fail_now.s()])
    drain()
    assert button(failed, "retry") in client.get(page(failed)).content.decode()
    html = client.post(button(failed, "retry"), follow=True).content.decode()
    assert "1 task of 1 workflow requeued" in html


def test_the_page_buttons_need_their_permission_a_post_and_an_existing_workflow(client):
    workflow = WorkflowFactory(members=["pending"])
    client.force_login(staff("view_task", username="viewer"))
    assert button(workflow, "cancel") not in client.get(page(workflow)).content.decode()
    assert client.post(button(workflow, "cancel")).status_code == 403
    assert client.post(button(workflow, "retry")).status_code == 403
    client.force_login(staff("cancel_task", username="blind"))  # acting needs seeing too
    assert client.post(button(workflow, "cancel")).status_code == 403
    assert Workflow.objects.get(pk=workflow.pk).status == Workflow.State.RUNNING

    client.force_login(staff("view_task", "cancel_task", username="canceller"))
    assert client.get(button(workflow, "cancel")).status_code == 405
    gone = reverse("admin:jobs_workflow_cancel", args=["00000000-0000-0000-0000-000000000000"])
    response = client.post(gone, follow=True)
    assert "doesn’t exist" in response.content.decode()  # noqa: RUF001
    assert Workflow.objects.get(pk=workflow.pk).status == Workflow.State.RUNNING
    client.logout()
    response = client.post(button(workflow, "cancel"))
    assert response.status_code == 302
    assert "/login/" in response["Location"]
    assert Workflow.objects.get(pk=workflow.pk).status == Workflow.State.RUNNING
