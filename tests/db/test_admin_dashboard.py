"""The queue dashboard: what it shows, that it shows metrics' numbers, and who may pause."""

import re
from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils import timezone

from jobs import metrics
from jobs.maintenance import pausing
from jobs.metrics import Outcomes, Percentiles, Retries
from jobs.models import QueuePause
from jobs.states import Status
from tests.factories import TaskFactory, WorkerFactory
from tests.helpers import staff

pytestmark = pytest.mark.django_db

DASHBOARD = reverse("admin:jobs_task_dashboard")
PAUSE = reverse("admin:jobs_task_pause")


@pytest.fixture
def viewer(client):
    client.force_login(staff("view_task", username="viewer"))
    return client


@pytest.fixture
def operator(client):
    client.force_login(staff("view_task", "pause_queue", username="operator"))
    return client


def messages_of(response):
    return [str(m) for m in get_messages(response.wsgi_request)]


def queue_row(page, queue):
    match = re.search(rf'<tr data-queue="{queue}">(.*?)</tr>', page, re.S)
    assert match, f"no row for queue {queue}"
    return match.group(1)


def test_dashboard_shows_queues_workers_and_what_needs_attention(viewer):
    now = timezone.now()
    TaskFactory(queue="emails", name="app.send", run_after=now - timedelta(minutes=10))
    TaskFactory(queue="default", run_after=now - timedelta(seconds=90))
    TaskFactory(queue="default", running=True, started_at=now - timedelta(hours=2))
    TaskFactory.create_batch(3, queue="default", succeeded=True)
    TaskFactory(
        queue="emails",
        name="app.send",
        failed=True,
        error_details=[{"exception": "smtplib.SMTPException", "message": "relay refused"}],
    )
    WorkerFactory(id="web-1:42:abcdef", queues=["emails"])
    page = viewer.get(DASHBOARD).content.decode()

    emails, default = queue_row(page, "emails"), queue_row(page, "default")
    assert 'data-level="critical"' in emails  # 10 minutes > 5 minutes
    assert 'data-level="warning"' in default  # 90 s > 60 s
    counts = re.findall(r'<a href="[^"]*" data-live="count">(\d+)</a>', default)
    # pending, blocked, retrying, running, succeeded, failed, cancelled
    assert counts == ["1", "0", "0", "1", "3", "0", "0"]
    assert "status__exact=failed" in emails
    assert "smtplib.SMTPException" in page
    assert "relay refused" in page
    assert "web-1:42:abcdef" in page
    assert page.count("<rect ") == 60  # one bar a minute for the last hour
    # Updated in place from JSON (jobs.admin.live): a reload would wipe a half-typed form.
    assert 'http-equiv="refresh"' not in page
    assert 'data-jobs-live="dashboard"' in page
    assert "Pause" not in emails  # no permission to pause


def test_every_number_comes_from_metrics(viewer):
    """Feed the page a made-up snapshot: what it shows must be those numbers."""
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    minutes = [now - timedelta(minutes=60 - i) for i in range(60)]
    flow = metrics.Throughput(
        minutes=minutes, per_queue={"q": [7] * 60}, last_minute={"q": 13}, seconds=3600
    )
    queue = metrics.QueueOverview(
        queue="q",
        counts=dict.fromkeys(metrics.STATUSES, 0) | {"pending": 4242, "failed": 77},
        oldest_waiting=125.0,
        oldest_waiting_level="warning",
        throughput=flow.per_queue["q"],
        throughput_per_minute=7.0,
        run_time=Percentiles(p50=1.5, p95=42.0, count=9),
        wait_time=Percentiles(p50=0.25, p95=3.0, count=9),
        outcomes=Outcomes(succeeded=3, failed=1),
        retries=Retries(waiting=5, retried=6, extra_attempts=11),
        paused=True,
        finished_last_minute=13,
    )
    snapshot = metrics.Snapshot(
        now=now,
        window=timedelta(hours=1),
        queues=[queue],
        throughput=flow,
        workers=[],
        failures=[],
        waiting_too_long=[],
        running_too_long=[],
    )
    with mock.patch.object(metrics, "snapshot", return_value=snapshot):
        page = viewer.get(DASHBOARD).content.decode()
    row = queue_row(page, "q")
    for text in (
        ">4242<",
        ">77<",
        "2 min 5 s",
        '"7.0 a minute on average over the hour" data-live="last_minute">13<',
        "1.5 s / 42 s",
        "250 ms / 3.0 s",
        "25.0%",
        "5 waiting, 6 retried (+11)",
        "paused",
    ):
        assert text in row, text
    assert "No live worker" in page
    assert "11:00 to 11:59 UTC, one bar a minute, the last one the current minute" in page
    assert "the tallest is 7." in page
    assert "13 in the last minute, 7.0 a minute on average over the hour" in page


def test_dashboard_needs_the_view_permission(client):
    client.force_login(staff(username="nobody"))
    assert client.get(DASHBOARD).status_code == 403


def test_dashboard_is_linked_from_the_app_index_and_the_changelist(viewer):
    assert DASHBOARD in viewer.get(reverse("admin:app_list", args=["jobs"])).content.decode()
    assert DASHBOARD in viewer.get(reverse("admin:jobs_task_changelist")).content.decode()


def test_pause_and_resume_from_the_dashboard(operator):
    TaskFactory(queue="emails")
    page = operator.get(DASHBOARD).content.decode()
    assert 'value="pause"' in queue_row(page, "emails")
    response = operator.post(PAUSE, {"queue": "emails", "action": "pause"}, follow=True)
    assert messages_of(response) == [
        "Queue emails paused: workers stop claiming from it at their next look; "
        "running tasks finish."
    ]
    assert QueuePause.objects.get().paused_by.username == "operator"
    row = queue_row(response.content.decode(), "emails")
    assert "jobs-badge--paused" in row
    assert 'value="resume"' in row
    response = operator.post(PAUSE, {"queue": "emails", "action": "resume"}, follow=True)
    assert "Queue emails resumed" in messages_of(response)[0]
    assert not QueuePause.objects.exists()


def test_a_queue_without_tasks_can_be_paused_and_is_listed(operator):
    operator.post(PAUSE, {"queue": "reports", "action": "pause"})
    assert "jobs-badge--paused" in queue_row(operator.get(DASHBOARD).content.decode(), "reports")
    response = operator.post(PAUSE, {"queue": "reports", "action": "pause"}, follow=True)
    assert "already paused" in messages_of(response)[0]


def test_pausing_needs_the_permission_and_a_post(viewer):
    TaskFactory(queue="emails")
    assert viewer.post(PAUSE, {"queue": "emails", "action": "pause"}).status_code == 403
    assert pausing.paused_queues() == set()
    pausing.pause("emails")
    assert viewer.post(PAUSE, {"queue": "emails", "action": "resume"}).status_code == 403
    assert pausing.paused_queues() == {"emails"}


def test_pause_refuses_an_empty_queue_name_and_a_get(operator):
    response = operator.post(PAUSE, {"queue": " ", "action": "pause"}, follow=True)
    assert "Name a queue" in messages_of(response)[0]
    assert operator.get(PAUSE).status_code == 405
    assert not QueuePause.objects.exists()


def test_an_empty_dashboard(viewer):
    page = viewer.get(DASHBOARD).content.decode()
    assert "No tasks yet." in page
    assert "No failures." in page
    assert Status.PENDING.label in page


def test_a_workers_busy_processes_never_exceed_its_concurrency(viewer):
    """A worker claims ahead for the child about to be free: five tasks "running" in the table
    for a worker of concurrency 2 are two in children and three claimed ahead, shown as such."""
    worker = WorkerFactory(
        id="web-1:42:abcdef", concurrency=2, in_flight=5, busy_processes=2, running_tasks=2
    )
    TaskFactory.create_batch(5, running=True, worker_id=worker.pk)
    page = viewer.get(DASHBOARD).content.decode()
    row = re.search(
        r'<table class="jobs-table" id="jobs-workers">.*?<tbody[^>]*>(.*?)</tbody>', page, re.S
    )
    cells = re.findall(r'<td class="jobs-num">(.*?)</td>', row.group(1))
    assert cells == ["2 of 2", "2", "5"]
