"""A success the database refuses to record fails its own task, and no other.

The refusal comes from a trigger the test creates (a real database error, the same on SQLite and
PostgreSQL, whatever the validation of results upstream refuses first), and on PostgreSQL also
from a result jsonb cannot hold (a NUL character).
"""

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from jobs import transitions
from jobs.models import Task
from jobs.states import Status
from jobs.worker import claiming
from tests.conftest import wait_for
from tests.factories import TaskFactory
from tests.testapp import tasks

TRIGGER = "jobs_test_refuse_success"
# Successes go to the supervisor, recorded many at once (see the module's docstring).
SETTINGS = "tests.hostile.settings_without_receivers"


@pytest.fixture
def refuse_success():
    """Return ``refuse(task_ids)``: from then on the database refuses to mark those succeeded."""
    table = connection.ops.quote_name(Task._meta.db_table)

    def refuse(task_ids):
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                ids = ", ".join(f"'{task_id}'::uuid" for task_id in task_ids)
                cursor.execute(
                    f"CREATE FUNCTION {TRIGGER}() RETURNS trigger LANGUAGE plpgsql AS "
                    "$$ BEGIN RAISE EXCEPTION 'this test refuses the success'; END $$"
                )
                cursor.execute(
                    f"CREATE TRIGGER {TRIGGER} BEFORE UPDATE ON {table} FOR EACH ROW "
                    f"WHEN (NEW.status = 'succeeded' AND NEW.id IN ({ids})) "
                    f"EXECUTE FUNCTION {TRIGGER}()"
                )
            else:
                ids = ", ".join(f"'{task_id.hex}'" for task_id in task_ids)
                cursor.execute(
                    f"CREATE TRIGGER {TRIGGER} BEFORE UPDATE ON {table} FOR EACH ROW "
                    f"WHEN NEW.status = 'succeeded' AND NEW.id IN ({ids}) "
                    "BEGIN SELECT RAISE(ABORT, 'this test refuses the success'); END"
                )

    yield refuse
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER} ON {table}")
            cursor.execute(f"DROP FUNCTION IF EXISTS {TRIGGER}()")
        else:
            cursor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER}")


def running_tasks(count):
    return [TaskFactory(running=True, worker_id="w") for _ in range(count)]


def success(task, result):
    finished_at = timezone.now() - timedelta(seconds=1)
    return transitions.Success(task.pk, task.attempts, task.worker_id, result, finished_at)


def assert_failed_as_unstorable(task, reason):
    task.refresh_from_db()
    assert task.status == Status.FAILED
    assert task.last_error == "The task finished, but its result could not be stored."
    [entry] = task.error_details
    assert entry["permanent"] is True
    assert "the database refused to store the result of this task" in entry["message"]
    assert reason in entry["message"]
    assert task.lease_expires_at is None


def assert_succeeded(tasks_, results):
    for task, result in zip(tasks_, results, strict=True):
        task.refresh_from_db()
        assert (task.status, task.result, task.attempts) == (Status.SUCCEEDED, result, 1)


@pytest.mark.django_db
@pytest.mark.parametrize("bad_index", [0, 3, 6])
def test_succeed_many_fails_only_the_refused_success(refuse_success, bad_index):
    batch_tasks = running_tasks(7)
    bad = batch_tasks.pop(bad_index)
    refuse_success([bad.pk])
    batch = [success(task, index) for index, task in enumerate(batch_tasks)]
    batch.insert(bad_index, success(bad, "refused"))

    applied = transitions.succeed_many(batch)

    assert applied == {task.pk for task in batch_tasks}
    assert_succeeded(batch_tasks, range(6))
    assert_failed_as_unstorable(bad, "this test refuses the success")


@pytest.mark.django_db
def test_succeed_many_in_a_transaction_keeps_the_transaction_usable(refuse_success):
    """On PostgreSQL a refused statement aborts the transaction, unless it ran in a savepoint."""
    good, bad = running_tasks(2)
    refuse_success([bad.pk])
    with transaction.atomic():
        assert transitions.succeed_many([success(bad, 1), success(good, 2)]) == {good.pk}
        assert Task.objects.filter(status=Status.SUCCEEDED).count() == 1
    assert_succeeded([good], [2])
    assert_failed_as_unstorable(bad, "this test refuses the success")


@pytest.mark.django_db
def test_succeed_many_fails_every_refused_success_alone(refuse_success):
    batch_tasks = running_tasks(9)
    bad = [batch_tasks[1], batch_tasks[2], batch_tasks[8]]
    refuse_success([task.pk for task in bad])
    applied = transitions.succeed_many([success(task, "r") for task in batch_tasks])
    good = [task for task in batch_tasks if task not in bad]
    assert applied == {task.pk for task in good}
    assert_succeeded(good, ["r"] * 6)
    for task in bad:
        assert_failed_as_unstorable(task, "this test refuses the success")


@pytest.mark.django_db
def test_a_nul_result_fails_only_its_task_on_postgresql(postgres_only):
    """jsonb cannot hold U+0000: the database itself refuses, without any trigger."""
    good, bad, also_good = running_tasks(3)
    batch = [success(good, "fine"), success(bad, "a\x00b"), success(also_good, {"k": 1})]
    assert transitions.succeed_many(batch) == {good.pk, also_good.pk}
    assert_succeeded([good, also_good], ["fine", {"k": 1}])
    assert_failed_as_unstorable(bad, "\\u0000")


@pytest.mark.django_db
def test_claim_and_record_claims_and_records_around_a_refused_success(refuse_success):
    finished = running_tasks(4)
    bad = finished[1]
    refuse_success([bad.pk])
    waiting = [TaskFactory() for _ in range(3)]

    claimed, recorded = claiming.claim_and_record(
        "w", 10, [success(task, "done") for task in finished], lease_seconds=60
    )

    good = [task for task in finished if task != bad]
    assert recorded == {task.pk for task in good}
    assert {item.id for item in claimed} == {task.pk for task in waiting}
    assert_succeeded(good, ["done"] * 3)
    assert_failed_as_unstorable(bad, "this test refuses the success")
    assert Task.objects.filter(pk__in=[t.pk for t in waiting], status=Status.RUNNING).count() == 3


@pytest.mark.django_db
def test_claim_and_record_with_nothing_to_claim_isolates_too(refuse_success):
    good, bad = running_tasks(2)
    refuse_success([bad.pk])
    claimed, recorded = claiming.claim_and_record(
        "w", 0, [success(bad, 1), success(good, 2)], lease_seconds=60
    )
    assert (claimed, recorded) == ([], {good.pk})
    assert_failed_as_unstorable(bad, "this test refuses the success")


@pytest.mark.django_db(transaction=True)
@pytest.mark.process
@pytest.mark.parametrize(
    "settings_module",
    [
        SETTINGS,
        # With the demo's receiver, each child records its own successes (jobs.execution.executor).
        "tests.settings",
    ],
    ids=["recorded-by-the-supervisor", "recorded-by-the-child"],
)
def test_worker_records_batch_mates_once_and_stays_up(
    refuse_success, start_worker, settings_module
):
    """A real worker: one success refused among many; the others succeed on their first run."""
    enqueued = [tasks.add.enqueue(n, 0).record for n in range(40)]
    bad = enqueued[17]
    refuse_success([bad.pk])

    worker = start_worker("--concurrency", "2", env={"DJANGO_SETTINGS_MODULE": settings_module})

    def all_finished():
        return not Task.objects.exclude(status__in=[Status.SUCCEEDED, Status.FAILED]).exists()

    wait_for(all_finished, timeout=60, message="every task finished")
    good = [result for result in enqueued if result is not bad]
    rows = {task.pk: task for task in Task.objects.all()}
    assert {(rows[r.pk].status, rows[r.pk].attempts) for r in good} == {(Status.SUCCEEDED, 1)}
    assert [rows[r.pk].result for r in good] == [n for n in range(40) if n != 17]
    assert_failed_as_unstorable(rows[bad.pk], "this test refuses the success")
    assert rows[bad.pk].attempts == 1

    # Still serving: a task enqueued now runs.
    later = tasks.add.enqueue(100, 1).record
    wait_for(
        lambda: Task.objects.filter(pk=later.pk, status=Status.SUCCEEDED).exists(),
        timeout=30,
        message="the worker to run a later task",
    )
    assert worker.process.poll() is None, worker.output


@pytest.mark.django_db
def test_a_success_recorded_by_the_child_fails_alone_when_refused(refuse_success):
    """The child records a success itself when a receiver waits for it (executor.record)."""
    from jobs.execution import executor

    bad, good = running_tasks(2)
    refuse_success([bad.pk])
    outcome = executor.Outcome(executor.SUCCEEDED, result="refused")
    assert executor.record(bad, outcome) is True
    assert (outcome.kind, outcome.result) == (executor.FAILED, None)
    assert_failed_as_unstorable(bad, "this test refuses the success")
    # The transaction is still usable (a savepoint took the refusal on PostgreSQL).
    assert executor.record(good, executor.Outcome(executor.SUCCEEDED, result=1)) is True
    assert_succeeded([good], [1])


@pytest.mark.django_db(transaction=True)
def test_succeed_many_alone_fails_only_the_refused_success_of_either_statement(refuse_success):
    """Outside a transaction (``record_held``): a refused row among those nothing waits for,
    and one among a workflow's, each fail alone; the others are recorded, the batch settled."""
    import jobs
    from jobs.models import Workflow
    from tests.helpers import claim
    from tests.testapp import workflow_tasks as wt

    plain = running_tasks(3)
    workflow = jobs.batch([wt.double.s(1), wt.double.s(2)], on_finish=wt.callback.s("finish"))
    members = claim("w", 2, lease_seconds=60)
    refuse_success([plain[1].pk, members[0].pk])
    batch = [success(task, "r") for task in [*plain, *members]]
    applied = transitions.succeed_many(batch)
    assert applied == {plain[0].pk, plain[2].pk, members[1].pk}
    assert_succeeded([plain[0], plain[2], members[1]], ["r"] * 3)
    for task in (plain[1], members[0]):
        assert_failed_as_unstorable(task, "this test refuses the success")
    assert Workflow.objects.get(pk=workflow.pk).status == Workflow.State.FAILED
    assert Task.objects.get(workflow=workflow, workflow_role="on_finish").status == "pending"
