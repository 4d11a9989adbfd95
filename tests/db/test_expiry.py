"""Expiry: a waiting task with a deadline that has not started by then never starts."""

import math
import zoneinfo
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from jobs import enqueue, signals, transitions
from jobs.exceptions import PayloadError
from jobs.maintenance import rounds
from jobs.models import Task
from jobs.states import Status
from jobs.tasks.definition import TaskOptionError
from jobs.web.views import describe
from tests.factories import TaskFactory, UserFactory
from tests.helpers import claim, insert_many_rows, run_next
from tests.testapp import tasks
from tests.testapp.models import SideEffect

pytestmark = pytest.mark.django_db


def later(seconds):
    return timezone.now() + timedelta(seconds=seconds)


def test_expires_in_sets_the_deadline_from_the_enqueue():
    before = timezone.now()
    task = tasks.add.using(expires_in=60).enqueue(1, 2).record
    assert before + timedelta(seconds=60) <= task.expires_at <= later(60)
    assert Task.objects.get(pk=task.pk).expires_at == task.expires_at


def test_the_decorators_expires_in_applies_and_a_call_may_replace_it():
    declared = tasks.expiring.enqueue("d").record
    assert later(590) < declared.expires_at <= later(600)
    deadline = later(30)
    called = tasks.expiring.using(expires_at=deadline).enqueue("c").record
    assert called.expires_at == deadline


def test_djangos_task_decorator_takes_expires_in():
    from tests.testapp.django_tasks import django_expiring

    task = django_expiring.enqueue().record
    assert task.expires_at is not None


def test_enqueue_many_and_enqueue_take_a_deadline():
    ids = tasks.add.using(expires_in=timedelta(minutes=5)).enqueue_many([(1, 2), (3, 4)])
    assert Task.objects.filter(pk__in=ids, expires_at__isnull=False).count() == 2
    task = enqueue(tasks.add, (1, 2), expires_at=later(60))
    assert task.expires_at is not None


def test_a_task_without_a_deadline_has_none():
    assert tasks.add.enqueue(1, 2).record.expires_at is None


@pytest.mark.parametrize("value", [0, -1, -0.001, math.nan, math.inf, 10**12, "60", True,
                                   timedelta(0), timedelta(seconds=-5)])  # fmt: skip
def test_expires_in_refuses_what_is_not_seconds_above_zero(value):
    with pytest.raises(TaskOptionError, match="expires_in must be seconds"):
        tasks.add.using(expires_in=value)


def test_expires_at_refuses_a_naive_datetime_and_what_is_not_one():
    with pytest.raises(TaskOptionError, match="aware datetime"):
        tasks.add.using(expires_at=datetime(2030, 1, 1))
    with pytest.raises(TaskOptionError, match="must be a datetime"):
        tasks.add.using(expires_at="2030-01-01")


def test_expires_at_in_the_past_or_before_the_task_is_due_is_refused():
    with pytest.raises(PayloadError, match="could never run"):
        tasks.add.using(expires_at=later(-1)).enqueue(1, 2)
    with pytest.raises(PayloadError, match="could never run"):
        tasks.add.using(expires_in=60, delay=120).enqueue(1, 2)
    with pytest.raises(PayloadError, match="100 years"):
        tasks.add.using(expires_at=datetime(9999, 1, 1, tzinfo=UTC)).enqueue(1, 2)
    assert not Task.objects.exists()


def test_expires_at_in_another_time_zone_is_stored_in_utc():
    zone = zoneinfo.ZoneInfo("Asia/Kolkata")
    deadline = later(60).astimezone(zone)
    task = tasks.add.using(expires_at=deadline).enqueue(1, 2).record
    assert Task.objects.get(pk=task.pk).expires_at == deadline


def test_both_deadlines_at_once_are_refused():
    with pytest.raises(ValueError, match="not both"):
        tasks.add.using(expires_in=5, expires_at=later(5))


def test_the_claim_never_starts_an_expired_task():
    task = tasks.record_effect.using(expires_in=5).enqueue("never").record
    fresh = tasks.record_effect.using(expires_in=3600).enqueue("fresh").record
    claimed = claim("w", 10, lease_seconds=30, now=later(10))
    assert [one.pk for one in claimed] == [fresh.pk]
    task.refresh_from_db()
    assert task.status == Status.PENDING  # until maintenance cancels it


def test_the_claim_skips_an_expired_task_with_a_concurrency_key():
    tasks.add.using(concurrency_key="k", expires_in=5).enqueue(1, 2)
    fresh = tasks.add.using(concurrency_key="k").enqueue(3, 4).record
    claimed = claim("w", 10, lease_seconds=30, now=later(10))
    assert [one.pk for one in claimed] == [fresh.pk]


def test_maintenance_cancels_expired_waiting_tasks_as_expired():
    waiting = tasks.record_effect.using(expires_in=5).enqueue("a").record
    retrying = tasks.record_effect.using(expires_in=5).enqueue("b").record
    Task.objects.filter(pk=retrying.pk).update(status=Status.RETRYING)
    fresh = tasks.record_effect.using(expires_in=3600).enqueue("c").record
    plain = tasks.record_effect.enqueue("d").record
    done = rounds.run(now=later(10))
    assert done["expired"] == 2
    for task in (waiting, retrying):
        task.refresh_from_db()
        assert task.status == Status.CANCELLED
        assert task.last_error == transitions.EXPIRED_MESSAGE
        assert transitions.is_expired(task)
        assert task.finished_at is not None
    for task in (fresh, plain):
        task.refresh_from_db()
        assert task.status == Status.PENDING
    assert rounds.run(now=later(10))["expired"] == 0


def test_maintenance_leaves_running_and_finished_tasks_alone():
    running = tasks.record_effect.using(expires_in=5).enqueue("r").record
    (_claimed,) = claim("w", 1, lease_seconds=3600, now=timezone.now())
    assert transitions.expire_waiting(now=later(10)) == 0
    running.refresh_from_db()
    assert running.status == Status.RUNNING


def test_expiry_is_one_statement_for_many_rows(no_success_receivers):
    tasks.add.using(expires_in=5).enqueue_many([(n, n) for n in range(50)])
    with CaptureQueriesContext(connection) as queries:
        assert transitions.expire_waiting(now=later(10)) == 50
    # The UPDATE (returning the ids it moved), then one read of those rows that something waits
    # for (jobs.workflows), by their ids.
    statements = [q["sql"] for q in queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE"))]
    assert len(statements) == 2, statements
    assert statements[0].startswith("UPDATE")


def test_expiry_works_in_batches_of_its_limit():
    tasks.add.using(expires_in=5).enqueue_many([(n, n) for n in range(7)])
    assert transitions.expire_waiting(now=later(10), limit=5) == 5
    assert transitions.expire_waiting(now=later(10), limit=5) == 2


def test_expiry_sends_the_cancelled_signals_when_someone_listens(
    django_capture_on_commit_callbacks,
):
    seen = []

    def receiver(sender, task, **kwargs):
        seen.append((task.pk, task.status))

    signals.task_cancelled.connect(receiver, dispatch_uid="expiry-test")
    try:
        task = tasks.add.using(expires_in=5).enqueue(1, 2).record
        with django_capture_on_commit_callbacks(execute=True):
            assert transitions.expire_waiting(now=later(10)) == 1
    finally:
        signals.task_cancelled.disconnect(dispatch_uid="expiry-test")
    assert seen == [(task.pk, Status.CANCELLED)]


def test_expiry_signals_only_the_rows_it_moved(django_capture_on_commit_callbacks):
    """A row another round expired at the same instant (stamped with the same ``now`` and
    message) is not taken for one this round moved."""
    now = later(10)
    other = TaskFactory(cancelled=True, finished_at=now, last_error=transitions.EXPIRED_MESSAGE)
    Task.objects.filter(pk=other.pk).update(updated_at=now)
    seen = []

    def receiver(sender, task, **kwargs):
        seen.append(task.pk)

    signals.task_cancelled.connect(receiver, dispatch_uid="expiry-same-instant")
    try:
        task = tasks.add.using(expires_in=5).enqueue(1, 2).record
        with django_capture_on_commit_callbacks(execute=True):
            assert transitions.expire_waiting(now=now) == 1
    finally:
        signals.task_cancelled.disconnect(dispatch_uid="expiry-same-instant")
    assert seen == [task.pk]


def test_the_status_view_and_the_admin_say_expired(admin_client):
    owner = UserFactory()
    task = tasks.add.using(owner=owner, expires_in=5).enqueue(1, 2).record
    transitions.expire_waiting(now=later(10))
    task.refresh_from_db()
    body = describe(task, owner)
    assert body["status"] == "cancelled"
    assert body["cancel_reason"] == "expired"
    assert body["message"] == transitions.EXPIRED_MESSAGE
    assert body["expires_at"] == task.expires_at.isoformat()
    page = admin_client.get(reverse("admin:jobs_task_change", args=[task.pk])).content.decode()
    assert "Cancelled (expired)" in page
    # A task cancelled by someone is not "expired".
    other = tasks.add.using(owner=owner).enqueue(1, 2).record
    transitions.cancel(other)
    assert describe(other, owner)["cancel_reason"] == "cancelled"


def test_a_requeued_expired_task_runs_without_its_deadline():
    task = tasks.record_effect.using(expires_in=5).enqueue("again").record
    transitions.expire_waiting(now=later(10))
    task.refresh_from_db()
    assert transitions.requeue(task)
    assert task.expires_at is None
    task = run_next()
    assert task.status == Status.SUCCEEDED
    assert SideEffect.objects.filter(key="again").count() == 1


def test_the_expiry_index_is_partial():
    index = next(i for i in Task._meta.indexes if i.name == "jobs_task_waiting_expiry_idx")
    assert index.condition is not None


@pytest.mark.django_db(transaction=True)
def test_maintenance_finds_expired_tasks_through_the_partial_index(postgres_only):
    """With 100,000 waiting tasks without a deadline, expiry reads the small partial index."""
    table = Task._meta.db_table
    insert_many_rows(100_000, status="pending")
    tasks.add.using(expires_in=5).enqueue_many([(n, n) for n in range(5)])
    query = Task.objects.expired(later(10)).order_by("expires_at").values("pk")[:5000].query
    sql, params = query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "jobs_task_waiting_expiry_idx" in plan, plan
    assert f"Seq Scan on {table}" not in plan, plan
    assert transitions.expire_waiting(now=later(10)) == 5
