"""The dashboard's first line: the health verdict worded for an operator, worst first."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs.admin import banner
from jobs.maintenance import pausing
from jobs.web import health
from tests.factories import TaskFactory, UserFactory, WorkerFactory
from tests.helpers import staff

pytestmark = pytest.mark.django_db


def banner_of(page: str) -> str:
    match = re.search(r'<section class="jobs-banner.*?</section>', page, re.S)
    assert match, "no banner"
    return match.group(0)


def test_no_live_worker_is_named_first_with_what_to_do(client):
    now = timezone.now()
    TaskFactory(queue="emails", run_after=now - timedelta(hours=2))  # over the 10 min limit
    WorkerFactory(last_heartbeat_at=now - timedelta(minutes=3))
    client.force_login(staff("view_task"))
    page = banner_of(client.get(reverse("admin:jobs_task_dashboard")).content.decode())
    assert 'data-level="critical"' in page
    headline = re.search(r'data-live="banner-headline">(.*?)</p>', page).group(1)
    assert headline == (
        "No worker has sent a heartbeat for 3 min: start one with manage.py runworker."
    )
    more = re.findall(r"<li>(.*?)</li>", page)
    assert more == [
        "Queue emails: the oldest waiting task has waited 2 h (limit 10 min): start more "
        "workers, or one that serves it (manage.py runworker --queues emails)."
    ]


def test_a_healthy_system_says_so_in_one_line():
    WorkerFactory()
    TaskFactory()
    said = banner.banner()
    assert said["level"] == "ok"
    assert re.fullmatch(
        r"Healthy: 1 queue within limits, last worker heartbeat \d+ s ago\.", said["headline"]
    )
    assert said["more"] == said["paused"] == []


def test_a_healthy_system_without_tasks_does_not_count_zero_queues():
    WorkerFactory()
    said = banner.banner()
    assert said["level"] == "ok"
    assert re.fullmatch(
        r"Healthy: no tasks queued, last worker heartbeat \d+ s ago\.", said["headline"]
    )


def test_a_paused_queue_is_shown_as_paused_not_unhealthy():
    WorkerFactory()
    TaskFactory(queue="emails", run_after=timezone.now() - timedelta(days=1))
    pausing.pause("emails", user=UserFactory(username="ops"))
    said = banner.banner()
    assert said["level"] == "ok"
    (line,) = said["paused"]
    assert line.startswith("Queue emails is paused (since ")
    assert line.endswith(" by ops): its tasks wait until it is resumed.")


def test_the_banner_judges_nothing_itself(monkeypatch):
    verdict = health.Health(
        problems=[health.Problem("waiting", "m", "q", headline="Made up", advice="do this")]
    )
    monkeypatch.setattr(health, "check", lambda **kwargs: verdict)
    assert banner.banner()["headline"] == "Made up: do this."


def test_broken_health_settings_are_said_not_a_500(client, settings):
    settings.JOBS_HEALTH_MAX_FAILURE_RATE = 5
    said = banner.banner()
    assert said["level"] == "critical"
    assert said["headline"].startswith(
        "The health check cannot judge: JOBS_HEALTH_MAX_FAILURE_RATE"
    )
    client.force_login(staff("view_task"))
    assert client.get(reverse("admin:jobs_task_dashboard")).status_code == 200
