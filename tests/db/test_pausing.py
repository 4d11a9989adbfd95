import logging

import pytest

from jobs.maintenance import pausing
from jobs.models import QueuePause, Task
from tests import helpers
from tests.factories import TaskFactory, UserFactory

pytestmark = pytest.mark.django_db


def claim(**kwargs):
    return helpers.claim("w1", 10, lease_seconds=30, **kwargs)


def test_a_paused_queue_is_not_claimed_from_and_resumes():
    TaskFactory(queue="emails")
    default = TaskFactory(queue="default")
    assert pausing.pause("emails")
    assert [t.pk for t in claim()] == [default.pk]
    assert claim(queues=["emails"]) == []
    assert Task.objects.pending().get().queue == "emails"
    assert pausing.resume("emails")
    assert [t.queue for t in claim(queues=["emails"])] == ["emails"]


def test_pause_and_resume_say_whether_they_changed_anything():
    user = UserFactory()
    assert pausing.pause("emails", user=user)
    assert not pausing.pause("emails")
    assert QueuePause.objects.get().paused_by == user  # the first pause is kept
    assert pausing.resume("emails")
    assert not pausing.resume("emails")


def test_paused_among_a_workers_queues():
    pausing.pause("emails")
    pausing.pause("reports")
    assert pausing.paused_among(["emails", "default"]) == {"emails"}
    assert pausing.paused_among([]) == {"emails", "reports"}  # a worker serving every queue
    assert pausing.paused_queues() == {"emails", "reports"}


def test_workers_log_when_their_queues_are_paused_and_resumed(caplog):
    caplog.set_level(logging.INFO, logger="jobs.maintenance.pausing")
    paused = pausing.log_changes(frozenset(), ["emails"], worker_id="w1")
    assert paused == frozenset()
    assert not caplog.records
    pausing.pause("emails")
    pausing.pause("other")  # not served by this worker
    caplog.clear()
    paused = pausing.log_changes(paused, ["emails"], worker_id="w1")
    assert paused == {"emails"}
    assert [r.getMessage() for r in caplog.records] == [
        "queue paused, not claiming from it queue=emails worker_id=w1"
    ]
    caplog.clear()
    assert pausing.log_changes(paused, ["emails"], worker_id="w1") == paused
    assert not caplog.records  # said once, not at every loop
    pausing.resume("emails")
    caplog.clear()
    assert pausing.log_changes(paused, ["emails"], worker_id="w1") == frozenset()
    assert [r.getMessage() for r in caplog.records] == [
        "queue resumed, claiming again queue=emails worker_id=w1"
    ]
