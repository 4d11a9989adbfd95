"""Snooze and expiry with a real worker process."""

import time

import pytest

from jobs import transitions
from jobs.models import Task
from jobs.states import Status
from tests.conftest import wait_for
from tests.testapp import tasks
from tests.testapp.models import SideEffect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]

FAST = {"JOBS_MAINTENANCE_INTERVAL": "0.2", "JOBS_POLL_INTERVAL": "0.1"}


def test_a_task_snoozing_twice_then_succeeding_used_one_attempt(start_worker):
    task = tasks.snooze_until.enqueue("worker-snooze", times=2, seconds=0.3).record
    worker = start_worker("--concurrency", "2", env=FAST)
    wait_for(
        lambda: Task.objects.filter(pk=task.pk, status=Status.SUCCEEDED).exists(),
        timeout=30, message="the snoozing task to succeed",
    )  # fmt: skip
    task.refresh_from_db()
    assert (task.attempts, task.snoozes, task.result) == (1, 2, 3)
    assert task.error_details == []
    assert SideEffect.objects.filter(key="worker-snooze").count() == 3
    # Each snooze waited its 0.3 s: three runs take at least 0.6 s from the first to the last.
    first, last = SideEffect.objects.filter(key="worker-snooze").order_by("id")[::2]
    assert (last.created_at - first.created_at).total_seconds() >= 0.6
    assert worker.output.count("outcome=snoozed") == 2
    assert "outcome=failed" not in worker.output


def test_a_worker_never_runs_an_expired_task_and_maintenance_cancels_it(start_worker):
    expired = tasks.record_effect.using(expires_in=0.2).enqueue("expired").record
    time.sleep(0.5)  # past its deadline before any worker is there
    marker = tasks.record_effect.enqueue("marker").record
    worker = start_worker("--concurrency", "2", env=FAST)
    wait_for(
        lambda: Task.objects.filter(pk=marker.pk, status=Status.SUCCEEDED).exists()
        and Task.objects.filter(pk=expired.pk, status=Status.CANCELLED).exists(),
        timeout=30, message="the marker to run and the expired task to be cancelled",
    )  # fmt: skip
    expired.refresh_from_db()
    assert transitions.is_expired(expired)
    assert expired.attempts == 0
    assert expired.started_at is None
    assert not SideEffect.objects.filter(key="expired").exists()
    assert "tasks expired count=1" in worker.output
