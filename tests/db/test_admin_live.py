"""The JSON the admin's pages poll (jobs.admin.live): who may read it, and that its figures are
the database's, worded as the pages word them, with hostile text kept as text."""

import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from demo_project.demo.models import Notification
from jobs import transitions
from jobs.admin import banner
from jobs.error_records import ErrorRecord
from jobs.maintenance import pausing
from jobs.models import Task
from jobs.states import Status
from tests.factories import TaskFactory, UserFactory, WorkerFactory
from tests.helpers import staff

pytestmark = pytest.mark.django_db

DASHBOARD = reverse("admin:jobs_task_live_dashboard")
ROWS = reverse("admin:jobs_task_live")
# A queue name, a task name and an error as code may give them: markup, RTL overrides, quotes.
HOSTILE = '<script>alert("x")</script>\u202egnp.exe'


def one(task) -> str:
    return reverse("admin:jobs_task_live_one", args=[task.pk])


def rows_url(*tasks) -> str:
    return ROWS + "?" + "&".join(f"id={task.pk}" for task in tasks)


def client_for(user) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


@pytest.fixture
def viewer():
    return client_for(staff("view_task", username="viewer"))


# Who may read it ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("who", "expected"),
    [
        ("anonymous", 302),  # sent to the admin's login, as for the pages
        ("member", 302),  # not staff: the admin's door is shut whatever the permissions
        ("staff", 403),  # staff without jobs.view_task: is_staff alone grants nothing
        ("viewer", 200),  # jobs.view_task, owner of none of the tasks: the owner is irrelevant
        ("superuser", 200),
    ],
)
@pytest.mark.parametrize("endpoint", ["dashboard", "rows", "one"])
def test_the_live_endpoints_have_the_pages_permissions(who, expected, endpoint):
    owner = UserFactory(username="owner")
    task = TaskFactory(owner=owner)
    users = {
        "anonymous": None,
        "member": UserFactory(username="member"),
        "staff": staff(username="plain-staff"),
        "viewer": staff("view_task", username="viewer"),
        "superuser": UserFactory(username="root", is_staff=True, is_superuser=True),
    }
    if who == "member":  # holding the permission, but not staff
        users["member"].user_permissions.set(
            staff("view_task", username="x").user_permissions.all()
        )
    url = {"dashboard": DASHBOARD, "rows": rows_url(task), "one": one(task)}[endpoint]
    response = client_for(users[who]).get(url)
    assert response.status_code == expected
    # Never cached, whoever asks: figures and task names are not for a shared cache.
    assert "no-store" in response["Cache-Control"]
    if expected == 302:
        assert response["Location"].startswith(reverse("admin:login"))
    elif expected == 403:
        assert response.json() == {"error": "The jobs.view_task permission is required."}
    else:
        assert response["Content-Type"] == "application/json"


def test_the_live_endpoints_only_read(viewer):
    task = TaskFactory()
    for url in (DASHBOARD, rows_url(task), one(task)):
        assert viewer.post(url).status_code == 405
    assert Task.objects.get(pk=task.pk).status == Status.PENDING


# The dashboard --------------------------------------------------------------------------------


def test_the_dashboards_figures_are_the_databases(viewer):
    now = timezone.now()
    TaskFactory.create_batch(3, queue="emails", run_after=now - timedelta(minutes=10))
    TaskFactory(queue="emails", running=True)
    TaskFactory.create_batch(2, queue="default", succeeded=True)
    TaskFactory(queue="default", failed=True)
    WorkerFactory(id="web-1:42:abcdef", queues=["emails"])
    body = viewer.get(DASHBOARD).json()

    queues = {queue["name"]: queue for queue in body["queues"]}
    assert sorted(queues) == ["default", "emails"]
    for name, queue in queues.items():
        shown = {url.rsplit("status__exact=", 1)[1]: n for n, url in queue["counts"]}
        for status in Status:
            assert shown[status] == Task.objects.filter(queue=name, status=status).count()
    assert queues["emails"]["level"] == "critical"  # 10 minutes, over the 5 minutes of red
    assert queues["emails"]["oldest"].startswith("10 min")
    assert queues["default"]["failure_rate"] == "33.3%"
    (worker,) = body["tables"]["workers"]
    assert worker[0]["text"] == "web-1:42:abcdef"
    assert worker[1]["text"] == "emails"
    assert len(body["chart"]["bars"]) == 60
    assert sum(int(bar["title"].rsplit(": ", 1)[1]) for bar in body["chart"]["bars"]) == 3
    assert body["banner"] == banner.banner()  # the same verdict the page shows


def test_the_dashboard_json_has_the_page_rows_words(viewer):
    # Delayed: no age that could tick between the two requests.
    TaskFactory(queue="emails", run_after=timezone.now() + timedelta(hours=1))
    page = viewer.get(reverse("admin:jobs_task_dashboard")).content.decode()
    body = viewer.get(DASHBOARD).json()
    (queue,) = body["queues"]
    for key in ("oldest", "run", "wait", "retries_text", "per_minute_title", "failure_title"):
        assert queue[key] in page, key
    assert body["held"] in page
    assert body["banner"]["headline"] in page


def test_a_hostile_queue_or_task_name_comes_back_as_the_same_text(viewer):
    TaskFactory(queue=HOSTILE, name=HOSTILE, failed=True)
    pausing.pause(HOSTILE)
    response = viewer.get(DASHBOARD)
    body = response.json()
    assert [queue["name"] for queue in body["queues"]] == [HOSTILE]
    assert body["tables"]["failures"][0][0]["text"] == HOSTILE
    assert any(HOSTILE in line for line in body["banner"]["paused"])
    # Text, not markup: nothing is escaped for HTML in JSON (the script sets it as text) ...
    assert "&lt;" not in response.content.decode()
    # ... and the page that embeds the same names escapes them.
    page = viewer.get(reverse("admin:jobs_task_dashboard")).content.decode()
    assert "<script>alert" not in page
    assert "&lt;script&gt;alert" in page


# The task list and the task page --------------------------------------------------------------


def test_the_rows_states_follow_the_database(viewer):
    waiting, running, other = TaskFactory(), TaskFactory(running=True), TaskFactory()
    body = viewer.get(rows_url(waiting, running)).json()
    assert set(body["tasks"]) == {str(waiting.pk), str(running.pk)}  # only the rows asked for
    assert body["tasks"][str(waiting.pk)]["status"] == Status.PENDING
    assert body["tasks"][str(waiting.pk)]["label"] == "Pending"

    Task.objects.filter(pk=running.pk).update(progress_current=3, progress_total=4)
    assert transitions.cancel(Task.objects.get(pk=waiting.pk))
    body = viewer.get(rows_url(waiting, running, other)).json()["tasks"]
    assert body[str(waiting.pk)] | {"age": ""} == {
        "status": Status.CANCELLED,
        "label": "Cancelled",
        "badge": "muted",
        "progress": "—",
        "progress_title": "",
        "attempts": f"0/{waiting.max_attempts}",
        "age": "",
        "run_time": "—",
    }
    assert body[str(running.pk)]["progress"] == "75 % (3 / 4)"
    assert body[str(running.pk)]["badge"] == "running"


def test_the_rows_say_why_a_task_waits_as_the_list_does(viewer):
    task = TaskFactory(queue="emails")
    pausing.pause("emails")
    body = viewer.get(rows_url(task)).json()
    assert body["tasks"][str(task.pk)]["label"] == "Pending (queue paused)"
    page = viewer.get(reverse("admin:jobs_task_changelist")).content.decode()
    assert "Pending (queue paused)" in page


def test_a_long_progress_message_is_cut_with_the_whole_of_it_on_hover(viewer):
    task = TaskFactory(running=True, progress_message="x" * 200)
    row = viewer.get(rows_url(task)).json()["tasks"][str(task.pk)]
    whole = "— — " + "x" * 200  # no figures yet, then the message
    assert row["progress"] == whole[:60] + "…"
    assert row["progress_title"] == whole


def test_ids_that_are_no_task_are_left_out(viewer):
    task = TaskFactory()
    url = f"{rows_url(task)}&id={uuid.uuid4()}&id=not-a-uuid&id=%00&id="
    body = viewer.get(url).json()
    assert list(body["tasks"]) == [str(task.pk)]


def test_at_most_500_ids_are_read(viewer):
    tasks = TaskFactory.create_batch(3)
    url = ROWS + "?" + "&".join([f"id={uuid.uuid4()}"] * 500 + [f"id={tasks[0].pk}"])
    assert viewer.get(url).json() == {"tasks": {}}


def test_the_rows_cost_a_few_queries_whatever_their_number(viewer, django_assert_max_num_queries):
    tasks = TaskFactory.create_batch(100, owner=UserFactory())
    viewer.get(rows_url(*tasks[:1]))  # the session and permissions, read once
    with django_assert_max_num_queries(8):
        body = viewer.get(rows_url(*tasks)).json()
    assert len(body["tasks"]) == 100


def test_the_task_page_json_says_which_buttons_apply_now():
    client = client_for(staff("view_task", "retry_task", "cancel_task", username="operator"))
    task = TaskFactory(running=True, attempts=1)
    body = client.get(one(task)).json()
    assert body["status"] == Status.RUNNING
    assert body["attempts"] == f"1/{task.max_attempts}"
    assert body["actions"] == {"can_retry": False, "can_cancel": True, "can_run_now": False}

    running = Task.objects.get(pk=task.pk)
    error = ErrorRecord(user_message=HOSTILE, exception="builtins.ValueError", message=HOSTILE)
    assert transitions.fail(running, error)
    body = client.get(one(task)).json()
    assert body["status"] == Status.FAILED
    assert body["last_error"] == HOSTILE
    assert body["actions"] == {"can_retry": True, "can_cancel": False, "can_run_now": False}

    # Without the permissions, no button applies, whatever the state.
    body = client_for(staff("view_task", username="reader")).get(one(task)).json()
    assert body["actions"] == {"can_retry": False, "can_cancel": False, "can_run_now": False}


def test_a_task_that_is_gone_is_a_404(viewer):
    task = TaskFactory()
    url = one(task)
    Task.objects.filter(pk=task.pk).delete()
    response = viewer.get(url)
    assert response.status_code == 404
    assert response.json() == {"error": "No such task."}
    assert viewer.get(reverse("admin:jobs_task_live_one", args=["not-an-id"])).status_code == 404
    # A NUL (PostgreSQL refuses it in a query) or a huge id: no task, never a 500.
    assert viewer.get("/admin/jobs/task/%00/live/").status_code == 404
    assert viewer.get(f"/admin/jobs/task/{'9' * 10_000}/live/").status_code == 404


def test_the_demos_notifications_wait_for_a_page_not_a_poll():
    # The demo turns unread notifications into messages on the next page: the admin's live
    # figures, asked for as JSON, are no page and leave them unread.
    user = UserFactory(username="ops", is_staff=True, is_superuser=True)
    note = Notification.objects.create(user=user, text="Import of contacts.csv is done")
    client = client_for(user)
    json_only = {"Accept": "application/json"}
    assert client.get(DASHBOARD, headers=json_only).status_code == 200
    note.refresh_from_db()
    assert note.shown_at is None
    page = client.get(reverse("admin:jobs_task_dashboard")).content.decode()
    assert "Import of contacts.csv is done" in page


def test_the_task_page_poll_reads_no_payload_result_or_history(viewer):
    task = TaskFactory(payload={"args": ["x" * 100_000], "kwargs": {}})
    viewer.get(one(task))  # the session and permissions, read once
    with CaptureQueriesContext(connection) as queries:
        assert viewer.get(one(task)).json()["status"] == Status.PENDING
    read = " ".join(query["sql"] for query in queries.captured_queries)
    for column in ("payload", "result", "error_details"):
        assert f'"jobs_task"."{column}"' not in read, column
