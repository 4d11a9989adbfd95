"""Tasks enqueued in bulk run in a real worker."""

import pytest

from jobs.models import Task
from jobs.states import Status
from tests.testapp.tasks import add


@pytest.mark.django_db(transaction=True)
@pytest.mark.process
def test_enqueued_in_bulk_runs(runworker):
    ids = add.enqueue_many([(n, 1) for n in range(10)])
    done = runworker("--burst", "--concurrency", "2")
    assert done.returncode == 0, done.stderr
    for task in Task.objects.filter(pk__in=ids):
        assert task.status == Status.SUCCEEDED
        assert task.result == task.args[0] + 1
