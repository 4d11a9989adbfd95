"""The admin's pages update in place (jobs.admin.live, static jobs/admin/live.js), in Chromium.

Each test types into a form, lets several poll intervals pass while tasks change state in the
database, and checks that the text typed and the focus are kept, that the page was not reloaded
(a marker set on ``window`` survives) and that what the page shows is what the database holds.
"""

import json
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from jobs import transitions
from jobs.admin.dashboard import COUNTED
from jobs.error_records import ErrorRecord
from jobs.maintenance import pausing
from jobs.models import Task, Worker
from jobs.states import Status
from jobs.web.ops_views import DATABASE_DOWN
from tests.factories import TaskFactory, UserFactory, WorkerFactory
from tests.helpers import claim

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

SLOW = 30_000
# Markup, an RTL override and quotes, as a task's own text may hold them.
HOSTILE = '<img src=x onerror="window.jobsPwned=1">\u202e"quoted"'


@pytest.fixture(autouse=True)
def fast_polls(settings):
    settings.JOBS_DASHBOARD_REFRESH_SECONDS = 0.2  # 200 ms: several intervals pass quickly


@pytest.fixture
def operator(page, login):
    UserFactory(username="ops", password="ops-pass", is_staff=True, is_superuser=True)
    login(page, "ops", "ops-pass", next_url="/admin/")
    return page


def mark_window(page):
    page.evaluate("window.jobsNotReloaded = true")


def not_reloaded(page) -> bool:
    return page.evaluate("window.jobsNotReloaded === true")


def updates(page) -> int:
    return int(page.locator("[data-jobs-live]").get_attribute("data-jobs-live-updates") or 0)


def wait_for_updates(page, more: int):
    """Wait until the page has applied ``more`` answers beyond those it has now."""
    target = updates(page) + more
    page.wait_for_function(
        f"Number(document.querySelector('[data-jobs-live]')"
        f".getAttribute('data-jobs-live-updates') || 0) >= {target}",
        timeout=SLOW,
    )


def fail(task, message):
    error = ErrorRecord(user_message=message, exception="builtins.ValueError", message=message)
    assert transitions.fail(Task.objects.get(pk=task.pk), error)


def test_the_task_list_follows_the_database_and_keeps_the_search_being_typed(operator, live_server):
    page = operator
    TaskFactory.create_batch(3, queue="imports")  # one stays pending, one runs, one fails
    page.goto(f"{live_server.url}/admin/jobs/task/")
    mark_window(page)
    search = page.locator("#searchbar")
    search.click()
    search.type("import_con")  # half typed, not submitted

    (running,) = claim("w1", 1, queues=["imports"], lease_seconds=60, now=timezone.now())
    Task.objects.filter(pk=running.pk).update(progress_current=3, progress_total=4)
    (failing,) = claim("w1", 1, queues=["imports"], lease_seconds=60, now=timezone.now())
    fail(failing, HOSTILE)
    row = page.locator(f'#result_list tr:has(input.action-select[value="{running.pk}"])')
    expect(row).to_have_attribute("data-status", Status.RUNNING, timeout=SLOW)
    expect(row.locator(".field-progress_display")).to_have_text("75 % (3 / 4)")
    wait_for_updates(page, 3)

    assert search.input_value() == "import_con"
    assert page.evaluate("document.activeElement.id") == "searchbar"
    assert not_reloaded(page)
    for task in Task.objects.all():
        shown = page.locator(f'#result_list tr:has(input.action-select[value="{task.pk}"])')
        expect(shown).to_have_attribute("data-status", task.status)
        expect(shown.locator(".field-status_badge .jobs-badge")).to_have_text(
            Status(task.status).label
        )
        expect(shown.locator(".field-attempts_display")).to_have_text(
            f"{task.attempts}/{task.max_attempts}"
        )
    assert page.evaluate("window.jobsPwned") is None


def test_a_hostile_progress_message_is_shown_as_text(operator, live_server):
    page = operator
    task = TaskFactory(running=True)
    page.goto(f"{live_server.url}/admin/jobs/task/")
    Task.objects.filter(pk=task.pk).update(progress_message=HOSTILE)
    cell = page.locator(".field-progress_display")
    expect(cell).to_have_text(f"— — {HOSTILE}", timeout=SLOW)
    assert cell.locator("img").count() == 0
    assert page.evaluate("window.jobsPwned") is None


def test_the_dashboard_follows_the_database_and_keeps_the_pause_form_being_typed(
    operator, live_server
):
    page = operator
    WorkerFactory()
    TaskFactory.create_batch(2, queue="imports")
    page.goto(f"{live_server.url}/admin/jobs/task/dashboard/")
    mark_window(page)
    expect(page.locator("[data-live-banner]")).to_have_attribute("data-level", "ok")
    field = page.locator("#jobs-pause-queue")
    field.click()
    field.type("rep")

    TaskFactory.create_batch(3, queue="imports")
    TaskFactory.create_batch(4, queue="imports", succeeded=True, finished_at=timezone.now())
    TaskFactory(queue="fresh")  # a queue the page had no row for
    row = page.locator('tr[data-queue="imports"]')
    counts = row.locator('[data-live="count"]')
    expect(counts.nth(0)).to_have_text("5", timeout=SLOW)  # pending
    expect(counts.nth(COUNTED.index(Status.SUCCEEDED))).to_have_text("4")  # columns: COUNTED
    expect(page.locator('tr[data-queue="fresh"] [data-live="count"]').first).to_have_text("1")
    wait_for_updates(page, 3)

    assert field.input_value() == "rep"
    assert page.evaluate("document.activeElement.id") == "jobs-pause-queue"
    assert not_reloaded(page)
    for queue in ("imports", "fresh"):
        shown = page.locator(f'tr[data-queue="{queue}"] [data-live="count"]').all_text_contents()
        expected = [str(Task.objects.filter(queue=queue, status=s).count()) for s in COUNTED]
        assert shown == expected
    # The chart counts the four finished tasks, in its bars' titles.
    titles = page.locator("svg.jobs-chart rect title").all_text_contents()
    assert sum(int(title.rsplit(": ", 1)[1]) for title in titles) == 4
    # The new queue's row is a working one: its pause button posts its own name.
    page.locator('tr[data-queue="fresh"] button[value=pause]').click()
    expect(page.locator(".messagelist .success")).to_contain_text("Queue fresh paused")


def test_the_banner_names_no_live_worker_first_and_a_paused_queue_as_paused(operator, live_server):
    page = operator
    TaskFactory(queue="emails")
    page.goto(f"{live_server.url}/admin/jobs/task/dashboard/")
    box = page.locator("[data-live-banner]")
    headline = box.locator('[data-live="banner-headline"]')
    # On top of the page, before the queues: the first thing an operator reads.
    assert page.evaluate(
        "document.querySelector('[data-live-banner]').compareDocumentPosition("
        "document.querySelector('#jobs-queues')) & Node.DOCUMENT_POSITION_FOLLOWING"
    )
    expect(box).to_have_attribute("data-level", "critical")
    expect(headline).to_have_text(
        "No worker is running: nothing is being run: start one with manage.py runworker."
    )
    mark_window(page)

    # A worker starts and the queue is paused: healthy, the pause said apart, not as a fault.
    WorkerFactory()
    pausing.pause("emails")
    expect(box).to_have_attribute("data-level", "ok", timeout=SLOW)
    expect(headline).to_contain_text("Healthy: 1 queue within limits")
    expect(box.locator('[data-live-list="banner-paused"] li')).to_contain_text(
        "Queue emails is paused"
    )
    expect(page.locator('tr[data-queue="emails"] [data-live="paused"]')).to_be_visible()
    expect(page.locator('tr[data-queue="emails"] button[value=resume]')).to_be_visible()

    # The worker stops beating: no live worker comes first again, above the rest.
    Task.objects.all().delete()
    Worker.objects.update(last_heartbeat_at=timezone.now() - timedelta(minutes=3))
    expect(headline).to_have_text(
        "No worker has sent a heartbeat for 3 min: start one with manage.py runworker.",
        timeout=SLOW,
    )
    expect(page.locator('[data-live-empty="workers"]')).to_be_visible()
    assert not_reloaded(page)


def test_a_lost_connection_keeps_the_figures_and_retries_less_often(operator, live_server):
    page = operator
    WorkerFactory()
    TaskFactory.create_batch(2, queue="imports")
    page.goto(f"{live_server.url}/admin/jobs/task/dashboard/")
    root = page.locator("[data-jobs-live]")
    wait_for_updates(page, 1)
    asked = []

    def database_down(route):
        asked.append(route.request.url)
        route.fulfill(status=503, content_type="application/json", body=json.dumps(DATABASE_DOWN))

    page.route("**/dashboard/live/", database_down)
    status = page.locator("[data-jobs-live-status]")
    expect(root).to_have_attribute("data-jobs-live-state", "lost", timeout=SLOW)
    expect(status).to_contain_text("Connection lost, retrying")
    TaskFactory(queue="imports")  # not shown while the server cannot answer
    page.wait_for_timeout(1_500)  # a back-off lasts: nothing to trigger, an absence to see
    counts = page.locator('tr[data-queue="imports"] [data-live="count"]')
    expect(counts.nth(0)).to_have_text("2")  # the last figures read, kept
    # Doubling from 200 ms: 400, 800, 1600 ms... far fewer than the 7 polls of 1.5 s.
    assert len(asked) <= 4, asked

    page.unroute("**/dashboard/live/")
    expect(root).to_have_attribute("data-jobs-live-state", "live", timeout=SLOW)
    expect(counts.nth(0)).to_have_text("3")
    expect(status).to_have_text("")


def test_a_hidden_tab_stops_polling_and_catches_up_when_shown(operator, live_server):
    page = operator
    TaskFactory(queue="imports")
    page.goto(f"{live_server.url}/admin/jobs/task/dashboard/")
    wait_for_updates(page, 1)
    asked = []
    page.on("request", lambda request: asked.append(request.url) if "/live/" in request.url else 0)
    page.evaluate(
        "Object.defineProperty(document, 'hidden', {value: true, configurable: true});"
        "document.dispatchEvent(new Event('visibilitychange'))"
    )
    page.wait_for_timeout(300)  # a poll already on its way may land
    before = len(asked)
    TaskFactory(queue="imports")
    page.wait_for_timeout(1_500)  # seven intervals: an absence to see, nothing to trigger
    assert len(asked) == before
    page.evaluate(
        "Object.defineProperty(document, 'hidden', {value: false, configurable: true});"
        "document.dispatchEvent(new Event('visibilitychange'))"
    )
    counts = page.locator('tr[data-queue="imports"] [data-live="count"]')
    expect(counts.nth(0)).to_have_text("2", timeout=SLOW)


def test_the_task_page_follows_its_task_and_offers_the_buttons_that_apply(operator, live_server):
    page = operator
    task = TaskFactory(queue="imports")
    page.goto(f"{live_server.url}/admin/jobs/task/{task.pk}/change/")
    mark_window(page)
    retry = page.locator('[data-live-action="can_retry"]')
    cancel = page.locator('[data-live-action="can_cancel"]')
    expect(retry).to_be_hidden()
    expect(cancel).to_be_visible()

    (running,) = claim("w1", 1, lease_seconds=60, now=timezone.now())
    Task.objects.filter(pk=task.pk).update(progress_current=1, progress_total=2)
    status = page.locator(".field-status_badge .readonly .jobs-badge")
    expect(status).to_have_text("Running", timeout=SLOW)
    expect(page.locator(".field-progress_display .readonly")).to_have_text("50 % (1 / 2)")
    expect(page.locator(".field-attempts_display .readonly")).to_have_text(f"1/{task.max_attempts}")

    fail(running, HOSTILE)
    expect(status).to_have_text("Failed", timeout=SLOW)
    expect(page.locator(".field-last_error .readonly")).to_have_text(HOSTILE)
    expect(retry).to_be_visible()
    expect(cancel).to_be_hidden()
    assert page.evaluate("window.jobsPwned") is None
    assert not_reloaded(page)
    retry.locator("button").click()  # the button shown live posts as the rendered one did
    expect(page.locator(".messagelist .success")).to_have_text("1 task requeued")
    assert Task.objects.get(pk=task.pk).status == Status.PENDING
