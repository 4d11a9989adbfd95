"""A real worker records the successes of its children many per statement."""

import pytest

from jobs.states import Status


@pytest.mark.django_db(transaction=True)
@pytest.mark.process
def test_a_worker_records_deferred_successes(runworker):
    from tests.testapp.tasks import add

    tasks = [add.enqueue(n, 1).record for n in range(20)]
    done = runworker("--burst", "--concurrency", "3")
    assert done.returncode == 0, done.stderr
    for task in tasks:
        task.refresh_from_db()
        assert task.status == Status.SUCCEEDED
        assert task.result == task.args[0] + 1
        assert task.finished_at >= task.started_at
