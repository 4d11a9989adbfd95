"""A failure, retry, cancellation or report the database refuses fails its own task, and no other.

Extends test_outcome_isolation.py (refused successes) to every outcome a child records, and to
what a running task reports. The refusal comes from a trigger (a real database error, the same
on SQLite and PostgreSQL) refusing rows whose ``error_details``, ``progress_message`` or step
result say "poison"; its own message does not, so that the plain failure recorded instead is
stored.
"""

import pytest
from django.db import connection, transaction

from jobs.error_records import ErrorRecord
from jobs.exceptions import ReportRefused
from jobs.execution import executor
from jobs.execution.context import TaskContext
from jobs.models import Task, TaskStep
from jobs.states import Status
from tests.conftest import wait_for
from tests.factories import TaskFactory
from tests.hostile import poison_tasks
from tests.hostile.adversarial import assert_succeeded_once, enqueue_bystanders
from tests.testapp import tasks
from tests.testapp.models import SideEffect

TRIGGER = "jobs_test_refuse_marked"  # not "poison": PostgreSQL quotes it in its error
REFUSAL = "this test refuses the row"


def _create_triggers(cursor, quote):
    task_table, step_table = quote(Task._meta.db_table), quote(TaskStep._meta.db_table)
    if connection.vendor == "postgresql":
        cursor.execute(
            f"CREATE FUNCTION {TRIGGER}() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN RAISE EXCEPTION '{REFUSAL}'; END $$"
        )
        cursor.execute(
            f"CREATE TRIGGER {TRIGGER} BEFORE UPDATE ON {task_table} FOR EACH ROW "
            "WHEN (NEW.progress_message LIKE '%%poison%%' "
            "OR NEW.error_details::text LIKE '%%poison%%') "
            f"EXECUTE FUNCTION {TRIGGER}()"
        )
        cursor.execute(
            f"CREATE TRIGGER {TRIGGER}_step BEFORE INSERT ON {step_table} FOR EACH ROW "
            f"WHEN (NEW.result::text LIKE '%%poison%%') EXECUTE FUNCTION {TRIGGER}()"
        )
    else:
        cursor.execute(
            f"CREATE TRIGGER {TRIGGER} BEFORE UPDATE ON {task_table} FOR EACH ROW "
            "WHEN NEW.progress_message LIKE '%poison%' OR NEW.error_details LIKE '%poison%' "
            f"BEGIN SELECT RAISE(ABORT, '{REFUSAL}'); END"
        )
        cursor.execute(
            f"CREATE TRIGGER {TRIGGER}_step BEFORE INSERT ON {step_table} FOR EACH ROW "
            f"WHEN NEW.result LIKE '%poison%' BEGIN SELECT RAISE(ABORT, '{REFUSAL}'); END"
        )


@pytest.fixture
def refuse_poison():
    """From now on the database refuses any task row or step result that says "poison"."""
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        _create_triggers(cursor, quote)
    yield
    task_table, step_table = quote(Task._meta.db_table), quote(TaskStep._meta.db_table)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER} ON {task_table}")
            cursor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER}_step ON {step_table}")
            cursor.execute(f"DROP FUNCTION IF EXISTS {TRIGGER}()")
        else:
            cursor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER}")
            cursor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER}_step")


def poisoned_error(transient=False):
    try:
        raise ValueError("poison in the error")
    except ValueError as exc:
        return ErrorRecord.from_exception(exc, "Sorry.", transient)


def assert_failed_plainly(task, what, raised="builtins.ValueError"):
    task.refresh_from_db()
    assert task.status == Status.FAILED, task.error_details
    assert task.lease_expires_at is None
    entry = task.error_details[-1]
    assert entry["exception"] == raised
    assert entry["permanent"] is True
    assert f"the database refused to record the {what} of this task" in entry["message"]
    assert REFUSAL in entry["message"]
    assert "poison" not in str(task.error_details)


# In-process: executor.record and TaskContext -------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("kind", "what"),
    [(executor.FAILED, "failure"), (executor.RETRYING, "retry")],
)
def test_a_refused_outcome_is_recorded_as_a_plain_failure(refuse_poison, kind, what):
    task, other = TaskFactory(running=True), TaskFactory(running=True)
    outcome = executor.Outcome(kind, error=poisoned_error(kind == executor.RETRYING), retry_in=5)
    assert executor.record(task, outcome) is True
    assert outcome.kind == executor.FAILED
    assert_failed_plainly(task, what)
    # The connection is still usable, and the next task is recorded as usual.
    assert executor.record(other, executor.Outcome(executor.SUCCEEDED, result=1)) is True
    other.refresh_from_db()
    assert other.status == Status.SUCCEEDED


@pytest.fixture
def refuse_cancelled():
    """From now on the database refuses to mark any task cancelled."""
    table = connection.ops.quote_name(Task._meta.db_table)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"CREATE FUNCTION {TRIGGER}_c() RETURNS trigger LANGUAGE plpgsql AS "
                f"$$ BEGIN RAISE EXCEPTION '{REFUSAL}'; END $$"
            )
            cursor.execute(
                f"CREATE TRIGGER {TRIGGER}_c BEFORE UPDATE ON {table} FOR EACH ROW "
                f"WHEN (NEW.status = 'cancelled') EXECUTE FUNCTION {TRIGGER}_c()"
            )
        else:
            cursor.execute(
                f"CREATE TRIGGER {TRIGGER}_c BEFORE UPDATE ON {table} FOR EACH ROW "
                f"WHEN NEW.status = 'cancelled' BEGIN SELECT RAISE(ABORT, '{REFUSAL}'); END"
            )
    yield
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER}_c ON {table}")
            cursor.execute(f"DROP FUNCTION IF EXISTS {TRIGGER}_c()")
        else:
            cursor.execute(f"DROP TRIGGER IF EXISTS {TRIGGER}_c")


@pytest.mark.django_db
def test_a_refused_cancellation_is_recorded_as_a_plain_failure(refuse_cancelled):
    task = TaskFactory(running=True)
    assert executor.record(task, executor.Outcome(executor.CANCELLED)) is True
    assert_failed_plainly(task, "cancellation", raised="jobs.exceptions.TaskCancelled")


@pytest.mark.django_db
def test_a_refused_outcome_in_a_transaction_keeps_the_transaction_usable(refuse_poison):
    task = TaskFactory(running=True)
    with transaction.atomic():
        assert executor.record(task, executor.Outcome(executor.FAILED, error=poisoned_error()))
        assert Task.objects.filter(status=Status.FAILED).count() == 1
    assert_failed_plainly(task, "failure")


@pytest.mark.django_db
def test_when_even_the_plain_failure_is_refused_the_task_is_left_to_its_lease(refuse_poison):
    task = TaskFactory(running=True, error_details=[{"message": "poison of an earlier attempt"}])
    outcome = executor.Outcome(executor.FAILED, error=poisoned_error())
    assert executor.record(task, outcome) is False
    task.refresh_from_db()
    assert task.status == Status.RUNNING


@pytest.mark.django_db
def test_a_refused_progress_report_raises_in_the_task(refuse_poison):
    context = TaskContext(TaskFactory(running=True))
    with pytest.raises(ReportRefused, match=f"refused to store the progress report.*{REFUSAL}"):
        context.progress(1, 2, "poison progress")
    context.progress(2, 2, "fine")  # the connection is still usable
    assert Task.objects.get(pk=context.task.pk).progress_message == "fine"


@pytest.mark.django_db
def test_a_refused_step_result_raises_in_the_task(refuse_poison):
    context = TaskContext(TaskFactory(running=True))
    with transaction.atomic():
        with pytest.raises(ReportRefused, match="refused to store the result of step 'a'"):
            context.step("a", lambda: "poison")
        assert context.step("b", lambda: "fine") == "fine"  # the transaction is usable
    assert context.completed_steps == {"b": "fine"}


# A real worker -------------------------------------------------------------------------------

POISONED = [
    (poison_tasks.poisoned_failure, "failure", "builtins.ValueError"),
    (poison_tasks.poisoned_retry, "retry", "builtins.ConnectionError"),
    (poison_tasks.poisoned_progress, None, "jobs.exceptions.ReportRefused"),
    (poison_tasks.poisoned_step, None, "jobs.exceptions.ReportRefused"),
]


@pytest.mark.django_db(transaction=True)
@pytest.mark.process
@pytest.mark.parametrize(
    ("poisoned", "what", "raised"), POISONED, ids=["failure", "retry", "progress", "step"]
)
def test_worker_fails_the_poisoned_task_once_and_runs_batch_mates_once(
    refuse_poison, start_worker, poisoned, what, raised
):
    before = enqueue_bystanders("before", 15)
    bad = poisoned.enqueue("poisoned").record
    after = enqueue_bystanders("after", 15)

    worker = start_worker(
        "--concurrency",
        "2",
        env={"DJANGO_SETTINGS_MODULE": "tests.hostile.settings_without_receivers"},
    )

    def all_finished():
        return not Task.objects.exclude(status__in=[Status.SUCCEEDED, Status.FAILED]).exists()

    wait_for(all_finished, timeout=60, message="every task finished")
    bad.refresh_from_db()
    assert (bad.status, bad.attempts) == (Status.FAILED, 1), bad.error_details
    assert SideEffect.objects.filter(key="poisoned").count() == 1
    assert not SideEffect.objects.filter(key="poisoned-after-progress").exists()
    entry = bad.error_details[-1]
    assert entry["exception"] == raised
    if what:
        assert_failed_plainly(bad, what, raised)
    else:
        # The task's own failure, its policy applied (ReportRefused is not transient), recorded
        # plainly (its traceback quotes the line with "poison").
        assert "refused to" in entry["message"], entry
        assert REFUSAL in entry["message"]
    assert_succeeded_once(before + after)
    assert "child failed outside a task" not in worker.output
    assert "child exited" not in worker.output

    later = tasks.add.enqueue(100, 1).record  # still serving
    wait_for(
        lambda: Task.objects.filter(pk=later.pk, status=Status.SUCCEEDED).exists(),
        timeout=30,
        message="the worker to run a later task",
    )
    assert worker.process.poll() is None, worker.output
