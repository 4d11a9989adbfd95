"""Pausing a task type against the database: the claim skips it in every queue, its tasks wait
(pending, no attempt used) and say why, the health check tells of it without failing."""

import json
import logging
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs.exceptions import PayloadError
from jobs.maintenance import pausing
from jobs.metrics import waiting
from jobs.models import QueuePause, Task, TaskPause
from jobs.states import Status
from jobs.web import health
from tests import helpers
from tests.factories import TaskFactory, UserFactory, WorkerFactory

pytestmark = pytest.mark.django_db

ADD = "tests.testapp.tasks.add"
OTHER = "tests.testapp.tasks.record_effect"
LIMITS = health.Thresholds(
    max_wait=600, max_failure_rate=0.5, window=900, min_tasks=4, heartbeat=120
)


def claim(**kwargs):
    return helpers.claim("w1", 10, lease_seconds=30, **kwargs)


def test_a_paused_task_type_is_claimed_from_no_queue_and_resumes():
    paused = [TaskFactory(name=ADD, queue=queue) for queue in ("default", "emails")]
    other = TaskFactory(name=OTHER, queue="emails")
    assert pausing.pause_task_type(ADD)
    assert [t.pk for t in claim()] == [other.pk]
    assert claim(queues=["default"]) == []
    # With caps too: each group's statement skips it.
    assert helpers.claim_for_dispatch("w1", 5, groups=[(["emails"], 2)], lease_seconds=30) == []
    for task in paused:
        task.refresh_from_db()
        assert (task.status, task.attempts, task.worker_id) == (Status.PENDING, 0, "")
    assert pausing.resume_task_type(ADD)
    assert sorted(t.pk for t in claim()) == sorted(t.pk for t in paused)


def test_pause_and_resume_say_whether_they_changed_anything():
    user = UserFactory()
    assert pausing.pause_task_type(ADD, user=user)
    assert not pausing.pause_task_type(ADD)
    assert TaskPause.objects.get().paused_by == user  # the first pause is kept
    assert pausing.paused_task_types() == {ADD}
    assert pausing.resume_task_type(ADD)
    assert not pausing.resume_task_type(ADD)


def test_a_task_type_is_known_when_registered_or_stored():
    assert pausing.task_type_known(ADD)  # registered by tests.testapp
    assert not pausing.task_type_known("app.no_such_task")
    TaskFactory(name="app.gone_from_the_code")  # stored rows of a task no longer declared
    assert pausing.task_type_known("app.gone_from_the_code")


def test_paused_of_reads_queues_and_types_in_one_query(django_assert_num_queries):
    pausing.pause("emails")
    pausing.pause_task_type(ADD)
    with django_assert_num_queries(1):
        found = pausing.paused_of({"emails", "default"}, {ADD, OTHER})
    assert found == ({"emails"}, {ADD})


def test_workers_log_when_task_types_are_paused_and_resumed(caplog):
    caplog.set_level(logging.INFO, logger="jobs.maintenance.pausing")
    paused = pausing.log_task_type_changes(frozenset(), worker_id="w1")
    pausing.pause_task_type(ADD)
    caplog.clear()
    paused = pausing.log_task_type_changes(paused, worker_id="w1")
    assert [r.getMessage() for r in caplog.records] == [
        f"task type paused, not claiming it name={ADD} worker_id=w1"
    ]
    caplog.clear()
    assert pausing.log_task_type_changes(paused, worker_id="w1") == paused
    assert not caplog.records
    pausing.resume_task_type(ADD)
    assert pausing.log_task_type_changes(paused, worker_id="w1") == frozenset()
    assert caplog.records[-1].getMessage() == (
        f"task type resumed, claiming it again name={ADD} worker_id=w1"
    )


def test_a_waiting_task_of_a_paused_type_says_why_in_each_voice(client):
    owner = UserFactory(username="owner")
    task = TaskFactory(name=ADD, owner=owner)
    pausing.pause_task_type(ADD)
    reason = waiting.why_waiting(task)
    assert reason.reasons == [waiting.TASK_TYPE_PAUSED]
    assert waiting.operator_lines(reason) == [f"Task type {ADD} paused"]
    assert waiting.compact_text(reason) == "task type paused"
    client.force_login(owner)
    body = json.loads(client.get(reverse("jobs:task-status", args=[task.pk])).content)
    assert body["waiting"]["reasons"] == ["task_type_paused"]
    # The owner's words name no task type: plain words about their own task.
    assert body["waiting"]["message"] == (
        "Waiting: this kind of task is paused for now; it starts once it is resumed."
    )
    assert ADD not in json.dumps(body["waiting"])


def test_health_counts_a_paused_type_as_paused_not_unhealthy():
    now = timezone.now()
    WorkerFactory(last_heartbeat_at=now - timedelta(seconds=10))
    TaskFactory(name=ADD, run_after=now - timedelta(hours=2))  # would trip max_wait
    TaskFactory(name=ADD, queue="emails", run_after=now - timedelta(hours=2))
    assert not health.check(LIMITS, now=now).ok
    pausing.pause_task_type(ADD)
    verdict = health.check(LIMITS, now=now)
    assert verdict.ok
    assert verdict.reason.endswith(f"; paused task types: {ADD} (2 tasks waiting)")
    assert verdict.as_dict()["paused_task_types"] == [ADD]
    assert health.check(LIMITS, now=now, queues=["emails"]).paused_waiting == 1
    # Another type waiting too long in the same queue still trips.
    TaskFactory(name=OTHER, run_after=now - timedelta(hours=2))
    verdict = health.check(LIMITS, now=now)
    assert not verdict.ok
    assert "queue default: oldest waiting task has waited 7200s" in verdict.reason
    assert Task.objects.filter(name=ADD, status=Status.PENDING).count() == 2


@pytest.mark.parametrize(
    ("pause", "resume", "limit"),
    [
        (pausing.pause_task_type, pausing.resume_task_type, 200),
        (pausing.pause, pausing.resume, 100),
    ],
)
@pytest.mark.parametrize(
    "bad",
    ["", "a\x00b", "\ud800", None, 5, ["x"]],
)
def test_a_name_no_row_can_hold_is_refused_before_the_database(pause, resume, limit, bad):
    # It was stored as '' or '5' (SQLite took a NUL and 100,000 characters too), or raised the
    # database's DataError (PostgreSQL) or a UnicodeEncodeError.
    with pytest.raises(PayloadError, match=r"must|holds"):
        pause(bad)
    with pytest.raises(PayloadError, match=r"must|holds"):
        resume(bad)
    with pytest.raises(PayloadError, match="over the limit"):
        pause("x" * (limit + 1))
    assert not TaskPause.objects.exists()
    assert not QueuePause.objects.exists()
    assert pause("x" * limit)
    assert resume("x" * limit)
