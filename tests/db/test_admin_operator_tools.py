"""The operator's everyday tools in the task list: run a waiting task now, find a task by its
short name, summary or owner, read its summary in the list."""

from datetime import timedelta

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from jobs.admin import actions, paginator
from jobs.models import Task
from jobs.states import Status
from tests.db.conftest import received
from tests.factories import TaskFactory, UserFactory
from tests.helpers import offered_buttons, staff

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:jobs_task_changelist")


def later(seconds=3600):
    return timezone.now() + timedelta(seconds=seconds)


def logged_in(*codenames, username="operator"):
    client = Client()
    client.force_login(staff("view_task", *codenames, username=username))
    return client


def messages_of(response):
    return [str(m) for m in get_messages(response.wsgi_request)]


def run_now(client, tasks, **extra):
    data = {"action": "run_now_tasks", "_selected_action": [str(t.pk) for t in tasks], **extra}
    return messages_of(client.post(CHANGELIST, data, follow=True))


# Run now ---------------------------------------------------------------------------------------


def test_run_now_makes_delayed_and_backing_off_tasks_due_and_reports_the_rest():
    client = logged_in("retry_task")
    delayed = TaskFactory(run_after=later())
    backing_off = TaskFactory(retrying=True, run_after=later(60))
    due = TaskFactory()  # due already
    running = TaskFactory(running=True)
    done = TaskFactory(succeeded=True)
    before = timezone.now()
    messages = run_now(client, [delayed, backing_off, due, running, done])
    assert messages == [
        "2 tasks set to run now; 3 skipped: 1 already due, 1 already running, 1 already succeeded"
    ]
    for task in (delayed, backing_off):
        task.refresh_from_db()
        assert before <= task.run_after <= timezone.now()
    # Its status stays: a retrying task keeps its attempts and its error history.
    assert (delayed.status, backing_off.status, backing_off.attempts) == (
        Status.PENDING, Status.RETRYING, 1,
    )  # fmt: skip
    assert Task.objects.get(pk=running.pk).status == Status.RUNNING


def test_run_now_needs_the_retry_permission():
    task = TaskFactory(run_after=later())
    viewer = logged_in(username="viewer")
    assert 'value="run_now_tasks"' not in viewer.get(CHANGELIST).content.decode()
    assert not any("run now" in m for m in run_now(viewer, [task]))
    page = viewer.get(reverse("admin:jobs_task_change", args=[task.pk])).content.decode()
    assert reverse("admin:jobs_task_run_now", args=[task.pk]) not in page  # not even hidden
    assert viewer.post(reverse("admin:jobs_task_run_now", args=[task.pk])).status_code == 403
    canceller = logged_in("cancel_task", username="canceller")  # another permission: not enough
    assert canceller.post(reverse("admin:jobs_task_run_now", args=[task.pk])).status_code == 403
    anonymous = Client().post(reverse("admin:jobs_task_run_now", args=[task.pk]))
    assert anonymous.status_code == 302  # to the login page
    assert Task.objects.get(pk=task.pk).run_after > timezone.now() + timedelta(minutes=50)


def test_the_run_now_button_shows_only_on_a_task_due_later_and_acts_by_post():
    client = logged_in("retry_task")
    delayed, due = TaskFactory(run_after=later()), TaskFactory()
    url = reverse("admin:jobs_task_run_now", args=[delayed.pk])
    page = client.get(reverse("admin:jobs_task_change", args=[delayed.pk])).content.decode()
    assert url in offered_buttons(page)
    page = client.get(reverse("admin:jobs_task_change", args=[due.pk])).content.decode()
    assert reverse("admin:jobs_task_run_now", args=[due.pk]) not in offered_buttons(page)
    assert client.get(url).status_code == 405
    response = client.post(url, follow=True)
    assert messages_of(response) == ["1 task set to run now"]
    assert Task.objects.get(pk=delayed.pk).run_after <= timezone.now()
    again = client.post(url, follow=True)
    assert messages_of(again) == ["0 tasks set to run now; 1 skipped: already due"]


def test_run_now_of_a_whole_selection_beyond_the_count_confirms_first(monkeypatch):
    monkeypatch.setattr(paginator, "EXACT_COUNT_LIMIT", 5)
    client = logged_in("retry_task")
    TaskFactory.create_batch(6, run_after=later())
    TaskFactory(succeeded=True)
    first = Task.objects.order_by("pk").first()
    data = {"action": "run_now_tasks", "select_across": "1", "index": "0"}
    page = client.post(CHANGELIST, {**data, "_selected_action": [str(first.pk)]})
    assert page.context["plan"] == [
        "6 will be set to run now",
        "1 will be skipped: already succeeded",
    ]
    confirm = {
        **data,
        "_selected_action": page.context["selected"],
        page.context["counted_field"]: page.context["token"],
        "post": "yes",
    }
    response = client.post(CHANGELIST, confirm, follow=True)
    assert messages_of(response) == ["6 tasks set to run now; 1 skipped: already succeeded"]
    assert not Task.objects.filter(run_after__gt=timezone.now()).exists()


def test_run_now_leaves_a_task_claimed_meanwhile_alone():
    task = TaskFactory(run_after=later())
    selection = Task.objects.filter(pk=task.pk)
    # A worker claims it between the operator's click and the update (what the claim writes).
    Task.objects.filter(pk=task.pk).update(status=Status.RUNNING, attempts=1)
    report = actions.run_now(selection)
    assert report.message() == "0 tasks set to run now; 1 skipped: already running"


@pytest.mark.django_db(transaction=True)
def test_run_now_wakes_idle_postgresql_workers_once_per_queue(listener):
    delayed = [TaskFactory(queue=queue, run_after=later()) for queue in ("a", "a", "b")]
    due = TaskFactory(queue="c")  # already due: nothing to announce
    received(listener)  # the inserts' own notifications
    actions.run_now(Task.objects.filter(pk__in=[t.pk for t in [*delayed, due]]))
    assert sorted(received(listener)) == ["a", "b"]


# Search and summary ---------------------------------------------------------------------------


def search(client, term):
    page = client.get(CHANGELIST, {"q": term})
    assert page.status_code == 200
    return {str(task.pk) for task in page.context["cl"].result_list}


def test_search_finds_a_task_by_its_short_name_summary_or_owner():
    client = logged_in()
    alice = UserFactory(username="alice")
    imported = TaskFactory(name="demo_project.demo.tasks.import_contacts", owner=alice)
    report = TaskFactory(name="demo_project.demo.tasks.build_report", summary="Report of Acme Ltd")
    other = TaskFactory(name="demo_project.demo.tasks.reimport_contacts")
    assert search(client, "import_contacts") == {str(imported.pk)}  # not reimport_contacts
    assert search(client, "demo_project.demo.tasks.build") == {str(report.pk)}
    assert search(client, "acme") == {str(report.pk)}
    assert search(client, "alice") == {str(imported.pk)}
    assert search(client, "nobody-at-all") == set()
    assert str(other.pk) in search(client, "reimport_contacts")


@pytest.mark.parametrize("term", ["%", "_", "\\", ".", "a" * 5000, "%ED%A0%80"])
def test_hostile_search_terms_find_nothing_and_break_nothing(term):
    client = logged_in()
    UserFactory(username="alice")
    TaskFactory(name="tests.testapp.tasks.add", summary="plain")
    # Sent as typed (%ED%A0%80: a lone surrogate's UTF-8 bytes, which Django decodes as U+FFFD).
    page = client.get(f"{CHANGELIST}?q={term}")
    assert page.status_code == 200
    assert list(page.context["cl"].result_list) == []


def test_a_search_with_a_nul_is_refused_as_django_refuses_a_bad_filter():
    client = logged_in()
    page = client.get(CHANGELIST, {"q": "alice\x00"})
    assert (page.status_code, page["Location"]) == (302, f"{CHANGELIST}?e=1")


def test_the_list_shows_a_summary_cut_short_with_the_whole_on_hover():
    client = logged_in()
    long = "Import of " + "very-long-file-name-" * 10 + ".csv"
    TaskFactory(summary=long)
    TaskFactory(summary="Import of <b>bold</b>.csv")
    page = client.get(CHANGELIST).content.decode()
    assert f'title="{long}"' in page
    assert long[:60] + "…" in page
    assert "Import of &lt;b&gt;bold&lt;/b&gt;.csv" in page  # escaped, never markup
