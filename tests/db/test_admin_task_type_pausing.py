"""Pausing a task type from the admin: the dashboard's form and list, the task page's button,
the task list's note; behind ``jobs.pause_task_type``, and safe with any name."""

import re

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from jobs.maintenance import pausing
from jobs.models import TaskPause
from tests.factories import TaskFactory, WorkerFactory
from tests.helpers import staff

pytestmark = pytest.mark.django_db

DASHBOARD = reverse("admin:jobs_task_dashboard")
PAUSE_TYPE = reverse("admin:jobs_task_pause_type")
ADD = "tests.testapp.tasks.add"


@pytest.fixture
def operator(client):
    client.force_login(staff("view_task", "pause_task_type", username="operator"))
    return client


def messages_of(response):
    return [str(m) for m in get_messages(response.wsgi_request)]


def paused_types_table(page):
    match = re.search(r'<table class="jobs-table" id="jobs-paused-types">(.*?)</table>', page, re.S)
    return match.group(1) if match else ""


def test_pause_from_the_dashboard_list_it_and_resume(operator):
    TaskFactory.create_batch(2, name=ADD)
    page = operator.get(DASHBOARD).content.decode()
    assert "No task type is paused." in page
    assert 'id="jobs-pause-type"' in page
    response = operator.post(PAUSE_TYPE, {"name": ADD, "action": "pause"}, follow=True)
    assert messages_of(response) == [
        f"Task type {ADD} paused: workers stop claiming its tasks, in every queue, at their "
        "next look; its waiting tasks wait, running ones finish."
    ]
    assert response.redirect_chain[-1][0] == DASHBOARD
    assert TaskPause.objects.get().paused_by.username == "operator"
    table = paused_types_table(operator.get(DASHBOARD).content.decode())
    assert ADD in table
    assert "task type paused" in table
    assert '<td class="jobs-num"><a href=' in table
    assert ">2</a>" in table
    assert "operator" in table
    response = operator.post(PAUSE_TYPE, {"name": ADD, "action": "pause"}, follow=True)
    assert "already paused" in messages_of(response)[0]
    response = operator.post(PAUSE_TYPE, {"name": ADD, "action": "resume"}, follow=True)
    assert messages_of(response) == [f"Task type {ADD} resumed: workers claim its tasks again."]
    assert pausing.paused_task_types() == set()
    response = operator.post(PAUSE_TYPE, {"name": ADD, "action": "resume"}, follow=True)
    assert "was not paused" in messages_of(response)[0]


def test_a_registered_type_without_tasks_can_be_paused(operator):
    response = operator.post(PAUSE_TYPE, {"name": ADD, "action": "pause"}, follow=True)
    assert "paused: workers stop claiming" in messages_of(response)[0]


def test_a_name_no_task_carries_is_refused(operator):
    response = operator.post(PAUSE_TYPE, {"name": "app.tpyo", "action": "pause"}, follow=True)
    assert messages_of(response)[0].startswith(
        "No task type named app.tpyo: no task of that name is registered or stored"
    )
    assert not TaskPause.objects.exists()


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "Name a task type to pause or resume."),
        ("   ", "Name a task type to pause or resume."),
        ("a\x00b", "it holds a character that is not printable"),
        ("tab\there", "it holds a character that is not printable"),
        ("x" * 201, "it is 201 characters long, over the limit of 200"),
        ("x" * 100_000, "it is 100,000 characters long, over the limit of 200"),
    ],
)
@pytest.mark.parametrize("action", ["pause", "resume"])
def test_what_is_no_task_name_is_refused_plainly(operator, name, message, action):
    response = operator.post(PAUSE_TYPE, {"name": name, "action": action}, follow=True)
    assert response.status_code == 200
    assert message in messages_of(response)[0]
    assert not TaskPause.objects.exists()


def test_a_surrogate_sent_as_bytes_is_no_task_name(operator):
    # A lone surrogate cannot be encoded by a browser: its UTF-8 bytes arrive, and are read as
    # replacement characters, a name no task has.
    response = operator.post(
        PAUSE_TYPE,
        data="name=a%ED%A0%80b&action=pause",
        content_type="application/x-www-form-urlencoded",
        follow=True,
    )
    assert messages_of(response)[0].startswith("No task type named a")
    assert not TaskPause.objects.exists()


def test_a_name_with_html_is_shown_escaped(operator):
    name = "app.<script>alert(1)</script>"
    TaskFactory(name=name)
    response = operator.post(PAUSE_TYPE, {"name": name, "action": "pause"}, follow=True)
    page = response.content.decode()
    assert "<script>alert(1)</script>" not in page
    assert "app.&lt;script&gt;alert(1)&lt;/script&gt;" in paused_types_table(page)
    assert pausing.paused_task_types() == {name}


def test_pausing_needs_its_own_permission_and_a_post(client):
    TaskFactory(name=ADD)
    anonymous = client.post(PAUSE_TYPE, {"name": ADD, "action": "pause"})
    assert anonymous.status_code == 302
    assert "/login/" in anonymous["Location"]
    # Pausing queues is another permission: it does not pause task types.
    client.force_login(staff("view_task", "pause_queue", username="queues-only"))
    assert client.post(PAUSE_TYPE, {"name": ADD, "action": "pause"}).status_code == 403
    page = client.get(DASHBOARD).content.decode()
    assert 'id="jobs-pause-type"' not in page
    pausing.pause_task_type(ADD)
    assert client.post(PAUSE_TYPE, {"name": ADD, "action": "resume"}).status_code == 403
    # Seen, though, by whoever sees the dashboard: without its Resume button.
    table = paused_types_table(client.get(DASHBOARD).content.decode())
    assert ADD in table
    assert "Resume" not in table
    client.force_login(staff("view_task", "pause_task_type", username="operator"))
    assert client.get(PAUSE_TYPE).status_code == 405
    assert pausing.paused_task_types() == {ADD}


def test_the_task_page_pauses_its_type_and_comes_back(operator):
    task = TaskFactory(name=ADD)
    url = reverse("admin:jobs_task_change", args=[task.pk])
    page = operator.get(url).content.decode()
    assert "Pause task type" in page
    response = operator.post(PAUSE_TYPE, {"name": ADD, "action": "pause", "next": url}, follow=True)
    assert response.redirect_chain[-1][0] == url
    page = response.content.decode()
    assert "Resume task type" in page
    assert f"Task type {ADD} paused" in page  # why it waits, on its page
    listing = operator.get(reverse("admin:jobs_task_changelist")).content.decode()
    assert "Pending (task type paused)" in listing


def test_the_way_back_never_leaves_the_site(operator):
    for away in ("https://evil.example/", "//evil.example/x", "javascript:alert(1)"):
        response = operator.post(PAUSE_TYPE, {"name": ADD, "action": "pause", "next": away})
        assert response["Location"] == DASHBOARD


def test_the_task_page_offers_no_button_without_the_permission(client):
    task = TaskFactory(name=ADD)
    client.force_login(staff("view_task", username="viewer"))
    page = client.get(reverse("admin:jobs_task_change", args=[task.pk])).content.decode()
    assert "Pause task type" not in page


def test_the_workers_table_shows_each_queues_cap(operator):
    WorkerFactory(queues=["emails", "imports", "default"], queue_caps={"imports": 2, "emails": 8})
    page = operator.get(DASHBOARD).content.decode()
    row = re.search(r'id="jobs-workers">.*?<tbody[^>]*>(.*?)</tbody>', page, re.S).group(1)
    assert "emails (at most 8 at once), imports (at most 2 at once), default" in row
