import pytest
from playwright.sync_api import expect

from jobs.admin.paginator import EXACT_COUNT_LIMIT
from jobs.models import Task
from jobs.states import Status
from tests.factories import TaskFactory, UserFactory
from tests.hostile.test_bulk_actions import bulk_tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


@pytest.fixture
def operator():
    return UserFactory(username="ops", password="ops-pass", is_staff=True, is_superuser=True)


def test_operator_bulk_retries_failed_tasks_and_opens_the_dashboard(
    page, login, live_server, operator
):
    TaskFactory.create_batch(5, failed=True, queue="imports")
    done = TaskFactory(succeeded=True, queue="imports")
    login(page, "ops", "ops-pass", next_url="/admin/")

    page.goto(f"{live_server.url}/admin/jobs/task/?status__exact=failed")
    expect(page.locator("#result_list tbody tr")).to_have_count(5)
    page.check("#action-toggle")
    page.select_option("select[name=action]", "retry_tasks")
    page.click("button[name=index]")
    expect(page.locator(".messagelist .success")).to_have_text("5 tasks requeued")
    assert Task.objects.filter(status=Status.PENDING).count() == 5
    done.refresh_from_db()
    assert done.status == Status.SUCCEEDED

    page.goto(f"{live_server.url}/admin/jobs/")
    page.click("text=Queue dashboard")
    expect(page.locator("h1")).to_have_text("Queue dashboard")
    row = page.locator('tr[data-queue="imports"]')
    expect(row).to_be_visible()
    expect(row.locator("td").first).to_have_text("5")  # pending, now that they are requeued
    expect(page.locator("svg.jobs-chart rect")).to_have_count(60)


def test_operator_pauses_a_queue_from_the_dashboard(page, login, live_server, operator):
    TaskFactory(queue="imports")
    login(page, "ops", "ops-pass", next_url="/admin/")
    page.goto(f"{live_server.url}/admin/jobs/task/dashboard/")
    page.locator('tr[data-queue="imports"] button[value=pause]').click()
    expect(page.locator(".messagelist .success")).to_contain_text("Queue imports paused")
    expect(page.locator('tr[data-queue="imports"] .jobs-badge--paused')).to_be_visible()


def test_operator_selects_all_beyond_the_exact_count_and_confirms(
    page, login, live_server, operator, no_success_receivers
):
    bulk_tasks(EXACT_COUNT_LIMIT + 20, queue="bulk")
    TaskFactory(succeeded=True, queue="bulk")
    login(page, "ops", "ops-pass", next_url="/admin/")

    page.goto(f"{live_server.url}/admin/jobs/task/?queue=bulk")
    page.check("#action-toggle")
    page.click(".actions .question a")  # "Select all … tasks": the list's capped count
    page.select_option("select[name=action]", "cancel_tasks")
    page.click("button[name=index]")

    expect(page.locator(".jobs-counted strong")).to_have_text("10,021 tasks")
    expect(page.locator(".jobs-plan li")).to_have_text(
        ["10,020 will be cancelled", "1 will be skipped: already succeeded"]
    )
    assert not Task.objects.filter(status=Status.CANCELLED).exists()
    TaskFactory(queue="bulk")  # enqueued while the operator reads: not counted, not cancelled

    page.click("input[type=submit][value='Yes, cancel tasks']")
    expect(page.locator(".messagelist .success")).to_have_text(
        "10,020 tasks cancelled; 1 skipped: already succeeded"
    )
    assert Task.objects.filter(status=Status.CANCELLED).count() == 10_020
    assert Task.objects.filter(queue="bulk", status=Status.PENDING).count() == 1
