"""Several CSV files chosen at once in a real Chromium: one batch, one bar, one notification."""

import pytest
from playwright.sync_api import expect

from demo_project.demo.models import Contact, Notification
from jobs.models import Task, Workflow
from jobs.states import Status
from tests.factories import MemberFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

SLOW = 60_000  # two cores shared with other work: wait for state, never sleep for speed


def contacts_csv(prefix, rows, broken=()):
    lines = ["email,name", *broken, *(f"{prefix}{i}@example.com,P {i}" for i in range(rows))]
    return ("\n".join(lines) + "\n").encode()


def test_two_files_chosen_at_once_make_one_bar_and_one_notification(page, login, live_worker):
    user = MemberFactory(username="alice", password="alice-pass")
    login(page, "alice", "alice-pass")
    files = [
        {"name": "north.csv", "mimeType": "text/csv", "buffer": contacts_csv("n", 300)},
        {
            "name": "south.csv",
            "mimeType": "text/csv",
            "buffer": contacts_csv("s", 200, broken=["nobody,No One"]),
        },
    ]
    field = page.locator("input[name=file]")
    assert field.get_attribute("multiple") is not None
    field.set_input_files(files)
    page.get_by_role("button", name="Import").click()
    page.wait_for_url("**/imports/*/")

    bars = page.get_by_role("progressbar")
    expect(bars).to_have_count(1)
    expect(bars).to_have_attribute("aria-valuenow", "100", timeout=SLOW)
    # The page reloads once the report is written: the notification is the banner.
    banner = page.get_by_text("Import of 2 files is done: 500 contacts added, 1 row skipped.")
    expect(banner.first).to_be_visible(timeout=SLOW)
    expect(page.get_by_role("progressbar")).to_have_count(1)
    expect(page.get_by_text("All 2 files imported.").first).to_be_visible()

    workflow = Workflow.objects.get()
    assert workflow.status == Workflow.State.SUCCEEDED
    assert Contact.objects.filter(organisation=user.membership.organisation).count() == 500
    (report,) = Task.objects.filter(workflow=workflow, workflow_role="on_finish")
    assert report.status == Status.SUCCEEDED
    assert report.result["mailed"] is True  # the worker's mail: one message, for the batch
    assert Notification.objects.filter(user=user).count() == 1  # none per file
    assert "Traceback" not in page.content()


def test_another_users_batch_page_is_404_in_the_browser(page, login, live_server):
    alice = MemberFactory(username="alice")
    MemberFactory(username="bob", password="bob-pass")
    workflow = Workflow.objects.create(kind="batch", owner=alice, summary="Import of 2 files")
    login(page, "bob", "bob-pass")
    assert page.goto(f"{live_server.url}/imports/{workflow.pk}/").status == 404
    assert page.goto(f"{live_server.url}/jobs/workflows/{workflow.pk}/").status == 404
