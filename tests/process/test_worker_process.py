"""Real ``runworker`` processes against the test database."""

import pytest
from django.db import connection

from jobs.models import Task
from jobs.states import Status
from tests.testapp import django_tasks, tasks
from tests.testapp.models import SideEffect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]


def test_burst_worker_runs_tasks_to_succeeded_retrying_and_failed(runworker):
    ok = [tasks.record_effect.enqueue(f"k{i}").record for i in range(20)]
    flaky = tasks.always_transient.enqueue().record
    broken = tasks.bad_file.enqueue().record
    django_result = django_tasks.multiply.enqueue(3, 4)

    done = runworker("--burst", "--concurrency", "4")

    assert done.returncode == 0, done.stderr
    statuses = dict(Task.objects.values_list("pk", "status"))
    assert {statuses[t.pk] for t in ok} == {Status.SUCCEEDED}
    assert statuses[flaky.pk] == Status.RETRYING  # its retry is not due yet: burst exits
    assert statuses[broken.pk] == Status.FAILED
    assert Task.objects.get(pk=django_result.id).status == Status.SUCCEEDED
    assert SideEffect.objects.count() == 20
    assert django_tasks.multiply.get_result(django_result.id).return_value == 12
    # One finish line per task, with the fields an operator greps for (the start is DEBUG).
    assert done.stderr.count("task finished name=") == 23
    assert f"id={broken.pk} attempt=1/5" in done.stderr
    assert "outcome=failed error=jobs.exceptions.PermanentError" in done.stderr


def test_a_result_over_the_limit_fails_its_task_for_good_and_the_worker_carries_on(runworker):
    limit = 1024 * 1024  # JOBS_MAX_RESULT_BYTES' default
    oversize = tasks.returns_text.enqueue(2 * limit).record
    at_limit = tasks.returns_text.enqueue(limit - 2).record  # its two quotes make the limit
    after = [tasks.record_effect.enqueue(f"after{i}").record for i in range(5)]

    done = runworker("--burst", "--concurrency", "1")

    assert done.returncode == 0, done.stderr
    oversize.refresh_from_db()
    assert (oversize.status, oversize.attempts, oversize.result) == (Status.FAILED, 1, None)
    assert oversize.last_error == (
        "The task's return value is 2,097,154 bytes, over the limit of 1,048,576 "
        "(JOBS_MAX_RESULT_BYTES). Store large data elsewhere and return its id."
    )
    assert oversize.error_details[-1]["permanent"] is True  # no retry returns a smaller one
    assert len(Task.objects.get(pk=at_limit.pk).result) == limit - 2
    assert Task.objects.get(pk=at_limit.pk).status == Status.SUCCEEDED
    assert set(
        Task.objects.filter(pk__in=[t.pk for t in after]).values_list("status", flat=True)
    ) == {Status.SUCCEEDED}
    assert SideEffect.objects.count() == 5


def test_the_start_line_names_the_database_transport(runworker):
    done = runworker("--burst")
    assert done.returncode == 0, done.stderr
    [start] = [line for line in done.stderr.splitlines() if "worker started" in line]
    assert start.endswith(" transport=database"), start


def test_worker_serves_only_its_queues_and_by_priority(runworker):
    tasks.record_effect.enqueue("default-queue")
    tasks.on_priority_queue.enqueue("priority-queue")
    done = runworker("--burst", "--queues", "priority")
    assert done.returncode == 0, done.stderr
    assert list(SideEffect.objects.values_list("key", flat=True)) == ["priority-queue"]
    assert Task.objects.pending().count() == 1


def test_worker_keeps_its_connection_between_tasks(runworker, postgres_only):
    """CONN_MAX_AGE=0 would close a request's connection; a worker keeps it."""
    for i in range(5):
        tasks.backend_pid.enqueue(i)
    done = runworker("--burst", "--concurrency", "1", env={"CONN_MAX_AGE": "0"})
    assert done.returncode == 0, done.stderr
    pids = set(Task.objects.values_list("result", flat=True))
    assert len(pids) == 1
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] not in pids


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--concurrency", "0"], "must be at least 1"),
        (["--concurrency", "many"], "expected a whole number"),
        (["--poll-interval", "-1"], "must be at least 0.01"),
        (["--queues", ","], "name at least one queue"),
    ],
)
def test_bad_options_get_a_clear_error(runworker, args, message):
    done = runworker(*args, "--burst")
    assert done.returncode != 0
    assert message in done.stderr


def test_worker_records_itself_and_marks_itself_stopped_on_exit(runworker):
    from jobs.models import Worker

    done = runworker("--burst", "--queues", "a,b", "--concurrency", "3")
    assert done.returncode == 0, done.stderr
    (worker,) = Worker.objects.all()
    assert (worker.queues, worker.concurrency, worker.in_flight) == (["a", "b"], 3, 0)
    assert worker.stopped_at is not None
    assert Worker.objects.alive().count() == 0
