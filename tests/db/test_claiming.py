import re
import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from jobs.models import Task
from jobs.sql import postgresql
from jobs.states import Status
from tests import helpers
from tests.factories import TaskFactory

pytestmark = pytest.mark.django_db


def claim(limit=10, **kwargs):
    return helpers.claim("w1", limit, lease_seconds=30, **kwargs)


def test_claim_takes_highest_priority_then_longest_due():
    now = timezone.now()
    low_old = TaskFactory(priority=0, run_after=now - timedelta(minutes=5))
    high = TaskFactory(priority=10, run_after=now - timedelta(minutes=1))
    low_new = TaskFactory(priority=0, run_after=now - timedelta(minutes=2))
    assert [t.pk for t in claim(limit=3)] == [high.pk, low_old.pk, low_new.pk]


def test_claim_marks_running_and_stamps_worker_attempt_and_lease():
    TaskFactory()
    before = timezone.now()
    (task,) = claim()
    assert task.status == Status.RUNNING
    assert task.attempts == 1
    assert task.worker_id == "w1"
    assert task.started_at >= before
    assert task.lease_expires_at >= before + timedelta(seconds=29)


def test_claim_respects_limit_run_after_status_and_queues():
    now = timezone.now()
    due = TaskFactory.create_batch(3)
    TaskFactory(run_after=now + timedelta(minutes=1))  # not yet
    retry_due = TaskFactory(retrying=True, run_after=now - timedelta(seconds=1))
    for trait in ("running", "succeeded", "failed", "cancelled"):
        TaskFactory(**{trait: True})
    other_queue = TaskFactory(queue="emails")
    first = {t.pk for t in claim(limit=2, queues=["default"])}
    rest = {t.pk for t in claim(limit=10, queues=["default"])}
    assert len(first) == 2
    assert first | rest == {t.pk for t in due} | {retry_due.pk}
    assert [t.pk for t in claim(queues=["emails"])] == [other_queue.pk]
    assert claim() == []


def test_claim_with_no_free_slots_claims_nothing():
    TaskFactory()
    assert claim(limit=0) == []
    assert Task.objects.pending().count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_never_take_the_same_row():
    """Several connections claim in a loop at once; every task is claimed exactly once."""
    TaskFactory.create_batch(300)
    claimed, errors = [], []
    lock = threading.Lock()

    def drain(worker):
        try:
            while True:
                batch = helpers.claim(worker, 7, lease_seconds=30)
                if not batch:
                    return
                assert len(batch) <= 7, f"claimed {len(batch)} rows with LIMIT 7"
                with lock:
                    claimed.extend(t.pk for t in batch)
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=drain, args=(f"w{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    assert len(claimed) == 300
    assert len(set(claimed)) == 300
    assert Task.objects.filter(status=Status.RUNNING, attempts=1).count() == 300


@pytest.mark.django_db(transaction=True)
def test_claim_query_uses_the_partial_index_with_many_finished_rows(postgres_only):
    """With 200,000 finished rows, the claim reads the small partial index, not the table."""
    table = Task._meta.db_table
    helpers.insert_many_rows(200_000, status="succeeded")
    TaskFactory.create_batch(5)
    claim = postgresql.claim_sql(connection, 0)
    now = timezone.now()
    params = postgresql.claim_params(
        connection, now=now, queues=[], limit=10, worker_id="w", lease_expires_at=now
    )
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + claim, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "jobs_task_claimable_idx" in plan, plan
    # The index holds the whole ORDER BY, enqueue order's tie-breakers included: no sort of the
    # claimable rows (the claimed rows are sorted, 10 here).
    assert f"Sort Key: {table}.priority" not in plan, plan
    # The pause subqueries may scan their tiny tables (jobs_queuepause, jobs_taskpause: a name
    # that starts as the task table's does, hence the word boundary); the task table must not.
    assert not re.search(rf"Seq Scan on {table}\b", plan), plan


@pytest.mark.django_db(transaction=True)
def test_claim_locks_its_candidates_by_primary_key_when_statistics_lag(postgres_only):
    """Statistics taken when every row had finished (ANALYZE after a drain), then a burst of
    waiting keyed rows: the pick still finds its candidates by primary key, rather than scan
    every waiting row of the queue for them (measured: 4 to 8 ms a claim with 10,000)."""
    table = Task._meta.db_table
    helpers.insert_many_rows(10_000, status="succeeded")  # and ANALYZE
    for key in range(20):
        TaskFactory.create_batch(100, queue="q", concurrency_key=f"k{key}", concurrency_limit=1)
    statement = postgresql.claim_sql(connection, 1)
    now = timezone.now()
    params = postgresql.claim_params(
        connection, now=now, queues=["q"], limit=100, worker_id="w", lease_expires_at=now
    )
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + statement, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    pick = plan[plan.index("CTE picked") : plan.index("CTE claimed")]
    assert f"Index Scan using {table}_pkey" in pick, plan
    assert "status_idx" not in pick, plan
    assert not re.search(rf"Seq Scan on {table}\b", pick), plan
    update = plan[plan.index("CTE claimed") :]
    assert not re.search(rf"Seq Scan on {table}\b", update), plan
    # And it claims as before: one task a key at limit 1, highest priority first.
    claimed = claim(limit=100, queues=["q"])
    assert len(claimed) == 20
    running = Task.objects.filter(status=Status.RUNNING)
    assert running.values("concurrency_key").distinct().count() == 20


@pytest.mark.django_db(transaction=True)
def test_a_claim_locks_only_the_rows_it_takes_and_skips_rows_locked_elsewhere(postgres_only):
    """The pick locks its candidates one at a time until it has its limit: the rows it does not
    take stay free for another claim meanwhile; rows another transaction holds are passed over."""
    TaskFactory.create_batch(6, queue="q")
    TaskFactory.create_batch(4, queue="q", concurrency_key="k", concurrency_limit=4)
    table = Task._meta.db_table

    def ids(statement):
        with connection.cursor() as cursor:
            cursor.execute(statement)
            return [row[0] for row in cursor.fetchall()]

    hold_two = (  # another transaction holds the two best rows, unkeyed ones
        f"SELECT id FROM {table} WHERE concurrency_key IS NULL ORDER BY created_at, id"
        " LIMIT 2 FOR UPDATE"
    )
    count_free = f"SELECT id FROM {table} FOR UPDATE SKIP LOCKED"  # what another claim could lock
    with (
        helpers.in_another_transaction(lambda: ids(hold_two)) as held_elsewhere,
        transaction.atomic(),
    ):
        claimed = claim(limit=3, queues=["q"])
        # While the claim's transaction is open.
        with helpers.in_another_transaction(lambda: ids(count_free)) as free_meanwhile:
            pass
    assert len(held_elsewhere) == 2
    assert len(claimed) == 3
    assert not {task.id for task in claimed} & set(held_elsewhere)
    # Ten rows: two held elsewhere, three claimed, five free for another claim.
    assert len(free_meanwhile) == 5
    assert not {task.id for task in claimed} & set(free_meanwhile)
