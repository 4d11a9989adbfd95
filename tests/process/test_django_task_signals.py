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
# Without the demo's receiver of jobs' own task_finished, a success of Django's @task is written
# by the supervisor, and the child sends Django's signal on its word (jobs.worker.notices); with
# it, the child records the success itself (jobs.execution.finishing.record_held).
NOTIFIED = {**ENV, "DJANGO_SETTINGS_MODULE": "tests.hostile.settings_without_receivers"}


@pytest.mark.parametrize("env", [NOTIFIED, ENV], ids=["supervisor-writes", "child-writes"])
def test_each_task_finishes_once_after_its_row_is_final_and_django_logs_it(runworker, env):
    ok = [django_tasks.multiply.enqueue(n, 2) for n in range(40)]
    broken = django_tasks.explode.using(priority=-10).enqueue()

    done = runworker("--burst", "--concurrency", "4", env=env)

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


def test_children_recycled_before_their_notice_leave_the_signal_to_the_supervisor(runworker):
    # Each child exits after one task, before the supervisor writes its success and sends the
    # word (jobs.worker.notices): the supervisor sends task_finished itself, once, row final.
    ok = [django_tasks.multiply.enqueue(n, 3) for n in range(12)]

    done = runworker("--burst", "--concurrency", "2", "--max-tasks-per-child", "1", env=NOTIFIED)

    assert done.returncode == 0, done.stderr
    rows = Task.objects.filter(pk__in=[r.id for r in ok])
    assert {(row.status, row.attempts) for row in rows} == {(Status.SUCCEEDED, 1)}
    finished = re.findall(r"django task_finished id=(\S+) status=(\S+) row=(\S+)", done.stderr)
    assert sorted(finished) == sorted(
        (r.id, str(TaskResultStatus.SUCCESSFUL), str(Status.SUCCEEDED)) for r in ok
    )
    for result in ok:
        assert done.stderr.count(f"Task id={result.id} path={result.task.module_path} state=") == 2


def test_a_hanging_task_finished_receiver_is_killed_and_blames_no_task(runworker):
    # The receiver hangs on the word that finish_slowly(0) is written: its child is killed at
    # the task's timeout (2 s), the row stays succeeded, nothing runs twice, the rest goes on.
    hanging = django_tasks.finish_slowly.enqueue(0)
    later = [django_tasks.multiply.using(priority=-5).enqueue(n, 2) for n in range(5)]

    done = runworker(
        "--burst", "--concurrency", "1", env={**NOTIFIED, "JOBS_TEST_DJANGO_FINISHED_HANG": "1"}
    )

    assert done.returncode == 0, done.stderr
    assert "django task_finished hangs id=" in done.stderr
    assert "task_finished receivers timed out" in done.stderr
    assert "task timed out" not in done.stderr  # no task of a batch is blamed for it
    row = Task.objects.get(pk=hanging.id)
    assert (row.status, row.attempts, row.result) == (Status.SUCCEEDED, 1, 0)
    rows = Task.objects.filter(pk__in=[r.id for r in later])
    assert {(row.status, row.attempts) for row in rows} == {(Status.SUCCEEDED, 1)}
