"""The workers page: live and recent workers, their current tasks, and "stop after current
tasks" behind its own permission."""

from datetime import timedelta

import pytest
from django.contrib.messages import get_messages
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from jobs.admin import workers
from jobs.models import Worker
from tests.factories import TaskFactory, UserFactory, WorkerFactory
from tests.helpers import staff

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:jobs_worker_changelist")


def logged_in(*codenames, username="operator"):
    client = Client()
    client.force_login(staff("view_worker", *codenames, username=username))
    return client


def stop(client, *selected):
    data = {"action": "stop_after_current_tasks", "_selected_action": [w.pk for w in selected]}
    response = client.post(CHANGELIST, data, follow=True)
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_live_and_recent_workers_with_their_queues_and_current_tasks():
    alive = WorkerFactory(hostname="web-1", queues=["emails", "imports"], concurrency=4,
                          busy_processes=2)  # fmt: skip
    stopped = WorkerFactory(hostname="web-2", stopped=True)
    silent = WorkerFactory(hostname="web-3", silent=True)
    old = WorkerFactory(hostname="web-4", last_heartbeat_at=timezone.now() - timedelta(days=3),
                        stopped_at=timezone.now() - timedelta(days=3))  # fmt: skip
    running = TaskFactory(running=True, name="app.tasks.import_contacts", worker_id=alive.pk)
    other = TaskFactory(running=True, name="app.tasks.send_mail", worker_id=alive.pk)
    TaskFactory(succeeded=True, name="app.tasks.finished_one", worker_id=alive.pk)
    page = logged_in().get(CHANGELIST).content.decode()
    for worker in (alive, stopped, silent):
        assert f">{worker.hostname}<" in page
    assert old.hostname not in page
    assert "emails, imports" in page
    assert "2 / 4" in page
    assert reverse("admin:jobs_task_change", args=[running.pk]) in page
    assert reverse("admin:jobs_task_change", args=[other.pk]) in page
    assert ">import_contacts<" in page
    assert "finished_one" not in page
    assert 'jobs-badge--ok">alive<' in page
    assert "silent (killed or unreachable)" in page
    assert "stopped 20" in page


def test_the_page_reads_the_running_tasks_in_one_query():
    def queries_for_the_page():
        client.get(CHANGELIST)  # sessions and permissions cached
        with CaptureQueriesContext(connection) as captured:
            assert client.get(CHANGELIST).status_code == 200
        return len(captured)

    client = logged_in()
    worker = WorkerFactory()
    TaskFactory.create_batch(3, running=True, worker_id=worker.pk)
    one = queries_for_the_page()
    for _ in range(5):
        worker = WorkerFactory()
        TaskFactory.create_batch(3, running=True, worker_id=worker.pk)
    assert queries_for_the_page() == one


def test_stop_after_current_tasks_flags_live_workers_and_reports_the_others():
    alive, asked_before = WorkerFactory(hostname="a"), WorkerFactory(hostname="b")
    stopped, silent = WorkerFactory(stopped=True), WorkerFactory(silent=True)
    client = logged_in("stop_worker")
    assert stop(client, asked_before) == ["1 worker asked to stop after current tasks"]
    messages = stop(client, alive, asked_before, stopped, silent)
    assert messages == [
        "1 worker asked to stop after current tasks; 3 skipped: 1 already asked to stop, "
        "2 not running (stopped or silent)"
    ]
    alive.refresh_from_db()
    assert alive.stop_requested_at is not None
    assert alive.stop_requested_by.username == "operator"
    for dead in (stopped, silent):
        dead.refresh_from_db()
        assert dead.stop_requested_at is None
    page = client.get(CHANGELIST).content.decode()
    assert page.count("stopping after current tasks (asked by operator)") == 2
    assert stop(client, stopped) == ["0 workers asked to stop after current tasks; 1 skipped: "
                                     "not running (stopped or silent)"]  # fmt: skip


def test_asking_twice_at_once_asks_once():
    worker = WorkerFactory()
    first = workers.stop_after_current(Worker.objects.filter(pk=worker.pk))
    second = workers.stop_after_current(Worker.objects.filter(pk=worker.pk))
    assert (first, second) == ((1, {}), (0, {"already asked to stop": 1}))


def test_stopping_needs_its_permission_and_the_rows_stay_read_only():
    worker = WorkerFactory()
    viewer = logged_in(username="viewer")
    page = viewer.get(CHANGELIST).content.decode()
    assert 'value="stop_after_current_tasks"' not in page
    stop(viewer, worker)
    change = reverse("admin:jobs_worker_change", args=[worker.pk])
    assert viewer.post(change, {"concurrency": "99"}).status_code == 403
    assert viewer.get(reverse("admin:jobs_worker_add")).status_code == 403
    delete = reverse("admin:jobs_worker_delete", args=[worker.pk])
    assert viewer.post(delete, {"post": "yes"}).status_code == 403
    nobody = Client()
    nobody.force_login(UserFactory(username="staff-only", is_staff=True))
    assert nobody.get(CHANGELIST).status_code == 403
    data = {"action": "stop_after_current_tasks", "_selected_action": [worker.pk]}
    nobody.post(CHANGELIST, data)
    assert Client().post(CHANGELIST, data).status_code == 302  # to the login page
    worker.refresh_from_db()
    assert (worker.stop_requested_at, worker.concurrency) == (None, 4)


def test_hostile_selection_and_search_do_not_break_the_page():
    WorkerFactory()
    client = logged_in("stop_worker")
    assert client.get(CHANGELIST, {"q": "a\x00b"}).status_code == 302  # Django's error flag
    assert client.get(CHANGELIST, {"q": "x" * 10_000}).status_code == 200
    data = {"action": "stop_after_current_tasks", "_selected_action": ["nope\x00"]}
    assert client.post(CHANGELIST, data).status_code == 302
    assert not Worker.objects.filter(stop_requested_at__isnull=False).exists()
