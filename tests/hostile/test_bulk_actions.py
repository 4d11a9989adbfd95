"""Bulk actions at scale: "select all" acts on exactly what was counted, big selections chunked."""

import copy
import tracemalloc
import uuid

import pytest
from django.contrib.messages import get_messages
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from jobs import transitions
from jobs.admin import actions
from jobs.admin.paginator import EXACT_COUNT_LIMIT
from jobs.models import Task
from jobs.states import Status
from tests.factories import TaskFactory
from tests.helpers import staff

CHANGELIST = reverse("admin:jobs_task_changelist")


def bulk_tasks(n, **traits):
    """Insert ``n`` factory-built tasks: one built by the factory, copied with fresh ids.

    (Building each with the factory takes about 1.5 ms here: 150 s for 100,000 rows.)
    """
    model = TaskFactory.build(**traits)
    rows = (copy.copy(model) for _ in range(n))
    Task.objects.bulk_create((_with_new_id(row) for row in rows), batch_size=2000)


def _with_new_id(task):
    task.pk = uuid.uuid4()
    return task


def select_all(client, url, action):
    first = Task.objects.order_by("pk").first()
    data = {"action": action, "select_across": "1", "index": "0"}
    data["_selected_action"] = [str(first.pk)]
    response = client.post(url, data, follow=True)
    assert response.status_code == 200
    return [str(m) for m in get_messages(response.wsgi_request)]


def confirm(client, url, page):
    """Post the confirmation form of ``page`` back, as its button does."""
    context = page.context
    data = {
        "action": context["action"],
        "select_across": "1",
        "_selected_action": context["selected"],
        context["counted_field"]: context["token"],
        "post": "yes",
    }
    response = client.post(url, data, follow=True)
    assert response.status_code == 200
    return [str(m) for m in get_messages(response.wsgi_request)]


def ask_to_select_all(client, url, action):
    first = Task.objects.order_by("pk").first()
    data = {"action": action, "select_across": "1", "index": "0"}
    response = client.post(url, {**data, "_selected_action": [str(first.pk)]})
    assert response.status_code == 200
    return response


# No finish receivers: with the demo's, each task costs a row read and a signal.
@pytest.mark.django_db
def test_select_all_beyond_the_exact_count_confirms_the_exact_count_and_acts_on_exactly_it(
    client, no_success_receivers
):
    client.force_login(staff("view_task", "cancel_task"))
    bulk_tasks(20_000, queue="bulk")
    bulk_tasks(12, queue="bulk", succeeded=True)
    bulk_tasks(5, queue="other")
    url = f"{CHANGELIST}?queue=bulk"
    # The list shows a capped (SQLite) or estimated (PostgreSQL) count, not the real one.
    assert client.get(url).context["cl"].result_count != 20_012

    tracemalloc.start()
    try:
        page = ask_to_select_all(client, url, "cancel_tasks")
        _, asking_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()

        # Nothing done yet; the page says exactly how many match and what will happen.
        assert not Task.objects.filter(status=Status.CANCELLED).exists()
        assert page.templates[0].name == "admin/jobs/task/confirm_select_all.html"
        assert page.context["total"] == 20_012
        text = page.content.decode()
        assert "20,012 tasks</strong> match the list's filters" in text
        assert page.context["plan"] == [
            "20,000 will be cancelled",
            "12 will be skipped: already succeeded",
        ]

        # Meanwhile: 300 new tasks match the filter, someone else cancels 10 of those counted.
        counted_by = timezone.now()
        bulk_tasks(300, queue="bulk")
        late = Task.objects.filter(created_at__gt=counted_by)
        assert late.count() == 300
        counted = Task.objects.filter(
            queue="bulk", status=Status.PENDING, created_at__lte=counted_by
        )
        transitions.cancel_many(Task.objects.filter(pk__in=counted.values("pk")[:10]))

        messages = confirm(client, url, page)
        _, acting_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert messages == [
        "19,990 tasks cancelled; 22 skipped: 12 already succeeded, 10 changed since the count"
    ]
    assert Task.objects.filter(status=Status.CANCELLED).count() == 20_000
    assert late.filter(status=Status.PENDING).count() == 300
    assert not Task.objects.filter(queue="other").exclude(status=Status.PENDING).exists()
    # A grouped count, then chunks of ids: nothing like 20,000 rows in memory at once.
    assert asking_peak < 4 * 1024 * 1024, f"asking: peak {asking_peak / 1024 / 1024:.1f} MiB"
    assert acting_peak < 4 * 1024 * 1024, f"acting: peak {acting_peak / 1024 / 1024:.1f} MiB"


@pytest.mark.django_db
def test_select_all_within_the_exact_count_acts_on_exactly_what_the_filter_counts(client):
    client.force_login(staff("view_task", "cancel_task"))
    bulk_tasks(EXACT_COUNT_LIMIT - 10, queue="bulk")
    bulk_tasks(100, queue="other")
    listed = client.get(f"{CHANGELIST}?queue=bulk").context["cl"].result_count
    assert listed == EXACT_COUNT_LIMIT - 10

    messages = select_all(client, f"{CHANGELIST}?queue=bulk", "cancel_tasks")
    assert messages == [f"{listed:,} tasks cancelled"]
    assert Task.objects.filter(status=Status.CANCELLED).count() == listed
    assert not Task.objects.filter(queue="other").exclude(status=Status.PENDING).exists()


# No finish receivers: with the demo's, each task costs a row read and a signal (bounded per
# chunk too, test_grouped_notifications covers it) and the test ten times the time.
# A selection 20 chunks long: 20,000 rows rather than 100,000 (those alone took over a minute
# to insert on SQLite), still five times what the peak below allows in ids at once.
@pytest.mark.django_db
def test_an_action_on_many_chunks_of_tasks_runs_in_chunks_with_bounded_memory(
    no_success_receivers,
):
    n = 20_000
    bulk_tasks(n)
    updates = []

    def count_updates(execute, sql, params, many, context):
        if sql.startswith("UPDATE"):
            updates.append(1)  # only a count: the statements' text would weigh on the peak
        return execute(sql, params, many, context)

    tracemalloc.start()
    try:
        with connection.execute_wrapper(count_updates):
            report = actions.cancel(Task.objects.all())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert report.done == n
    assert not report.skipped
    # One conditional UPDATE per chunk, and one asking the chunk's running rows to stop.
    assert len(updates) == 2 * n // actions.CHUNK_SIZE
    # Ids and rows of one chunk at a time: measured 0.7 MiB here, where the 20,000 ids of the
    # whole selection alone take 4.6 MiB.
    assert peak < 2 * 1024 * 1024, f"peak {peak / 1024 / 1024:.1f} MiB"
