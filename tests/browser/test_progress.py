"""A person watching their tasks in a real Chromium, with a real worker running beside."""

import time

import pytest
from playwright.sync_api import expect

from demo_project.demo.models import Contact, Report
from jobs.models import Task
from jobs.states import Status
from tests.factories import MemberFactory, TaskFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

# Generous: two cores shared with other work; polling for state, never sleeping for speed.
SLOW = 60_000
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64)


def contacts_csv(rows):
    lines = ["email,name", *(f"person{i}@example.com,Person {i}" for i in range(rows))]
    return ("\n".join(lines) + "\n").encode()


def wait_for(condition, timeout=60):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the condition"
        time.sleep(0.2)


def upload(page, name, data, mime):
    page.set_input_files("input[name=file]", {"name": name, "mimeType": mime, "buffer": data})
    page.get_by_role("button", name="Import").click()
    page.wait_for_url("**/tasks/*/")


def test_a_csv_import_climbs_to_100_percent_and_shows_the_count(page, login, live_worker):
    user = MemberFactory(username="alice", password="alice-pass")
    login(page, "alice", "alice-pass")
    upload(page, "contacts.csv", contacts_csv(1000), "text/csv")

    bar = page.get_by_role("progressbar")
    expect(bar).to_have_attribute("aria-valuenow", "100", timeout=SLOW)
    expect(page.get_by_text("Imported 1,000 of 1,000 rows").first).to_be_visible(timeout=SLOW)
    expect(page.locator("[data-jobs-task]")).to_have_attribute("data-status", "succeeded")
    assert Contact.objects.filter(organisation=user.membership.organisation).count() == 1000


def test_a_png_upload_is_refused_at_once_with_the_clear_message(page, login, live_server):
    MemberFactory(username="alice", password="alice-pass")
    login(page, "alice", "alice-pass")
    page.set_input_files(
        "input[name=file]", {"name": "photo.png", "mimeType": "image/png", "buffer": PNG}
    )
    page.get_by_role("button", name="Import").click()

    message = page.get_by_text("Unsupported file format: please upload a CSV.").first
    expect(message).to_be_visible(timeout=SLOW)
    assert page.url.rstrip("/") == live_server.url  # back home: no task page, no task
    assert not Task.objects.exists()
    assert "Traceback" not in page.content()


def test_another_users_task_status_url_is_404(page, login, live_server):
    alices = TaskFactory(owner=MemberFactory(username="alice"), summary="Import of a.csv")
    MemberFactory(username="bob", password="bob-pass")
    login(page, "bob", "bob-pass")

    response = page.goto(f"{live_server.url}/jobs/tasks/{alices.pk}/")
    assert response.status == 404
    assert "a.csv" not in page.content()
    assert page.goto(f"{live_server.url}/tasks/{alices.pk}/").status == 404
    assert page.goto(f"{live_server.url}/jobs/tasks/not-a-uuid/").status == 404


def test_a_running_report_is_cancelled_from_its_page(page, login, live_worker):
    MemberFactory(username="alice", password="alice-pass")
    login(page, "alice", "alice-pass")
    page.get_by_role("button", name="Build the report").click()
    page.wait_for_url("**/tasks/*/")
    block = page.locator("[data-jobs-task]")

    expect(block).to_have_attribute("data-status", "running", timeout=SLOW)
    page.get_by_role("button", name="Cancel").click()

    expect(block).to_have_attribute("data-status", "cancelled", timeout=SLOW)
    expect(page.get_by_text("Cancelled.").first).to_be_visible()
    task = Task.objects.get()
    assert task.status == Status.CANCELLED
    assert task.progress_current < 20  # stopped at a checkpoint, not run to the end
    assert not Report.objects.exists()


def test_without_javascript_the_page_shows_the_state_as_of_rendering(browser, live_server):
    owner = MemberFactory(username="alice", password="alice-pass")
    task = TaskFactory(
        running=True,
        owner=owner,
        summary="Import of contacts.csv",
        progress_current=600,
        progress_total=1000,
        progress_message="Imported 600 of 1,000 rows",
    )
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    try:
        page.goto(f"{live_server.url}/accounts/login/?next=/tasks/{task.pk}/")
        page.fill("input[name=username]", "alice")
        page.fill("input[name=password]", "alice-pass")
        page.click("button[type=submit]")
        page.wait_for_url(f"**/tasks/{task.pk}/")
        expect(page.get_by_role("progressbar")).to_have_attribute("aria-valuenow", "60")
        expect(page.get_by_text("Imported 600 of 1,000 rows")).to_be_visible()

        # The cancel button is a plain form: it works without JavaScript and comes back here.
        page.get_by_role("button", name="Cancel").click()
        page.wait_for_url(f"**/tasks/{task.pk}/")
        wait_for(lambda: Task.objects.get(pk=task.pk).cancel_requested_at is not None)
        expect(page.get_by_text("Cancelling").first).to_be_visible()
    finally:
        context.close()
