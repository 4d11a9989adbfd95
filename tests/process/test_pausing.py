"""A real worker leaves a paused queue alone and says so."""

import pytest

from jobs.maintenance import pausing
from tests.factories import TaskFactory


@pytest.mark.process
@pytest.mark.django_db(transaction=True)
def test_a_running_worker_skips_a_paused_queue_and_says_so(runworker):
    pausing.pause("emails")
    waiting = TaskFactory(queue="emails")
    done = TaskFactory(queue="default")  # tests.testapp.tasks.add(1, 2)
    result = runworker("--burst")
    assert result.returncode == 0, result.stderr
    assert "queue paused, not claiming from it queue=emails" in result.stderr
    waiting.refresh_from_db()
    done.refresh_from_db()
    assert waiting.status == "pending"
    assert done.status == "succeeded"
