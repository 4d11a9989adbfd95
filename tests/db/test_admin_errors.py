"""The admin's errors page: each distinct error of a window once, on SQLite and PostgreSQL."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs import metrics
from jobs.error_records import ErrorRecord
from tests.factories import ErrorEntryFactory, TaskFactory
from tests.helpers import staff

pytestmark = pytest.mark.django_db
ERRORS = "admin:jobs_task_errors"


@pytest.fixture
def viewer(client):
    client.force_login(staff("view_task", username="viewer"))
    return client


def test_attempts_group_by_name_exception_and_origin():
    now = timezone.now()
    retried = ErrorEntryFactory(when=now - timedelta(minutes=5), message="first")
    TaskFactory(failed=True, name="app.a", error_details=[retried, ErrorEntryFactory(when=now)])
    TaskFactory(retrying=True, name="app.a", error_details=[ErrorEntryFactory(message="last")])
    TaskFactory(failed=True, name="app.a", error_details=[ErrorEntryFactory(origin="x.py:1 in f")])
    old = ErrorEntryFactory(when=now - timedelta(days=3))
    TaskFactory(failed=True, name="app.a", error_details=[old], finished_at=now - timedelta(days=3))
    groups = metrics.error_groups(now=timezone.now(), window=timedelta(hours=1))
    assert [(g.origin, g.tasks, g.attempts) for g in groups] == [
        ("app/tasks.py:42 in run", 2, 3),
        ("x.py:1 in f", 1, 1),
    ]
    assert groups[0].last_message == "last"
    assert groups[0].first_at.isoformat() == retried["at"]
    week = metrics.error_groups(window=timedelta(weeks=1))
    assert sum(g.attempts for g in week) == 5


def test_origin_is_the_raising_frame():
    def raises():
        raise ValueError("no")

    try:
        raises()
    except ValueError as exc:
        record = ErrorRecord.from_exception(exc, "msg", False)
    assert record.origin.endswith(f":{raises.__code__.co_firstlineno + 1} in {raises.__qualname__}")
    assert record.origin.startswith("tests/db/test_admin_errors.py")


def test_page_escapes_cuts_and_links(viewer):
    huge = "<script>alert(1)</script>" + "m" * 100_000
    task = TaskFactory(
        failed=True,
        name="app.b",
        error_details=[ErrorEntryFactory(message=huge, traceback="T" * 200_000)],
    )
    response = viewer.get(reverse(ERRORS) + "?window=hour")
    page = response.content.decode()
    assert response.status_code == 200
    assert "<script>alert(1)" not in page
    assert "&lt;script&gt;" in page
    assert len(page) < 60_000
    assert "<details><summary>Traceback</summary>" in page
    link = "?name=app.b&amp;error=builtins.ValueError"
    assert link in page
    listed = viewer.get(reverse("admin:jobs_task_changelist") + link.replace("&amp;", "&"))
    assert str(task.pk) in listed.content.decode()
    TaskFactory(failed=True, name="app.b", error_details=[ErrorEntryFactory(exception="x.E")])
    other = viewer.get(reverse("admin:jobs_task_changelist") + "?name=app.b&error=x.Missing")
    assert str(task.pk) not in other.content.decode()


def test_bad_window_and_nul_filter(viewer):
    assert viewer.get(reverse(ERRORS) + "?window=%00" + "x" * 5000).status_code == 200
    response = viewer.get(reverse("admin:jobs_task_changelist") + "?error=a%00b")
    assert response.status_code == 302


def test_permission_and_anonymous(client):
    assert client.get(reverse(ERRORS)).status_code == 302
    client.force_login(staff(username="nobody"))
    assert client.get(reverse(ERRORS)).status_code == 403
