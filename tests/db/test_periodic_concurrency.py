"""Several workers enqueue a due slot at the same moment, each on its own connection."""

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from jobs.maintenance import periodic
from jobs.models import Schedule, Task

pytestmark = pytest.mark.django_db(transaction=True)

WORKERS = 4
T0 = datetime(2026, 1, 5, 10, 2, 30, tzinfo=UTC)


def race(call):
    """Run ``call()`` in WORKERS threads released together; return results and errors."""
    barrier = threading.Barrier(WORKERS)
    results, errors = [], []

    def worker():
        try:
            barrier.wait(10)
            results.append(call())
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(WORKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results, errors


# A @jobs.task, and a Django @task enqueued through its jobs backend: the same guarantee.
@pytest.fixture(params=["tests.testapp.tasks.add", "tests.testapp.django_tasks.nightly_total"])
def every_five(settings, request):
    settings.JOBS_SCHEDULES = {
        "sum": {"task": request.param, "cron": "*/5 * * * *", "args": [1, 2]}
    }
    periodic.run_due(now=T0)  # the row exists, as it would after the first round
    return request.param


def test_workers_running_their_rounds_at_once_enqueue_one_task_per_slot(every_five):
    for slot_minutes in (3, 8):  # the 10:05 slot, then the 10:10 one
        results, errors = race(
            lambda m=slot_minutes: periodic.run_due(now=T0 + timedelta(minutes=m))
        )
        assert errors == []
        assert sum(r.created for batch in results for r in batch) == 1
    assert Task.objects.filter(name=every_five).count() == 2


def test_the_unique_key_alone_decides_when_every_worker_tries_the_same_slot(every_five):
    """Past the row check, on purpose: the database constraint is what makes it one."""
    spec = periodic.declared()["sum"]
    slot = datetime(2026, 1, 5, 10, 5, tzinfo=UTC)
    results, errors = race(lambda: periodic.enqueue_slot(spec, slot, now=slot))
    assert errors == []
    assert len(results) == WORKERS
    assert sum(r.created for r in results) == 1
    assert len({r.task_id for r in results}) == 1
    assert Task.objects.filter(idempotency_key=spec.idempotency_key(slot)).count() == 1


def test_workers_enqueue_a_schedule_added_in_the_admin_once_per_slot(settings):
    settings.JOBS_SCHEDULES = {}
    Schedule.objects.create(
        name="admin-sum",
        task="tests.testapp.tasks.add",
        cron="*/5 * * * *",
        args=[1, 2],
        source=Schedule.Source.ADMIN,
        created_at=T0,
    )
    for slot_minutes in (3, 8):  # the 10:05 slot, then the 10:10 one
        results, errors = race(
            lambda m=slot_minutes: periodic.run_due(now=T0 + timedelta(minutes=m))
        )
        assert errors == []
        assert sum(r.created for batch in results for r in batch) == 1
    scheduled = Task.objects.filter(idempotency_key__startswith="periodic:admin-sum:")
    assert scheduled.count() == 2
    assert Schedule.objects.get(pk="admin-sum").last_run_at == datetime(
        2026, 1, 5, 10, 10, tzinfo=UTC
    )
