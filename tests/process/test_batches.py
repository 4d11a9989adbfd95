"""Batches in a real worker: a task hanging among quick ones is stopped, the rest run."""

import pytest

from jobs.states import Status


@pytest.mark.django_db(transaction=True)
@pytest.mark.process
def test_a_task_hanging_inside_a_batch_is_stopped_and_the_rest_run(runworker):
    """Quick tasks go in batches; one that hangs among them is killed at its timeout, and the
    tasks behind it in its batch (and those done but not yet reported) are handed back."""
    from tests.testapp.tasks import add, hang

    before = [add.enqueue(n, 1).record for n in range(60)]
    stuck = hang.enqueue().record
    after = [add.enqueue(n, 1).record for n in range(60)]
    done = runworker("--burst", "--concurrency", "1", env={"JOBS_BATCH_SECONDS": "5"})
    assert done.returncode == 0, done.stderr
    assert "task handed back" in done.stderr  # it was in a batch, with tasks behind it
    stuck.refresh_from_db()
    assert stuck.status == Status.FAILED
    assert "timeout" in stuck.last_error
    for task in before + after:
        task.refresh_from_db()
        assert (task.status, task.result, task.attempts) == (Status.SUCCEEDED, task.args[0] + 1, 1)
