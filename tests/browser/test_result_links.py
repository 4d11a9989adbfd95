"""A hostile result URL in a real Chromium: never a link, never run, rendered or polled."""

import pytest
from playwright.sync_api import expect

from jobs import transitions
from tests.factories import MemberFactory, TaskFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

SLOW = 60_000
HOSTILE = "javascript:window.__pwned = true"


def assert_not_clickable_and_never_run(page):
    link = page.locator("[data-jobs-result-link]")
    assert link.get_attribute("href") is None
    expect(link).to_be_hidden()
    # Even forced, a click on it must not run the URL.
    link.dispatch_event("click")
    page.wait_for_timeout(300)
    assert page.evaluate("window.__pwned === undefined")


def test_a_javascript_result_url_rendered_by_the_server_is_no_link(page, login, live_server):
    owner = MemberFactory(username="alice", password="alice-pass")
    task = TaskFactory(
        succeeded=True, owner=owner, result_public=True, result={"url": HOSTILE, "label": "Get"}
    )
    login(page, "alice", "alice-pass", next_url=f"/tasks/{task.pk}/")
    expect(page.locator("[data-jobs-task]")).to_have_attribute("data-status", "succeeded")
    assert_not_clickable_and_never_run(page)


def test_a_javascript_result_url_seen_by_the_polling_script_is_no_link(page, login, live_server):
    owner = MemberFactory(username="alice", password="alice-pass")
    task = TaskFactory(running=True, owner=owner, result_public=True)
    # The list, not the detail page: that one reloads once the task finishes.
    login(page, "alice", "alice-pass", next_url="/tasks/")
    block = page.locator("[data-jobs-task]")
    expect(block).to_have_attribute("data-status", "running")

    assert transitions.succeed(task, {"url": " JAVA\tSCRIPT:window.__pwned = true"})
    expect(block).to_have_attribute("data-status", "succeeded", timeout=SLOW)
    assert_not_clickable_and_never_run(page)


def test_a_safe_result_url_still_becomes_a_link_when_polled(page, login, live_server):
    owner = MemberFactory(username="alice", password="alice-pass")
    task = TaskFactory(running=True, owner=owner, result_public=True)
    login(page, "alice", "alice-pass", next_url="/tasks/")
    block = page.locator("[data-jobs-task]")
    expect(block).to_have_attribute("data-status", "running")

    assert transitions.succeed(task, {"url": "/reports/1/download/", "label": "Download"})
    expect(block).to_have_attribute("data-status", "succeeded", timeout=SLOW)
    link = page.get_by_role("link", name="Download")
    expect(link).to_be_visible()
    assert link.get_attribute("href") == "/reports/1/download/"
