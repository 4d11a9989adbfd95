"""The task admin: changelist, detail page, and the permissions of retry and cancel."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from jobs.models import Task
from jobs.states import Status
from tests.factories import TaskFactory, UserFactory
from tests.helpers import offered_buttons, staff

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:jobs_task_changelist"


@pytest.fixture
def operator(client):
    client.force_login(staff("view_task", "retry_task", "cancel_task", username="operator"))
    return client


@pytest.fixture
def viewer(client):
    client.force_login(staff("view_task", username="viewer"))
    return client


def test_changelist_columns(operator):
    owner = UserFactory(username="dora")
    TaskFactory(name="app.import_contacts", failed=True, owner=owner, attempts=2, max_attempts=5)
    TaskFactory(progress_current=45, progress_total=100, running=True, queue="imports")
    page = operator.get(reverse(CHANGELIST)).content.decode()
    assert "app.import_contacts" in page
    assert '<span class="jobs-badge jobs-badge--bad">Failed</span>' in page
    assert "2/5" in page
    assert "45 % (45 / 100)" in page
    assert "dora" in page
    assert "imports" in page
    assert reverse("admin:jobs_task_dashboard") in page


def test_changelist_never_counts_the_whole_table(operator):
    TaskFactory.create_batch(3)
    with CaptureQueriesContext(connection) as queries:
        response = operator.get(reverse(CHANGELIST), {"status__exact": "pending"})
    assert response.status_code == 200
    counts = [q["sql"] for q in queries if "COUNT(" in q["sql"].upper() and "jobs_task" in q["sql"]]
    assert counts  # the paginator does count, but only a LIMITed subquery
    assert all("LIMIT" in sql.upper() for sql in counts), counts
    assert "3 tasks" in response.content.decode()


def test_paginator_counts_exactly_below_its_cap():
    from jobs.admin.paginator import EstimatedCountPaginator

    TaskFactory.create_batch(5)
    assert EstimatedCountPaginator(Task.objects.all(), 2).count == 5


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"status__exact": "failed"}, {"a"}),
        ({"queue": "emails"}, {"b"}),
        ({"name": "app.report"}, {"c"}),
    ],
)
def test_changelist_filters(operator, params, expected):
    TaskFactory(summary="a", failed=True)
    TaskFactory(summary="b", queue="emails")
    TaskFactory(summary="c", name="app.report")
    response = operator.get(reverse(CHANGELIST), params)
    shown = {task.summary for task in response.context["cl"].result_list}
    assert shown == expected
    page = response.content.decode()
    assert "app.report" in page  # offered as a name filter choice
    assert "queue=emails" in page  # and the queue


def test_changelist_filters_by_creation_date(operator):
    from django.utils import timezone

    TaskFactory(summary="old", created_at=timezone.now() - timedelta(days=30))
    TaskFactory(summary="new")
    since = str(timezone.now() - timedelta(days=7))  # as the filter's "Past 7 days" link does
    response = operator.get(reverse(CHANGELIST), {"created_at__gte": since})
    assert [t.summary for t in response.context["cl"].result_list] == ["new"]


def test_search_by_id_name_key_and_summary(operator):
    by_id = TaskFactory()
    TaskFactory(name="reports.build_monthly")
    TaskFactory(idempotency_key="upload-77")
    TaskFactory(summary="Import of contacts.csv")
    TaskFactory(summary="unrelated")

    def search(term):
        response = operator.get(reverse(CHANGELIST), {"q": term})
        return [task.pk for task in response.context["cl"].result_list]

    assert search(str(by_id.pk)) == [by_id.pk]
    assert len(search("reports.build")) == 1
    assert len(search("upload-77")) == 1
    assert len(search("contacts.csv")) == 1
    assert search("nothing-like-this") == []


def test_detail_page_shows_history_payload_steps_and_is_read_only(operator):
    finished_at = datetime(2026, 1, 1, 10, 1, 2, 345000, tzinfo=UTC)
    task = TaskFactory(
        failed=True,
        run_after=finished_at - timedelta(seconds=10),
        started_at=finished_at - timedelta(seconds=2.5),
        finished_at=finished_at,
        payload={"args": [7], "kwargs": {"path": "a.csv"}},
        steps={"parse": {"rows": 10}},
        error_details=[
            {
                "attempt": 1,
                "at": "2026-01-01T10:00:00+00:00",
                "worker_id": "host:1:abc",
                "exception": "builtins.ConnectionError",
                "message": "refused",
                "traceback": "Traceback (most recent call last):\n  first",
                "user_message": "We will try again shortly.",
                "transient": True,
            },
            {
                "attempt": 2,
                "at": "2026-01-01T10:01:00+00:00",
                "worker_id": "host:1:abc",
                "exception": "jobs.exceptions.PermanentError",
                "message": "bad file",
                "traceback": "Traceback (most recent call last):\n  second",
                "user_message": "Unsupported file format: please upload a CSV",
                "transient": False,
            },
        ],
    )
    response = operator.get(reverse("admin:jobs_task_change", args=[task.pk]))
    page = response.content.decode()
    for text in (
        "builtins.ConnectionError",
        "jobs.exceptions.PermanentError",
        "Unsupported file format: please upload a CSV",
        "We will try again shortly.",
        "  first",
        "  second",
        "&quot;path&quot;: &quot;a.csv&quot;",  # pretty-printed, escaped
        "&quot;rows&quot;: 10",
        "<th>finished</th><td>2026-01-01 10:01:02.345 UTC</td>",
        "<th>wait (due to start)</th><td>7.5 s</td>",
        "<th>run time</th><td>2.5 s</td>",
    ):
        assert text in page, text
    assert page.index("Attempt 2") < page.index("Attempt 1")  # the latest first
    assert 'name="_save"' not in page
    assert 'name="name"' not in page  # no editable input for any field
    assert reverse("admin:jobs_task_retry", args=[task.pk]) in offered_buttons(page)
    # Failed: nothing to stop.
    assert reverse("admin:jobs_task_cancel", args=[task.pk]) not in offered_buttons(page)


def test_saving_the_detail_form_is_refused(operator):
    task = TaskFactory(running=True)
    response = operator.post(
        reverse("admin:jobs_task_change", args=[task.pk]), {"name": "x", "status": "pending"}
    )
    assert response.status_code == 403
    task.refresh_from_db()
    assert task.status == Status.RUNNING


def test_empty_fields_show_one_mark(operator):
    task = TaskFactory()  # pending: no owner, error, start or finish yet
    page = operator.get(reverse("admin:jobs_task_change", args=[task.pk])).content.decode()
    assert '<div class="readonly">—</div>' in page
    assert '<div class="readonly">-</div>' not in page  # Django's own default mark


def test_add_is_not_offered(operator):
    assert operator.get(reverse("admin:jobs_task_add")).status_code == 403


def test_paginator_past_its_cap_pages_by_the_planner_estimate(monkeypatch):
    from jobs.admin import paginator

    monkeypatch.setattr(paginator, "EXACT_COUNT_LIMIT", 3)
    TaskFactory.create_batch(5)
    tasks = Task.objects.all()
    count = paginator.EstimatedCountPaginator(tasks, 2).count
    estimate = paginator.planner_estimate(tasks)
    if connection.vendor == "postgresql":
        assert estimate is not None
        assert count == max(4, estimate)
    else:
        assert estimate is None
        assert count == 4  # "more than 3": the capped count
