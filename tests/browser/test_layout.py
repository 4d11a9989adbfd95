"""The operator's and the user's pages fit the screen: no horizontal overflow at a laptop's
1,280 px, of the page or of a table in it, and at a phone's 390 px the page itself does not
scroll sideways (a wide table scrolls inside its own box, as Django's admin does).

Measured in Chromium: the document's scroll width against the viewport's width, with data made
to be wide (long names, summaries, queue names, errors, payloads).
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.states import Status
from tests.factories import MemberFactory, ScheduleFactory, TaskFactory, UserFactory, WorkerFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

LAPTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
LONG = "x" * 120  # a word with no place to break


def overflow(page) -> int:
    """How many pixels the page scrolls sideways (0: it fits)."""
    return page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )


def boxes_scrolling(page) -> list[str]:
    """The table boxes that scroll sideways inside the page (Django's changelist results and
    our tables' boxes), each as "class: scroll width > width"."""
    return page.evaluate(
        """() => Array.from(document.querySelectorAll('.results, .jobs-table-box'))
            .filter(box => box.scrollWidth > box.clientWidth + 1)
            .map(box => `${box.className}: ${box.scrollWidth} > ${box.clientWidth}`)"""
    )


@pytest.fixture
def wide_data():
    owner = MemberFactory(username="alice", password="alice-pass")
    error = [
        {
            "attempt": 1,
            "exception": "builtins.ValueError",
            "message": "bad value " + LONG,
            "traceback": "Traceback (most recent call last):\n  File " + LONG + "\n",
        }
    ]
    task = TaskFactory(
        name="demo_project.demo.tasks.import_contacts_with_a_rather_long_function_name",
        summary="Import of " + "a-very-long-file-name-" * 8 + ".csv",
        queue="imports-from-the-partner-portal",
        owner=owner,
        status=Status.FAILED,
        attempts=3,
        last_error="It failed: " + LONG,
        error_details=error,
        payload={"args": [LONG, list(range(40))], "kwargs": {"note": LONG}},
        progress_current=5,
        progress_total=10,
        progress_message="Imported 5 of 10 rows: " + LONG,
    )
    TaskFactory.create_batch(5, queue="emails", summary="Invitation to " + LONG)
    TaskFactory(running=True, queue="reports", worker_id="host-with-a-long-name:12345:abcdef")
    worker = WorkerFactory(
        id="worker-on-a-host-with-a-long-name.example.internal:424242:abcdef",
        queues=["imports-from-the-partner-portal", "emails", "reports", "default"],
    )
    ScheduleFactory()
    # The scheduled tasks and workers pages: long arguments, a delayed task, a worker's tasks.
    ScheduleFactory(name="digest-" + "x" * 60, source="admin", args=[LONG], kwargs={"k": LONG})
    later = timezone.now() + timedelta(hours=1)
    TaskFactory(name=task.name, summary=task.summary, queue=task.queue, run_after=later)
    TaskFactory.create_batch(3, running=True, name=task.name, worker_id=worker.pk)
    UserFactory(username="ops", password="ops-pass", is_staff=True, is_superuser=True)
    return task


def admin_pages(task):
    return {
        "task list": "/admin/jobs/task/",
        "task page": f"/admin/jobs/task/{task.pk}/change/",
        "dashboard": "/admin/jobs/task/dashboard/",
        "schedules": "/admin/jobs/schedule/",
        "scheduled tasks": "/admin/jobs/schedule/scheduled/",
        "workers": "/admin/jobs/worker/",
    }


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["1280px", "390px"])
def test_the_admin_pages_do_not_scroll_sideways(page, login, live_server, wide_data, viewport):
    page.set_viewport_size(viewport)
    login(page, "ops", "ops-pass", next_url="/admin/")
    found, scrolling = {}, {}
    for name, url in admin_pages(wide_data).items():
        page.goto(live_server.url + url)
        found[name] = overflow(page)
        scrolling[name] = boxes_scrolling(page)
    assert found == dict.fromkeys(found, 0)
    if viewport is LAPTOP:
        # On a laptop not even a table scrolls in its box: every column is in sight.
        assert scrolling == {name: [] for name in scrolling}


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["1280px", "390px"])
def test_the_users_pages_do_not_scroll_sideways(page, login, live_server, wide_data, viewport):
    page.set_viewport_size(viewport)
    login(page, "alice", "alice-pass")
    found = {}
    for name, url in {
        "my tasks": "/tasks/",
        "task": f"/tasks/{wide_data.pk}/",
        "home": "/",
    }.items():
        page.goto(live_server.url + url)
        found[name] = overflow(page)
    assert found == dict.fromkeys(found, 0)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_cancelled_looks_unlike_failed_and_dark_mode_follows_the_system(
    page, login, live_server, scheme
):
    owner = MemberFactory(username="alice", password="alice-pass")
    TaskFactory(owner=owner, status=Status.FAILED, summary="Failed import", last_error="Bad")
    TaskFactory(owner=owner, status=Status.CANCELLED, summary="Cancelled import")
    page.emulate_media(color_scheme=scheme)
    login(page, "alice", "alice-pass", next_url="/tasks/")

    def colour(status, selector):
        return page.eval_on_selector(
            f'[data-status="{status}"] {selector}', "node => getComputedStyle(node).backgroundColor"
        )

    assert colour("failed", ".jobs-progress-bar") != colour("cancelled", ".jobs-progress-bar")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    dark = background not in ("rgba(0, 0, 0, 0)", "rgb(255, 255, 255)")
    assert dark == (scheme == "dark"), background


def lines_of(page, selector: str) -> list[int]:
    """How many lines the text of each element matching the selector takes."""
    return page.evaluate(
        """(selector) => Array.from(document.querySelectorAll(selector)).map(cell => {
            const range = document.createRange();
            range.selectNodeContents(cell);
            return new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top))).size;
        })""",
        selector,
    )


def test_a_short_name_and_queue_do_not_wrap_letter_by_letter_at_1280px(page, login, live_server):
    # The demo's own tasks: "build_rep/ort", "defaul/t" was what a laptop showed, the
    # wrap-anywhere columns squeezed to a few letters each beside a long progress message.
    owner = MemberFactory(username="alice", password="alice-pass")
    TaskFactory(
        name="demo_project.demo.tasks.build_report",
        queue="default",
        summary="Contacts report of Acme Ltd",
        owner=owner,
        status=Status.SUCCEEDED,
        progress_current=20,
        progress_total=20,
        progress_message="Report ready",
    )
    TaskFactory(
        name="demo_project.demo.tasks.import_contacts",
        queue="default",
        summary="Import of contacts.csv",
        owner=owner,
        status=Status.SUCCEEDED,
        progress_current=1001,
        progress_total=1001,
        progress_message="Imported 1,000 of 1,001 rows; 1 broken row skipped",
    )
    UserFactory(username="ops", password="ops-pass", is_staff=True, is_superuser=True)
    page.set_viewport_size(LAPTOP)
    login(page, "ops", "ops-pass", next_url="/admin/")
    page.goto(live_server.url + "/admin/jobs/task/")
    assert lines_of(page, "#result_list .field-name_display a") == [1, 1]
    assert lines_of(page, "#result_list td.field-queue") == [1, 1]
    assert overflow(page) == 0
    assert boxes_scrolling(page) == []


def covered_heading(page) -> list[str]:
    """The object tools (buttons and links above the form) drawn over the heading's text."""
    return page.evaluate(
        """() => {
            const range = document.createRange();
            range.selectNodeContents(document.querySelector('#content h2'));
            const lines = Array.from(range.getClientRects());
            return Array.from(document.querySelectorAll('.object-tools li'))
                .filter(item => item.getClientRects().length)
                .map(item => [item, item.firstElementChild.getBoundingClientRect()])
                .filter(([, b]) => lines.some(t => b.left < t.right && t.left < b.right
                                                  && b.top < t.bottom && t.top < b.bottom))
                .map(([item]) => item.textContent.trim());
        }"""
    )


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["1280px", "390px"])
def test_the_task_pages_buttons_leave_its_heading_readable(page, login, live_server, viewport):
    # A task's heading is its dotted name, id and status, as wide as the page at 1,280 px: the
    # buttons floated over its right end (Django lifts them 48 px, onto a short heading).
    task = TaskFactory(name="demo_project.demo.tasks.build_report", status=Status.CANCELLED)
    UserFactory(username="ops", password="ops-pass", is_staff=True, is_superuser=True)
    page.set_viewport_size(viewport)
    login(page, "ops", "ops-pass", next_url="/admin/")
    page.goto(live_server.url + f"/admin/jobs/task/{task.pk}/change/")
    assert covered_heading(page) == []
    assert overflow(page) == 0
