"""The operator's console in Chromium: a schedule added through the admin's form, the workers
page and its "stop after current tasks", and a whole filtered set retried with its count shown
before acting."""

import pytest
from playwright.sync_api import expect

from jobs.models import Schedule, Task, Worker
from jobs.states import Status
from tests.factories import TaskFactory, UserFactory, WorkerFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


@pytest.fixture
def operator():
    return UserFactory(username="ops", password="ops-pass", is_staff=True, is_superuser=True)


def test_operator_adds_a_schedule_fixes_a_bad_cron_and_sees_its_next_run(
    page, login, live_server, operator
):
    login(page, "ops", "ops-pass", next_url="/admin/")
    page.goto(f"{live_server.url}/admin/jobs/schedule/add/")
    page.fill("input[name=name]", "nightly-digest")
    page.fill("input[name=task]", "tests.testapp.tasks.add")
    page.fill("input[name=cron]", "61 * * * *")
    page.fill("textarea[name=args]", "[1, 2")
    page.click("input[name=_save]")
    expect(page.locator(".errornote")).to_be_visible()
    expect(page.locator(".field-args .errorlist")).to_contain_text("Not valid JSON")
    assert not Schedule.objects.exists()

    page.fill("textarea[name=args]", "[1, 2]")
    page.click("input[name=_save]")
    expect(page.locator(".errorlist").first).to_contain_text("Bad minute")
    page.fill("input[name=cron]", "0 3 * * *")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist .success")).to_contain_text("nightly-digest")
    row = page.locator("#result_list tbody tr", has_text="nightly-digest")
    expect(row.locator(".field-source")).to_have_text("admin")
    schedule = Schedule.objects.get()
    assert (schedule.source, schedule.cron, schedule.args) == ("admin", "0 3 * * *", [1, 2])

    page.goto(f"{live_server.url}/admin/jobs/")
    page.click("text=Scheduled tasks")
    run = page.locator(".jobs-upcoming-run", has_text="nightly-digest")
    expect(run).to_contain_text("[1, 2]")
    expect(run).to_contain_text("03:00:00")


def test_operator_asks_a_worker_to_stop_after_its_current_tasks(page, login, live_server, operator):
    worker = WorkerFactory(hostname="batch-1", queues=["imports"], busy_processes=1)
    running = TaskFactory(running=True, name="app.tasks.import_contacts", worker_id=worker.pk)
    WorkerFactory(hostname="batch-2", stopped=True)
    login(page, "ops", "ops-pass", next_url="/admin/")
    page.goto(f"{live_server.url}/admin/jobs/worker/")
    row = page.locator("#result_list tbody tr", has_text="batch-1")
    expect(row.locator(".field-state")).to_have_text("alive")
    expect(row.locator(".field-queues_display")).to_have_text("imports")
    row.locator("a", has_text="import_contacts").click()
    expect(page.locator("h1")).to_have_text("View task")
    assert str(running.pk) in page.url

    page.go_back()
    page.locator("#result_list tbody tr", has_text="batch-1").locator("input.action-select").check()
    page.locator("#result_list tbody tr", has_text="batch-2").locator("input.action-select").check()
    page.select_option("select[name=action]", "stop_after_current_tasks")
    page.click("button[name=index]")
    expect(page.locator(".messagelist .success")).to_have_text(
        "1 worker asked to stop after current tasks; 1 skipped: not running (stopped or silent)"
    )
    row = page.locator("#result_list tbody tr", has_text="batch-1")
    expect(row.locator(".field-state")).to_have_text("stopping after current tasks (asked by ops)")
    assert Worker.objects.get(pk=worker.pk).stop_requested_at is not None


def test_operator_retries_every_task_of_a_filter_with_the_count_shown_before_acting(
    page, login, live_server, operator
):
    name = "tests.testapp.tasks.add"
    TaskFactory.create_batch(148, failed=True, name=name)
    TaskFactory.create_batch(2, running=True, name=name)
    TaskFactory.create_batch(5, failed=True, name="tests.testapp.tasks.buggy")  # not filtered
    login(page, "ops", "ops-pass", next_url="/admin/")
    page.goto(f"{live_server.url}/admin/jobs/task/?name={name}")
    page.check("#action-toggle")  # the page's 100 rows
    select_all = page.locator(".actions .question a")
    expect(select_all).to_have_text("Select all 150 tasks")  # the filter's exact count
    select_all.click()
    expect(page.locator(".actions .all")).to_contain_text("All 150 selected")
    page.select_option("select[name=action]", "retry_tasks")
    page.click("button[name=index]")
    expect(page.locator(".messagelist .success")).to_have_text(
        "148 tasks requeued; 2 skipped: already running"
    )
    assert Task.objects.filter(name=name, status=Status.PENDING).count() == 148
    assert Task.objects.filter(status=Status.FAILED).count() == 5  # outside the filter
