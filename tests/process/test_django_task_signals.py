"""Django's task signals, sent by a real worker: each once, with the right status, after the
row is final, and Django's own log lines written (successes recorded many at once)."""

import re

import pytest

from jobs.backends import TaskResultStatus
from jobs.models import Task
from jobs.states import Status
from tests.testapp import django_tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]

ENV = {"JOBS_TEST_DJANGO_TASKS_LOG_LEVEL": "INFO", "JOBS_TEST_DJANGO_FINISHED_RECEIVER": "1"}


def test_each_task_finishes_once_after_its_row_is_final_and_django_logs_it(runworker):
    ok = [django_tasks.multiply.enqueue(n, 2) for n in range(40)]
    broken = django_tasks.explode.using(priority=-10).enqueue()

    done = runworker("--burst", "--concurrency", "4", env=ENV)

    assert done.returncode == 0, done.stderr
    assert {row.status for row in Task.objects.filter(pk__in=[r.id for r in ok])} == {
        Status.SUCCEEDED
    }
    finished = re.findall(r"django task_finished id=(\S+) status=(\S+) row=(\S+)", done.stderr)
    expected = {(r.id, TaskResultStatus.SUCCESSFUL, Status.SUCCEEDED) for r in ok}
    expected |= {(broken.id, TaskResultStatus.FAILED, Status.FAILED)}
    assert sorted(finished) == sorted(
        (id_, str(status), str(row)) for id_, status, row in expected
    )  # once each, and the row final when the receiver read it
    for result in ok:  # Django's own lines: started, then finished
        assert done.stderr.count(f"Task id={result.id} path=") == 2, result.id
        assert f"Task id={result.id} path={result.task.module_path} state=SUCCESSFUL" in (
            done.stderr
        )
    assert f"Task id={broken.id} path={broken.task.module_path} state=FAILED" in done.stderr
