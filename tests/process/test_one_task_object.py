"""One task object, with real ``runworker`` processes: a task declared with Django's ``@task``
and jobs' options is timed out and retried by a worker as its ``@jobs.task`` twin is
(tests/db/test_one_task_object.py has the rest)."""

import time

import pytest

from jobs.models import Task
from jobs.states import Status
from jobs.tasks.django_api import TaskResultStatus
from tests.testapp import twin_tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]


def test_a_django_task_past_its_timeout_is_killed_and_recorded_as_a_timeout(runworker):
    hung = twin_tasks.hang_django.enqueue()
    other = twin_tasks.add_django.enqueue(2, 3)
    started = time.monotonic()
    done = runworker("--burst", "--concurrency", "2")
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 60  # not the 300 s the task sleeps
    row = Task.objects.get(pk=hung.id)
    assert (row.status, row.attempts) == (Status.FAILED, 1)  # max_attempts=1
    assert row.error_details[-1]["exception"] == "jobs.exceptions.TaskTimeout"
    assert "longer than its timeout of 1 second" in row.last_error
    hung.refresh()
    assert hung.status == TaskResultStatus.FAILED
    assert hung.errors[-1].exception_class_path == "jobs.exceptions.TaskTimeout"
    assert Task.objects.get(pk=other.id).status == Status.SUCCEEDED  # the worker kept serving
    assert "reason=timeout" in done.stdout + done.stderr


def test_the_twins_are_retried_then_failed_by_a_worker(runworker):
    results = [twin.enqueue("k") for twin in (twin_tasks.flaky_django, twin_tasks.flaky_jobs)]
    for _ in range(20):  # a burst runs what is due: the retry is due 0.1 s later
        assert runworker("--burst").returncode == 0
        if not Task.objects.exclude(status=Status.FAILED).exists():
            break
        time.sleep(0.2)
    rows = [Task.objects.get(pk=result.id) for result in results]
    for row in rows:
        assert (row.status, row.attempts, row.max_attempts) == (Status.FAILED, 2, 2)
        assert [entry["exception"] for entry in row.error_details] == [
            "tests.testapp.twin_tasks.PartnerDown"
        ] * 2
    assert rows[0].last_error == rows[1].last_error
