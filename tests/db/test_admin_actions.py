"""Retry and cancel: what they do, what they report, and who may use them."""

import threading
import time
import uuid
from datetime import timedelta
from unittest import mock

import pytest
from django.contrib.messages import get_messages
from django.db import connection, transaction
from django.urls import reverse
from django.utils import timezone

from jobs import transitions
from jobs.admin import actions
from jobs.models import Task
from jobs.states import Status
from tests.factories import TaskFactory
from tests.helpers import offered_buttons, staff

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:jobs_task_changelist")


@pytest.fixture
def login(client):
    def log_in(*codenames):
        client.force_login(staff("view_task", *codenames))
        return client

    return log_in


def run_action(client, action, tasks, **extra):
    data = {"action": action, "_selected_action": [str(t.pk) for t in tasks], **extra}
    response = client.post(CHANGELIST, data, follow=True)
    assert response.status_code == 200
    return [str(m) for m in get_messages(response.wsgi_request)]


def statuses(tasks):
    found = dict(Task.objects.filter(pk__in=[t.pk for t in tasks]).values_list("pk", "status"))
    return [found[t.pk] for t in tasks]


def test_bulk_retry_requeues_failed_and_cancelled_and_reports_the_rest(login):
    client = login("retry_task")
    failed = TaskFactory.create_batch(3, failed=True)
    cancelled = TaskFactory(cancelled=True)
    running = TaskFactory(running=True)
    done = TaskFactory(succeeded=True)
    messages = run_action(client, "retry_tasks", [*failed, cancelled, running, done])
    assert messages == ["4 tasks requeued; 2 skipped: 1 already running, 1 already succeeded"]
    assert statuses([*failed, cancelled, running, done]) == [Status.PENDING] * 4 + [
        Status.RUNNING,
        Status.SUCCEEDED,
    ]
    requeued = Task.objects.get(pk=failed[0].pk)
    assert requeued.error_details == failed[0].error_details  # history kept
    assert requeued.max_attempts == 4  # one more attempt than it used
    assert requeued.last_error == ""


def test_bulk_retry_of_a_whole_filtered_selection(login):
    client = login("retry_task")
    failed = TaskFactory.create_batch(50, failed=True)
    TaskFactory.create_batch(2, succeeded=True)
    data = {"action": "retry_tasks", "select_across": "1", "index": "0"}
    data["_selected_action"] = [str(failed[0].pk)]
    response = client.post(f"{CHANGELIST}?status__exact=failed", data, follow=True)
    assert [str(m) for m in get_messages(response.wsgi_request)] == ["50 tasks requeued"]
    assert Task.objects.pending().count() == 50
    assert Task.objects.filter(status=Status.SUCCEEDED).count() == 2


def test_every_failed_import_of_the_last_hour_is_retried_and_nothing_else(login):
    client = login("retry_task")
    now = timezone.now()
    recent = TaskFactory.create_batch(
        3, failed=True, name="demo.tasks.import_contacts", finished_at=now - timedelta(minutes=20)
    )
    older = TaskFactory(
        failed=True, name="demo.tasks.import_contacts", finished_at=now - timedelta(hours=2)
    )
    other = TaskFactory(failed=True, name="demo.tasks.send_invites", finished_at=now)
    query = "?status__exact=failed&name=demo.tasks.import_contacts&finished=1h"
    listed = client.get(f"{CHANGELIST}{query}")
    assert "3 tasks" in listed.content.decode() or "3 task" in listed.content.decode()
    assert {t.pk for t in listed.context["cl"].result_list} == {t.pk for t in recent}
    data = {"action": "retry_tasks", "select_across": "1", "index": "0"}
    data["_selected_action"] = [str(recent[0].pk)]
    response = client.post(f"{CHANGELIST}{query}", data, follow=True)
    assert [str(m) for m in get_messages(response.wsgi_request)] == ["3 tasks requeued"]
    assert statuses(recent) == [Status.PENDING] * 3
    assert statuses([older, other]) == [Status.FAILED, Status.FAILED]


@pytest.mark.parametrize("value", ["2h", "", "1H", "x" * 5000, "7d' OR 1=1"])
def test_a_finished_window_not_offered_filters_nothing_out(login, value):
    client = login()
    tasks = [TaskFactory(failed=True), TaskFactory(succeeded=True), TaskFactory()]
    response = client.get(CHANGELIST, {"finished": value})
    assert response.status_code == 200
    assert {t.pk for t in response.context["cl"].result_list} == {t.pk for t in tasks}


def test_a_finished_window_with_a_nul_gets_the_admins_invalid_filter_answer(login):
    response = login().get(CHANGELIST, {"finished": "1h\x00"})
    assert (response.status_code, response["Location"]) == (302, f"{CHANGELIST}?e=1")


def test_bulk_retry_is_a_few_statements_whatever_the_selection(
    login, django_assert_max_num_queries
):
    client = login("retry_task")
    TaskFactory.create_batch(400, failed=True)
    data = {"action": "retry_tasks", "select_across": "1", "index": "0"}
    data["_selected_action"] = [str(Task.objects.first().pk)]
    # 18: the requeue reopens the workflows of what it moved (a savepoint and one UPDATE),
    # however many rows and workflows that is.
    with django_assert_max_num_queries(18):
        client.post(CHANGELIST, data)
    assert Task.objects.pending().count() == 400


def test_bulk_cancel_cancels_waiting_asks_running_and_skips_finished(login):
    client = login("cancel_task")
    pending = TaskFactory()
    retrying = TaskFactory(retrying=True)
    running = TaskFactory(running=True)
    asked = TaskFactory(running=True, cancel_requested_at=running.created_at)
    done = TaskFactory(succeeded=True)
    failed = TaskFactory(failed=True)
    messages = run_action(client, "cancel_tasks", [pending, retrying, running, asked, done, failed])
    assert messages == [
        "2 tasks cancelled; 1 running task asked to stop; 3 skipped: "
        "1 already failed, 1 already succeeded, 1 cancellation already requested"
    ]
    assert statuses([pending, retrying, running, done]) == [
        Status.CANCELLED,
        Status.CANCELLED,
        Status.RUNNING,
        Status.SUCCEEDED,
    ]
    running.refresh_from_db()
    assert running.cancel_requested_at is not None


def test_a_task_changed_by_a_worker_during_the_action_is_reported_not_overwritten():
    task = TaskFactory(failed=True)
    # The worker wins the race: requeue_many finds nothing to move.
    with mock.patch.object(transitions, "requeue_many", return_value=0):
        report = actions.retry(Task.objects.filter(pk=task.pk))
    assert report.message() == "0 tasks requeued; 1 skipped: changed by a worker meanwhile"


def test_report_wording():
    assert actions.ActionReport(done=1, verb="requeued").message() == "1 task requeued"
    report = actions.ActionReport(
        done=48, verb="requeued", skipped={"already running": 2}
    ).message()
    assert report == "48 tasks requeued; 2 skipped: already running"


@pytest.mark.parametrize("action", ["retry_tasks", "cancel_tasks"])
def test_staff_without_the_permission_is_not_offered_the_action_and_cannot_run_it(login, action):
    client = login()  # view only
    task = TaskFactory(failed=True) if action == "retry_tasks" else TaskFactory()
    page = client.get(CHANGELIST).content.decode()
    assert f'value="{action}"' not in page
    messages = run_action(client, action, [task])
    assert not any("requeued" in m or "cancelled" in m for m in messages)
    assert statuses([task]) == [Status.FAILED if action == "retry_tasks" else Status.PENDING]


def test_each_action_needs_its_own_permission(login):
    client = login("retry_task")
    page = client.get(CHANGELIST).content.decode()
    assert 'value="retry_tasks"' in page
    assert 'value="cancel_tasks"' not in page


def test_detail_buttons_retry_and_cancel(login):
    client = login("retry_task", "cancel_task")
    failed = TaskFactory(failed=True)
    pending = TaskFactory()
    page = client.get(reverse("admin:jobs_task_change", args=[pending.pk])).content.decode()
    assert reverse("admin:jobs_task_cancel", args=[pending.pk]) in offered_buttons(page)
    assert reverse("admin:jobs_task_retry", args=[pending.pk]) not in offered_buttons(page)
    response = client.post(reverse("admin:jobs_task_retry", args=[failed.pk]), follow=True)
    assert response.redirect_chain[-1][0] == reverse("admin:jobs_task_change", args=[failed.pk])
    assert "1 task requeued" in [str(m) for m in get_messages(response.wsgi_request)]
    response = client.post(reverse("admin:jobs_task_cancel", args=[pending.pk]), follow=True)
    assert "1 task cancelled" in [str(m) for m in get_messages(response.wsgi_request)]
    assert statuses([failed, pending]) == [Status.PENDING, Status.CANCELLED]


def test_detail_buttons_need_the_permission_and_a_post(login):
    client = login()
    failed = TaskFactory(failed=True)
    pending = TaskFactory()
    page = client.get(reverse("admin:jobs_task_change", args=[failed.pk])).content.decode()
    assert reverse("admin:jobs_task_retry", args=[failed.pk]) not in page
    assert client.post(reverse("admin:jobs_task_retry", args=[failed.pk])).status_code == 403
    assert client.post(reverse("admin:jobs_task_cancel", args=[pending.pk])).status_code == 403
    assert statuses([failed, pending]) == [Status.FAILED, Status.PENDING]
    allowed = login("retry_task")
    assert allowed.get(reverse("admin:jobs_task_retry", args=[failed.pk])).status_code == 405
    assert statuses([failed]) == [Status.FAILED]


def wait_until_a_query_waits_for_a_lock(deadline_seconds=10.0):
    """Poll PostgreSQL until some backend waits on a row lock (the action blocked on the row)."""
    deadline = time.monotonic() + deadline_seconds
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            if cursor.fetchone()[0]:
                return
            time.sleep(0.01)
    raise AssertionError("the action never waited for the worker's row lock")


@pytest.mark.django_db(transaction=True)
def test_a_task_that_finishes_during_a_bulk_cancel_keeps_its_outcome(postgres_only):
    """The worker holds the row while it records success; the cancel waits, then skips it."""
    task = TaskFactory(running=True)
    locked, release, found = threading.Event(), threading.Event(), {}

    def worker():
        try:
            with transaction.atomic():
                row = Task.objects.select_for_update().get(pk=task.pk)
                locked.set()
                release.wait(10)
                transitions.succeed(row, result=42)
        finally:
            connection.close()

    def operator():
        try:
            found["report"] = actions.cancel(Task.objects.filter(pk=task.pk))
        finally:
            connection.close()

    threads = [threading.Thread(target=worker), threading.Thread(target=operator)]
    threads[0].start()
    assert locked.wait(10)
    threads[1].start()
    wait_until_a_query_waits_for_a_lock()
    release.set()
    for thread in threads:
        thread.join(30)
    task.refresh_from_db()
    assert task.status == Status.SUCCEEDED
    assert task.result == 42
    assert task.cancel_requested_at is None
    assert found["report"].message() == "0 tasks cancelled; 1 skipped: already succeeded"


@pytest.mark.parametrize("view", ["admin:jobs_task_retry", "admin:jobs_task_cancel"])
def test_a_detail_button_on_a_deleted_task_says_so_as_the_admin_does(login, view):
    """As the admin's own change page does for a missing object: a warning, then its index."""
    client = login("retry_task", "cancel_task")
    missing = uuid.uuid4()
    response = client.post(reverse(view, args=[missing]))
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:index")
    own = client.get(reverse("admin:jobs_task_change", args=[missing]))  # Django's own way
    assert own["Location"] == response["Location"]
    said = [str(m) for m in get_messages(response.wsgi_request)]
    assert said == [f"task with ID “{missing}” doesn’t exist. Perhaps it was deleted?"]  # noqa: RUF001
    assert [str(m) for m in get_messages(own.wsgi_request)][-1] == said[0]
