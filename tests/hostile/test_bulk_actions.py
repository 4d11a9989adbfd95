"""Bulk actions at scale: "select all" acts on what the list counted, 100,000 tasks in chunks."""

import copy
import tracemalloc
import uuid

import pytest
from django.contrib.messages import get_messages
from django.db import connection
from django.urls import reverse

from jobs.admin import actions
from jobs.admin.paginator import EXACT_COUNT_LIMIT
from jobs.models import Task
from jobs.states import Status
from tests.factories import TaskFactory
from tests.test_admin import staff

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


@pytest.mark.django_db
def test_select_all_beyond_the_exact_count_is_refused_and_changes_nothing(client):
    client.force_login(staff("view_task", "cancel_task"))
    bulk_tasks(EXACT_COUNT_LIMIT + 50)
    # The list shows a capped (SQLite) or estimated (PostgreSQL) count, not the real one.
    messages = select_all(client, CHANGELIST, "cancel_tasks")
    assert len(messages) == 1
    assert messages[0].startswith("Nothing was done: “select all” covers more than 10,000 tasks")
    assert not Task.objects.exclude(status=Status.PENDING).exists()


@pytest.mark.django_db
def test_select_all_within_the_exact_count_acts_on_exactly_what_the_filter_counts(client):
    client.force_login(staff("view_task", "cancel_task"))
    bulk_tasks(EXACT_COUNT_LIMIT - 10, queue="bulk")
    bulk_tasks(100, queue="other")
    listed = client.get(f"{CHANGELIST}?queue=bulk").context["cl"].result_count
    assert listed == EXACT_COUNT_LIMIT - 10

    messages = select_all(client, f"{CHANGELIST}?queue=bulk", "cancel_tasks")
    assert messages == [f"{listed} tasks cancelled"]
    assert Task.objects.filter(status=Status.CANCELLED).count() == listed
    assert not Task.objects.filter(queue="other").exclude(status=Status.PENDING).exists()


# No finish receivers: with the demo's, each task costs a row read and a signal (bounded per
# chunk too, test_grouped_notifications covers it) and the test ten times the time.
@pytest.mark.django_db
def test_an_action_on_100000_tasks_runs_in_chunks_with_bounded_memory(no_success_receivers):
    n = 100_000
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
    # Ids and rows of one chunk at a time, not the 100,000 ids of the whole selection.
    assert peak < 4 * 1024 * 1024, f"peak {peak / 1024 / 1024:.1f} MiB"
