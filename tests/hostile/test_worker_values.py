"""A real worker given tasks that return values no database stores as they are.

The bad task ends ``failed``, saying what was wrong; the tasks that ran beside it in the same
batch of the same child succeed, exactly once. Both ways a success is recorded are tried: by
the supervisor, many per statement (no receiver waits for it), and by the child itself.
"""

import pytest

from jobs.models import Task
from jobs.states import Status
from tests.testapp.tasks import add
from tests.testapp.value_tasks import report, return_value

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]

WITHOUT_RECEIVERS = {"DJANGO_SETTINGS_MODULE": "tests.hostile.settings_without_receivers"}


@pytest.mark.parametrize("env", [WITHOUT_RECEIVERS, {}], ids=["recorded-in-batches", "by-child"])
def test_a_bad_return_value_fails_its_task_and_no_other(runworker, env):
    good = [add.enqueue(n, 1).record for n in range(3)]
    bad = {
        kind: return_value.enqueue(kind).record for kind in ("nul", "surrogate", "huge_int", "deep")
    }
    good += [*(add.enqueue(n, 2).record for n in range(3)), return_value.enqueue("fine").record]
    good.append(report.enqueue("Row 1").record)
    # One child, so the bad tasks share their batches with the good ones.
    done = runworker("--burst", "--concurrency", "1", env=env)
    assert done.returncode == 0, done.stderr
    for kind, task in bad.items():
        task.refresh_from_db()
        assert (task.status, task.attempts) == (Status.FAILED, 1), kind
        assert task.last_error.startswith("the task's return value"), task.last_error
        assert task.result is None
    assert "NUL character" in bad["nul"].last_error
    assert "surrogate" in bad["surrogate"].last_error
    assert "64-bit" in bad["huge_int"].last_error
    assert "nested more than 100" in bad["deep"].last_error
    for task in good:
        task.refresh_from_db()
        assert (task.status, task.attempts, task.last_error) == (Status.SUCCEEDED, 1, ""), task
    assert Task.objects.get(pk=good[-2].pk).result == "a\u00e9\U0001f600b"
    reported = Task.objects.get(pk=good[-1].pk)
    assert reported.progress_message == "Row 1\ufffd"
    assert reported.steps == {"only": "done"}
