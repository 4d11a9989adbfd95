"""The scheduled-tasks page: delayed tasks soonest first and the next run of every enabled
schedule, behind the permission to view tasks."""

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from jobs.maintenance import periodic
from jobs.models import Schedule
from tests.factories import ScheduleFactory, TaskFactory, UserFactory
from tests.helpers import staff

pytestmark = pytest.mark.django_db

PAGE = reverse("admin:jobs_schedule_scheduled")


@pytest.fixture(autouse=True)
def no_code_schedules():
    saved = dict(periodic._declared)
    periodic._declared.clear()
    yield
    periodic._declared.clear()
    periodic._declared.update(saved)


def viewer():
    client = Client()
    client.force_login(staff("view_task", username="viewer"))
    return client


def test_delayed_tasks_soonest_first_and_the_next_runs(settings):
    now = timezone.now()
    later = TaskFactory(name="app.tasks.later_one", run_after=now + timedelta(hours=2))
    sooner = TaskFactory(name="app.tasks.sooner_one", run_after=now + timedelta(minutes=5),
                         summary="<script>alert(1)</script>")  # fmt: skip
    TaskFactory(name="app.tasks.due_now")  # due already: not scheduled
    TaskFactory(name="app.tasks.retrying_one", retrying=True, run_after=now + timedelta(hours=1))
    TaskFactory(name="app.tasks.done_one", succeeded=True, run_after=now + timedelta(hours=1))
    settings.JOBS_SCHEDULES = {"nightly": {"task": "tests.testapp.tasks.add", "cron": "0 3 * * *",
                                           "args": [1, 2]}}  # fmt: skip
    periodic.run_due()
    ScheduleFactory(name="hourly", source=Schedule.Source.ADMIN, cron="0 * * * *",
                    kwargs={"a": 1}, args=[])  # fmt: skip
    ScheduleFactory(name="paused", source=Schedule.Source.ADMIN, enabled=False)
    ScheduleFactory(name="gone", source=Schedule.Source.ADMIN, task="tests.testapp.tasks.nope")
    page = viewer().get(PAGE).content.decode()
    delayed = page[page.index('id="jobs-delayed-tasks"') :]
    assert delayed.index("sooner_one") < delayed.index("later_one")
    for absent in ("due_now", "retrying_one", "done_one"):
        assert absent not in delayed
    assert "<script>alert(1)" not in page
    assert "&lt;script&gt;" in page
    assert reverse("admin:jobs_task_change", args=[later.pk]) in page
    assert reverse("admin:jobs_task_change", args=[sooner.pk]) in page
    assert "2 in all" in page
    upcoming = page[page.index('id="jobs-upcoming-runs"') : page.index('id="jobs-delayed-tasks"')]
    assert upcoming.index("hourly") < upcoming.index("nightly")  # the sooner slot first
    assert "paused" not in upcoming
    assert "Will not run: No task is importable as &#x27;tests.testapp.tasks.nope&#x27;" in upcoming
    assert "[1, 2]" in upcoming
    assert "{&quot;a&quot;: 1}" in upcoming
    assert "settings or code" in upcoming
    assert "admin" in upcoming


def test_the_page_needs_the_permission_to_view_tasks():
    schedules_only = Client()
    schedules_only.force_login(staff("view_schedule", username="schedules"))
    assert schedules_only.get(PAGE).status_code == 403
    nobody = Client()
    nobody.force_login(UserFactory(username="staff", is_staff=True))
    assert nobody.get(PAGE).status_code == 403
    assert Client().get(PAGE).status_code == 302  # to the login page
    assert viewer().get(PAGE).status_code == 200


def test_the_page_is_linked_from_the_task_list_and_the_app():
    client = viewer()
    assert PAGE in client.get(reverse("admin:jobs_task_changelist")).content.decode()
    assert PAGE in client.get(reverse("admin:app_list", args=["jobs"])).content.decode()
