"""History in the admin: the dashboard's charts and a page per task type, from the rollups."""

from datetime import UTC, timedelta
from urllib.parse import quote

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from jobs.humanize import seconds_text
from jobs.maintenance import rollups
from jobs.metrics.rollups import BOUNDS, bin_of, percentile
from jobs.models import Task, TaskRollup
from jobs.states import Status
from tests.factories import ErrorEntryFactory, TaskFactory
from tests.helpers import staff

pytestmark = pytest.mark.django_db
DASHBOARD = "admin:jobs_task_dashboard"
TYPE = "admin:jobs_task_type"
HOSTILE = "app.<script>alert(1)</script>"


@pytest.fixture
def viewer(client):
    client.force_login(staff("view_task", username="viewer"))
    return client


@pytest.fixture
def now():
    return timezone.now().astimezone(UTC)


def finished(status, age, now, **fields):
    at = now - age
    return TaskFactory(
        status=status,
        started_at=at - timedelta(seconds=2),
        run_after=at - timedelta(seconds=3),
        finished_at=at,
        attempts=fields.pop("attempts", 1),
        **fields,
    )


def type_page(client, name, period="hour"):
    return client.get(reverse(TYPE), {"name": name, "history": period})


def test_the_dashboard_charts_each_queue_and_task_type_with_links(viewer, now):
    finished(Status.SUCCEEDED, timedelta(minutes=10), now, name="app.a", queue="imports")
    finished(Status.FAILED, timedelta(minutes=9), now, name=HOSTILE, queue="mail")
    rollups.catch_up(now=now)
    page = viewer.get(reverse(DASHBOARD)).content.decode()
    assert 'id="jobs-history"' in page
    assert "which count tasks up to 20" in page  # a moment, once the rollups have run
    assert page.count('class="jobs-h-succeeded"') >= 2  # the whole chart and a queue's
    assert 'data-key="imports"' in page
    assert "<script>alert(1)" not in page
    assert "app.&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert f"{reverse(TYPE)}?name={quote('app.a', safe='')}" in page
    for period in ("day", "week"):
        other = viewer.get(reverse(DASHBOARD), {"history": period}).content.decode()
        assert f'data-period="{period}"' in other
        assert 'data-key="imports"' in other


def test_a_week_without_tasks_draws_empty_charts(viewer):
    page = viewer.get(reverse(DASHBOARD), {"history": "week"}).content.decode()
    assert "No task finished in the last week." in page
    assert "which have counted nothing yet" in page  # before the first rollup: no "up to —"
    assert "up to —" not in page
    assert 'aria-label="Tasks finished per 1 h, 168 slots, at most 1 in one"' in page
    bad = viewer.get(reverse(DASHBOARD), {"history": "year\x00" + "x" * 5000})
    assert 'data-period="hour"' in bad.content.decode()


def test_a_task_type_page_shows_its_own_figures(viewer, now):
    for minutes in (10, 11, 12):
        finished(Status.SUCCEEDED, timedelta(minutes=minutes), now, name="app.a", attempts=2)
    finished(Status.FAILED, timedelta(minutes=13), now, name="app.a")
    finished(Status.CANCELLED, timedelta(minutes=14), now, name="app.a")
    finished(Status.FAILED, timedelta(minutes=10), now, name="app.other")
    rollups.catch_up(now=now)
    response = type_page(viewer, "app.a")
    assert response.status_code == 200
    page = response.content.decode()
    for figure, value in [
        ("finished", 5),
        ("succeeded-count", 3),
        ("failed-count", 1),
        ("retried", 3),
    ]:
        assert f'data-figure="{figure}">{value}</td>' in page
    assert 'data-figure="failure_rate">25.0%</td>' in page
    # Read back from the bins: the four runs of 2 s lie in the bin of 1 to 2 s.
    bins = [0] * (len(BOUNDS) + 1)
    bins[bin_of(2.0)] = 4
    shown = f"{seconds_text(percentile(bins, 0.5))} / {seconds_text(percentile(bins, 0.95))}"
    assert f'data-figure="run">{shown}</td>' in page
    assert page.count('<svg class="jobs-h-chart"') == 5  # four charts, one queue's line
    # The week's figures include the hour's.
    assert 'data-figure="finished">5</td>' in type_page(viewer, "app.a", "week").content.decode()


def test_a_task_type_page_lists_each_distinct_error_once(viewer, now):
    for minutes in (1, 2):
        when = now - timedelta(minutes=minutes)
        entry = ErrorEntryFactory(message="boom <b>", when=when)
        TaskFactory(failed=True, name="app.a", error_details=[entry], finished_at=when)
    other = ErrorEntryFactory(exception="app.OtherError", message="not mine")
    TaskFactory(failed=True, name="app.b", error_details=[other])
    page = type_page(viewer, "app.a").content.decode()
    assert page.count('class="jobs-error-group"') == 1
    assert "boom &lt;b&gt;" in page
    assert "not mine" not in page
    assert "app.OtherError" not in page
    assert "No failed attempt in the last hour." in type_page(viewer, "app.b.none").content.decode()


def test_a_task_type_with_a_hostile_name(viewer, now):
    finished(Status.SUCCEEDED, timedelta(minutes=10), now, name=HOSTILE)
    longest = "a." + "x" * (Task._meta.get_field("name").max_length - 2)
    finished(Status.SUCCEEDED, timedelta(minutes=10), now, name=longest)
    rollups.catch_up(now=now)
    page = type_page(viewer, HOSTILE).content.decode()
    assert "<script>alert(1)" not in page
    assert 'data-figure="finished">1</td>' in page
    assert 'data-figure="finished">1</td>' in type_page(viewer, longest).content.decode()
    assert type_page(viewer, longest + "x").status_code == 404
    assert type_page(viewer, "app.a\x00b").status_code == 404
    # Bytes that are no UTF-8 arrive replaced (U+FFFD): a name no task has, an empty page.
    assert viewer.get(reverse(TYPE) + "?name=app.%ED%A0%80").status_code == 200
    assert viewer.get(reverse(TYPE)).status_code == 404


def test_a_task_type_without_tasks_says_so(viewer):
    page = type_page(viewer, "app.never", "week").content.decode()
    assert "No task of this type finished in the last week." in page


def test_staff_without_the_view_permission_and_anonymous_are_refused(client):
    client.force_login(staff("retry_task", username="nope"))
    assert type_page(client, "app.a").status_code == 403
    client.logout()
    response = type_page(client, "app.a")
    assert response.status_code == 302
    assert "/login/" in response["Location"]


def test_task_list_and_task_page_link_to_the_type(viewer, now):
    task = finished(Status.SUCCEEDED, timedelta(minutes=10), now, name="app.a")
    listed = viewer.get(reverse("admin:jobs_task_changelist"), {"name": "app.a"})
    assert f'href="{reverse(TYPE)}?name=app.a"' in listed.content.decode()
    detail = viewer.get(reverse("admin:jobs_task_change", args=[task.pk])).content.decode()
    assert f'href="{reverse(TYPE)}?name=app.a"' in detail


def test_a_nul_in_a_task_name_is_kept_on_sqlite(viewer, now):
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL stores no NUL in text: no task can have such a name there")
    finished(Status.SUCCEEDED, timedelta(minutes=10), now, name="app.a\x00b")
    rollups.catch_up(now=now)
    assert TaskRollup.objects.get().name == "app.a\x00b"
    response = viewer.get(reverse(DASHBOARD))
    assert response.status_code == 200
    assert 'data-key="app.a\x00b"' in response.content.decode()
