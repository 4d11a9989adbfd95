"""The polling script on its own: retry button, back-off on errors, stop at a terminal state."""

import itertools
import time
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from jobs import transitions
from jobs.humanize import remaining_text
from jobs.models import Task
from jobs.states import Status
from tests.factories import MemberFactory, TaskFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

SLOW = 60_000


def test_the_retry_button_requeues_a_failed_task_in_the_background(page, login, live_server):
    owner = MemberFactory(username="alice", password="alice-pass")
    task = TaskFactory(failed=True, owner=owner, summary="Import of contacts.csv")
    login(page, "alice", "alice-pass", next_url=f"/tasks/{task.pk}/")

    expect(page.get_by_text("Something went wrong.").first).to_be_visible()
    retry = page.get_by_role("button", name="Retry")
    expect(retry).to_be_visible()
    retry.click()

    block = page.locator("[data-jobs-task]")
    expect(block).to_have_attribute("data-status", "pending", timeout=SLOW)
    expect(retry).to_be_hidden()
    assert page.url.endswith(f"/tasks/{task.pk}/")  # no navigation: it was a background request
    assert Task.objects.get(pk=task.pk).status == Status.PENDING


def test_polling_backs_off_on_errors_and_stops_at_a_terminal_state(page, login, live_server):
    owner = MemberFactory(username="alice", password="alice-pass")
    task = TaskFactory(running=True, owner=owner, progress_current=1, progress_total=4)
    login(page, "alice", "alice-pass", next_url="/tasks/")
    expect(page.get_by_role("progressbar")).to_have_attribute("aria-valuenow", "25")

    requests = []

    def flaky_status(route):
        requests.append(time.monotonic())
        if len(requests) <= 2:
            route.fulfill(status=503, body="busy")
        else:
            route.continue_()

    # The first two polls from here on meet a struggling server; the task finishes meanwhile.
    page.route(f"**/jobs/tasks/{task.pk}/", flaky_status)
    Task.objects.filter(pk=task.pk).update(progress_current=4, progress_message="All done")
    assert transitions.succeed(task, {"rows": 4})

    block = page.locator("[data-jobs-task]")
    expect(block).to_have_attribute("data-status", "succeeded", timeout=SLOW)
    expect(block.locator('[data-jobs-field="message"]')).to_have_text("All done")
    # A screen reader hears the change of state, once, with the task's name.
    announce = block.locator("[data-jobs-announce]")
    expect(announce).to_have_text(f"{task.summary or task.name}: Succeeded. All done")
    expect(page.get_by_role("progressbar")).to_have_attribute("aria-valuenow", "100")
    gaps = [later - earlier for earlier, later in itertools.pairwise(requests)]
    # Nominally 4 then 8 seconds: each wait after an error is longer than the last.
    assert len(requests) == 3, gaps
    assert gaps[1] > gaps[0] + 2, gaps

    # Finished: no more polls (waiting here proves an absence; nothing can be triggered).
    polls = len(requests)
    page.wait_for_timeout(5_000)
    assert len(requests) == polls


def test_the_time_left_reads_as_the_server_words_it(page, login, live_server):
    # Half done in 30 min 20 s: about as long again, "30 min" whichever second the poll comes.
    owner = MemberFactory(username="alice", password="alice-pass")
    started = timezone.now() - timedelta(seconds=1820)
    task = TaskFactory(
        running=True, owner=owner, progress_current=50, progress_total=100, started_at=started
    )
    login(page, "alice", "alice-pass", next_url=f"/tasks/{task.pk}/")
    eta = page.locator('[data-jobs-field="eta"]')
    expect(eta).to_have_text(remaining_text(1820))  # as the template rendered it

    # Polled: the script shows the status's eta_text, worded by jobs.humanize, not by itself.
    started = timezone.now() - timedelta(seconds=1800)
    Task.objects.filter(pk=task.pk).update(
        progress_current=25, progress_message="A quarter", started_at=started
    )
    expect(page.get_by_text("A quarter").first).to_be_visible(timeout=SLOW)
    expect(eta).to_have_text(remaining_text(3 * 1800))  # three times 30 min: "about 1 h 30 min"
    assert remaining_text(3 * 1800) == "About 1 h 30 min left."
    # A phrase of its own, outside the status line; progress and ETA ticks are not announced.
    assert eta.evaluate("node => node.closest('.jobs-status-line') === null")
    expect(page.locator("[data-jobs-announce]")).to_have_text("")
