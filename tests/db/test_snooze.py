"""Snooze: a task asks to run later, without using an attempt or recording an error."""

import logging
import math
from datetime import timedelta

import pytest
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from jobs import Snooze, signals
from jobs.exceptions import PayloadError
from jobs.execution import executor
from jobs.models import Task
from jobs.states import Status
from jobs.tasks.payload import MAX_DELAY_SECONDS
from jobs.web.views import describe
from tests.factories import UserFactory
from tests.helpers import claim, run_next
from tests.testapp import tasks
from tests.testapp.models import SideEffect

pytestmark = pytest.mark.django_db


def make_due(task):
    Task.objects.filter(pk=task.pk).update(run_after=timezone.now())


def test_a_snooze_waits_again_with_its_attempt_undone_and_no_error():
    task = tasks.snooze_until.enqueue("s", times=1, seconds=30).record
    before = timezone.now()
    task = run_next()
    assert task.status == Status.PENDING
    assert task.attempts == 0
    assert task.snoozes == 1
    assert task.error_details == []
    assert task.last_error == ""
    assert task.worker_id == ""
    assert task.lease_expires_at is None
    assert before + timedelta(seconds=29) < task.run_after < timezone.now() + timedelta(seconds=31)
    assert claim("w", 10, lease_seconds=30, now=timezone.now()) == []  # not due before then


def test_a_task_snoozing_twice_then_succeeding_used_one_attempt():
    task = tasks.snooze_until.enqueue("twice", times=2).record
    for snoozes in (1, 2):  # raised, then returned
        task = run_next()
        assert (task.status, task.attempts, task.snoozes) == (Status.PENDING, 0, snoozes)
        make_due(task)
    task = run_next()
    assert task.status == Status.SUCCEEDED
    assert task.attempts == 1
    assert task.result == 3
    assert SideEffect.objects.filter(key="twice").count() == 3


def test_a_snooze_sends_no_signal_and_logs_one_line(caplog, django_capture_on_commit_callbacks):
    received = []

    def receiver(sender, task, **kwargs):
        received.append(kwargs.get("signal"))

    for signal in (signals.task_failed, signals.task_retried, signals.task_finished,
                   signals.task_requeued, signals.task_cancelled):  # fmt: skip
        signal.connect(receiver, dispatch_uid="snooze-test")
    try:
        tasks.snooze_until.enqueue("quiet", times=1, seconds=5)
        logs = caplog.at_level(logging.DEBUG, logger="jobs")
        with logs, django_capture_on_commit_callbacks(execute=True):
            task = run_next()
    finally:
        for signal in (signals.task_failed, signals.task_retried, signals.task_finished,
                       signals.task_requeued, signals.task_cancelled):  # fmt: skip
            signal.disconnect(dispatch_uid="snooze-test")
    assert task.status == Status.PENDING
    assert received == []
    lines = [r.getMessage() for r in caplog.records if "outcome=snoozed" in r.getMessage()]
    assert len(lines) == 1
    assert "snooze=5.000s" in lines[0]
    assert "attempt=1/2 " in lines[0]  # the attempt that ran, given back
    assert [r.levelno for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_the_status_view_and_the_admin_say_until_when_it_waits(admin_client):
    owner = UserFactory()
    task = tasks.snooze_until.using(owner=owner).enqueue("seen", times=1, seconds=120).record
    task = run_next()
    body = describe(task, owner)
    assert body["status"] == "pending"
    assert body["message"].startswith("Waiting until ")
    assert body["message"].endswith("UTC.")
    assert body["waiting_until"] == task.run_after.isoformat()
    assert body["error"] is None
    url = reverse("admin:jobs_task_change", args=[task.pk])
    page = admin_client.get(url).content.decode()
    assert "Pending (waiting until " in page


@pytest.mark.parametrize(
    "seconds", [-1, math.nan, math.inf, -math.inf, MAX_DELAY_SECONDS * 2, "30", None, True, [1]]
)
def test_snooze_refuses_values_that_are_not_seconds_within_bounds(seconds):
    with pytest.raises(PayloadError, match="Snooze takes seconds"):
        Snooze(seconds)


def test_snooze_takes_a_timedelta_and_zero():
    assert Snooze(timedelta(minutes=2)).seconds == 120
    assert Snooze(0).seconds == 0
    assert Snooze(MAX_DELAY_SECONDS).seconds == MAX_DELAY_SECONDS


@pytest.mark.parametrize("seconds", [-1, -0.5, 10**15, 1e15, "30", None])
def test_a_task_snoozing_with_a_bad_value_fails_saying_why(seconds):
    # NaN and infinity are not JSON, so no task gets them as arguments: Snooze() refuses them
    # above, and a tampered snooze below.
    tasks.snooze_with.enqueue(seconds)
    task = run_next()
    assert task.status == Status.FAILED
    assert (task.snoozes, task.attempts) == (0, 1)
    assert "Snooze takes seconds" in task.last_error


def test_a_snooze_whose_seconds_were_tampered_with_fails(monkeypatch):
    tasks.snooze_with.enqueue(1)
    original = Snooze.__init__

    def tampered(self, seconds):
        original(self, seconds)
        self.seconds = math.nan

    monkeypatch.setattr(Snooze, "__init__", tampered)
    task = run_next()
    assert task.status == Status.FAILED
    assert "Snooze takes seconds" in task.last_error


@override_settings(JOBS_MAX_SNOOZES=3)
def test_a_task_that_snoozes_for_ever_fails_at_the_limit():
    task = tasks.snooze_forever.enqueue().record
    for snoozes in (1, 2, 3):
        task = run_next()
        assert (task.status, task.snoozes, task.attempts) == (Status.PENDING, snoozes, 0)
    task = run_next()
    assert task.status == Status.FAILED
    assert task.attempts == 1
    assert "JOBS_MAX_SNOOZES" in task.last_error
    assert task.error_details[-1]["permanent"] is True


def test_an_operator_retry_gives_a_fresh_count_of_snoozes():
    from jobs import transitions

    with override_settings(JOBS_MAX_SNOOZES=1):
        task = tasks.snooze_forever.enqueue().record
        run_next()
        task = run_next()
        assert task.status == Status.FAILED
        assert transitions.requeue(task)
        assert task.snoozes == 0
        task = run_next()
        assert (task.status, task.snoozes) == (Status.PENDING, 1)


def test_a_snooze_of_a_task_asked_to_cancel_cancels_it():
    task = tasks.snooze_with.enqueue(60).record
    (claimed,) = claim("w", 1, lease_seconds=30, now=timezone.now())
    Task.objects.filter(pk=task.pk).update(cancel_requested_at=timezone.now())
    executor.run(claimed)
    claimed.refresh_from_db()
    assert claimed.status == Status.CANCELLED


def test_a_snooze_of_an_attempt_no_longer_this_workers_is_refused(caplog):
    task = tasks.snooze_with.enqueue(60).record
    (claimed,) = claim("w", 1, lease_seconds=30, now=timezone.now())
    Task.objects.filter(pk=task.pk).update(worker_id="another")
    with caplog.at_level(logging.WARNING, logger="jobs"):
        executor.run(claimed)
    task.refresh_from_db()
    assert (task.status, task.worker_id, task.snoozes) == (Status.RUNNING, "another", 0)
    assert "transition refused transition=snooze" in caplog.text


def test_djangos_task_result_stays_ready_while_snoozed():
    result = tasks.snooze_until.enqueue("ready", times=1, seconds=60)
    run_next()
    result.refresh()
    assert result.status.name == "READY"


def test_a_snooze_whose_seconds_raise_fails_the_attempt_not_the_worker(monkeypatch):
    tasks.snooze_with.enqueue(1)

    def broken(self):
        raise RuntimeError("no seconds here")

    setter = property(broken, lambda self, value: None)
    monkeypatch.setattr(Snooze, "seconds", setter, raising=False)
    task = run_next()
    assert task.status == Status.FAILED
    assert task.error_details[-1]["message"] == "no seconds here"
