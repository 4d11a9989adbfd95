"""The workflow admin in a real browser: an operator reads a batch's page (its members, their
states, what each waits for, its callback), cancels it from its page and from the list; a staff
user without the task permissions is refused as Django's admin refuses (403)."""

import pytest
from playwright.sync_api import expect

import jobs
from jobs.models import Task, Workflow
from jobs.states import Status
from tests.factories import UserFactory
from tests.testapp import workflow_tasks as wt

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


@pytest.fixture
def operator():
    return UserFactory(username="ops", password="ops-pass", is_staff=True, is_superuser=True)


def a_batch(summary="Two files"):
    """A batch of two files: one member waiting to run, one waiting for a task outside it."""
    fetch = Task.objects.get(pk=wt.double.enqueue(5).id)
    workflow = jobs.batch(
        [wt.double.s(1), wt.mark.using(depends_on=[fetch]).s("after the fetch")],
        on_success=wt.callback.s("mailed"),
        summary=summary,
        noun="file",
        verb="imported",
    )
    return workflow, fetch


def workflow_page(live_server, workflow):
    return f"{live_server.url}/admin/jobs/workflow/{workflow.pk}/change/"


def test_an_operator_reads_a_batch_and_cancels_it_from_its_page(page, login, live_server, operator):
    workflow, fetch = a_batch()
    login(page, "ops", "ops-pass", next_url="/admin/")
    page.goto(workflow_page(live_server, workflow))

    expect(page.locator(".field-progress_text .readonly")).to_have_text("0 of 2 files imported")
    members = page.locator(".field-members_table tr")
    expect(members).to_have_count(3)  # the heading and one row a member
    double = members.filter(has=page.get_by_role("link", name="double", exact=True))
    expect(double.locator(".jobs-badge")).to_have_text("Pending")
    expect(double.locator("td").last).to_have_text("—")  # waits for nothing
    mark = members.filter(has=page.get_by_role("link", name="mark", exact=True))
    expect(mark.locator(".jobs-badge")).to_have_text("Blocked")
    expect(mark.locator("td").last).to_have_text(f"double {fetch.pk} (pending)")
    callback = page.locator(".field-callbacks_table tr").filter(has_text="on_success")
    expect(callback.locator(".jobs-badge")).to_have_text("Blocked")
    expect(page.get_by_role("button", name="Retry failed members")).to_have_count(0)

    page.get_by_role("button", name="Cancel workflow").click()
    expect(page.locator(".messagelist li")).to_have_text("1 workflow cancelled (3 tasks)")
    assert page.url == workflow_page(live_server, workflow)
    expect(page.locator(".field-status .readonly")).to_have_text("Cancelled")
    expect(page.locator(".field-members_table .jobs-badge")).to_have_text(
        ["Cancelled", "Cancelled"]
    )
    expect(callback.locator(".jobs-badge")).to_have_text("Cancelled")
    expect(page.get_by_role("button", name="Cancel workflow")).to_have_count(0)
    assert Workflow.objects.get(pk=workflow.pk).status == Workflow.State.CANCELLED
    fetch.refresh_from_db()
    assert fetch.status == Status.PENDING  # not the workflow's: left alone


def test_an_operator_cancels_two_batches_from_the_list(page, login, live_server, operator):
    first, _ = a_batch("First import")
    second, _ = a_batch("Second import")
    login(page, "ops", "ops-pass", next_url="/admin/")
    page.goto(f"{live_server.url}/admin/jobs/workflow/")
    expect(page.locator("#result_list tbody tr")).to_have_count(2)
    page.check("#action-toggle")
    page.select_option("select[name=action]", "cancel_workflows")
    page.click("button[name=index]")
    expect(page.locator(".messagelist li")).to_have_text("2 workflows cancelled (6 tasks)")
    statuses = set(Workflow.objects.values_list("status", flat=True))
    assert statuses == {Workflow.State.CANCELLED}
    assert first.pk != second.pk


def test_staff_without_permissions_cannot_see_the_workflow_page(page, login, live_server):
    workflow, _ = a_batch()
    UserFactory(username="bare", password="bare-pass", is_staff=True)
    login(page, "bare", "bare-pass", next_url="/admin/")
    response = page.goto(workflow_page(live_server, workflow))
    assert response.status == 403
    assert "Two files" not in page.content()
    assert page.goto(f"{live_server.url}/admin/jobs/workflow/").status == 403
    response = page.request.post(
        f"{live_server.url}/admin/jobs/workflow/{workflow.pk}/cancel/", max_redirects=0
    )
    assert response.status == 403  # no CSRF token either: refused before anything is read
    assert Workflow.objects.get(pk=workflow.pk).status == Workflow.State.RUNNING
