from datetime import timedelta

import pytest
from django.utils import timezone

from jobs import states, transitions
from jobs.error_records import ErrorRecord
from jobs.models import Task, Worker
from jobs.states import Status
from jobs.transitions import CancelOutcome
from tests.factories import TaskFactory, WorkerFactory

pytestmark = pytest.mark.django_db

ERROR = ErrorRecord(user_message="Try later.", exception="builtins.ConnectionError", message="x")
ALL_STATUSES = list(Status)


def test_terminal_and_claimable_sets_match_the_design():
    assert {Status.SUCCEEDED, Status.FAILED, Status.CANCELLED} == states.TERMINAL
    assert {Status.PENDING, Status.RETRYING} == states.CLAIMABLE
    assert {s.value for s in Status} == {
        "pending",
        "running",
        "succeeded",
        "failed",
        "retrying",
        "cancelled",
        "blocked",  # waiting for other tasks (jobs.workflows): claimable once released
    }
    assert states.UNBLOCK.sources == {Status.BLOCKED}
    assert Status.BLOCKED in states.CANCEL.sources


@pytest.mark.parametrize("status", ALL_STATUSES)
def test_succeed_applies_only_to_running(status):
    task = TaskFactory(status=status, attempts=1, worker_id="w")
    applied = transitions.succeed(task, {"n": 1})
    task.refresh_from_db()
    assert applied is (status == Status.RUNNING)
    assert task.status == (Status.SUCCEEDED if applied else status)
    if applied:
        assert task.result == {"n": 1}
        assert task.finished_at is not None
        assert task.lease_expires_at is None


@pytest.mark.parametrize("status", ALL_STATUSES)
def test_fail_and_retry_later_apply_only_to_running(status):
    failing = TaskFactory(status=status, attempts=1, worker_id="w")
    retried = TaskFactory(status=status, attempts=1, worker_id="w")
    later = timezone.now() + timedelta(seconds=10)
    assert transitions.fail(failing, ERROR) is (status == Status.RUNNING)
    assert transitions.retry_later(retried, ERROR, later) is (status == Status.RUNNING)
    failing.refresh_from_db()
    retried.refresh_from_db()
    if status == Status.RUNNING:
        assert failing.status == Status.FAILED
        assert failing.last_error == "Try later."
        assert retried.status == Status.RETRYING
        assert retried.run_after == later
    else:
        assert failing.status == status
        assert retried.status == status


def test_outcome_of_an_attempt_that_was_taken_over_is_refused():
    """A worker whose task was rescued and claimed again cannot overwrite the new attempt."""
    task = TaskFactory(running=True, attempts=1, worker_id="old")
    Task.objects.filter(pk=task.pk).update(attempts=2, worker_id="new")
    assert transitions.succeed(task, "stale result") is False
    task.refresh_from_db()
    assert task.status == Status.RUNNING
    assert task.result is None


def test_error_history_is_appended_not_overwritten():
    task = TaskFactory(running=True, error_details=[{"attempt": 0, "message": "earlier"}])
    transitions.fail(task, ERROR)
    task.refresh_from_db()
    assert [e["message"] for e in task.error_details] == ["earlier", "x"]
    assert task.error_details[-1]["attempt"] == 1
    assert task.error_details[-1]["user_message"] == "Try later."


@pytest.mark.parametrize(
    ("status", "outcome", "final"),
    [
        (Status.PENDING, CancelOutcome.CANCELLED, Status.CANCELLED),
        (Status.RETRYING, CancelOutcome.CANCELLED, Status.CANCELLED),
        (Status.RUNNING, CancelOutcome.REQUESTED, Status.RUNNING),
        (Status.SUCCEEDED, CancelOutcome.REFUSED, Status.SUCCEEDED),
        (Status.FAILED, CancelOutcome.REFUSED, Status.FAILED),
        (Status.CANCELLED, CancelOutcome.REFUSED, Status.CANCELLED),
    ],
)
def test_cancel(status, outcome, final):
    task = TaskFactory(status=status)
    assert transitions.cancel(task) == outcome
    task.refresh_from_db()
    assert task.status == final
    assert (task.cancel_requested_at is not None) == (outcome == CancelOutcome.REQUESTED)


def test_cancel_running_finishes_a_running_task():
    task = TaskFactory(running=True)
    assert transitions.cancel_running(task)
    task.refresh_from_db()
    assert task.status == Status.CANCELLED


@pytest.mark.parametrize("status", ALL_STATUSES)
def test_requeue_applies_to_failed_and_cancelled_and_keeps_history(status):
    task = TaskFactory(status=status, attempts=3, max_attempts=3, error_details=[{"m": 1}])
    applied = transitions.requeue(task)
    assert applied is (status in (Status.FAILED, Status.CANCELLED))
    task.refresh_from_db()
    if applied:
        assert task.status == Status.PENDING
        assert task.error_details == [{"m": 1}]
        assert task.max_attempts == 4  # one more attempt than it has used
        assert task.finished_at is None
    else:
        assert task.status == status


def test_requeue_many_counts_only_what_it_moved():
    failed = TaskFactory.create_batch(3, failed=True)
    TaskFactory(running=True)
    TaskFactory(succeeded=True)
    assert transitions.requeue_many(Task.objects.all()) == 3
    assert set(Task.objects.pending().values_list("pk", flat=True)) == {t.pk for t in failed}


def test_release_hands_the_task_back_without_spending_an_attempt():
    task = TaskFactory(running=True, attempts=2)
    assert transitions.release(task)
    task.refresh_from_db()
    assert task.status == Status.PENDING
    assert task.attempts == 1
    assert task.worker_id == ""


def test_rescue_expired_returns_stale_tasks_and_fails_exhausted_ones():
    now = timezone.now()
    retry = TaskFactory(stale=True, attempts=1, max_attempts=3)
    exhausted = TaskFactory(stale=True, attempts=3, max_attempts=3)
    healthy = TaskFactory(running=True)
    assert transitions.rescue_expired(now=now) == 2
    for task in (retry, exhausted, healthy):
        task.refresh_from_db()
    assert retry.status == Status.RETRYING
    assert exhausted.status == Status.FAILED
    assert exhausted.error_details[-1]["exception"] == "jobs.exceptions.WorkerLost"
    assert healthy.status == Status.RUNNING


def test_rescue_dead_returns_the_dead_workers_tasks_and_removes_its_row():
    dead, alive = WorkerFactory(pid=4242), WorkerFactory()
    retry = TaskFactory(running=True, worker_id=dead.pk, attempts=1, max_attempts=3)
    exhausted = TaskFactory(running=True, worker_id=dead.pk, attempts=3, max_attempts=3)
    # Rescued already and claimed again by another worker: a later attempt, untouched.
    taken_over = TaskFactory(running=True, worker_id=alive.pk, attempts=2)
    other = TaskFactory(running=True, worker_id=alive.pk)
    assert transitions.rescue_dead([dead.pk, "never-registered"]) == 2
    for task in (retry, exhausted, taken_over, other):
        task.refresh_from_db()
    assert retry.status == Status.RETRYING
    assert retry.lease_expires_at is None
    assert exhausted.status == Status.FAILED
    last = retry.error_details[-1]
    assert last["exception"] == "jobs.exceptions.WorkerLost"
    assert last["message"] == f"worker {dead.pk!r} died (pid 4242 gone)"
    assert taken_over.status == other.status == Status.RUNNING
    assert not Worker.objects.filter(pk=dead.pk).exists()
    assert Worker.objects.filter(pk=alive.pk).exists()


def test_rescue_dead_of_nothing_does_nothing():
    task = TaskFactory(running=True, worker_id="w")
    assert transitions.rescue_dead([]) == 0
    task.refresh_from_db()
    assert task.status == Status.RUNNING


def test_nothing_outside_transitions_and_claiming_writes_status():
    """Grep the package: status is only written by the two modules that own it.

    The statements that write it are text in ``jobs/sql/``; only ``jobs/transitions/`` and
    ``claiming.py`` run them (by the names that ``jobs.sql`` gives them). Anything else that
    sets ``status`` (an attribute, an ORM ``update``, SQL text) is a writer too.
    """
    import pathlib
    import re

    import jobs

    package = pathlib.Path(jobs.__file__).parent
    owners = {"transitions", "claiming.py"}
    # The statements of jobs.sql that change a status (their SQL text says SET status, or
    # takes jobs.sql.common.CLAIM_ASSIGNMENTS).
    statements = ("claim_tasks", "succeed_attempts", "release_attempts")
    writers, runners, texts = set(), set(), set()
    pattern = re.compile(r"\.status\s*=(?!=)|update\([^)]*\bstatus\s*=|SET status")
    running = re.compile(r"\.(" + "|".join(statements) + r")\b")
    for path in package.rglob("*.py"):
        if "migrations" in path.parts:
            continue
        text = path.read_text()
        in_sql = path.parent.name == "sql"
        # The package of transitions counts as one owner, whichever of its modules writes.
        owner = "transitions" if path.parent.name == "transitions" else path.name
        if pattern.search(text):
            (texts if in_sql else writers).add(owner)
        if not in_sql and running.search(text):
            runners.add(owner)
    assert writers <= {"transitions"}, writers
    assert runners == owners, runners
    assert texts == {"common.py"}, texts
    sql_home = package / "sql"
    for name in statements:
        for module in ("postgresql.py", "sqlite.py"):
            assert f"def {name}(" in (sql_home / module).read_text(), (name, module)


def test_requeue_reopens_only_the_workflows_of_the_rows_it_moved():
    """Another process's row stamped at the same instant (a finished batch's callback released
    at ``now``) is not taken for one this requeue moved: its batch stays finished."""
    from jobs.models import Workflow
    from tests.factories import WorkflowFactory

    now = timezone.now()
    retried = WorkflowFactory(failed=True, members=["failed"])
    done = WorkflowFactory(succeeded=True, members=["succeeded"])
    callback = TaskFactory(workflow=done, workflow_role="on_finish", status=Status.PENDING)
    Task.objects.filter(pk=callback.pk).update(updated_at=now)
    (member,) = retried.tasks.all()
    assert transitions.requeue_many(Task.objects.filter(pk=member.pk), now=now) == 1
    assert Workflow.objects.get(pk=retried.pk).status == Workflow.State.RUNNING
    assert Workflow.objects.get(pk=done.pk).status == Workflow.State.SUCCEEDED


def test_a_status_change_of_many_rows_returns_the_ids_its_update_moved():
    """``jobs.sql.common.update_returning_ids`` (Django's UPDATE, with RETURNING) on this
    database: the ids of the rows moved, none other, whatever the values' kinds."""
    failed = TaskFactory.create_batch(3, failed=True)
    TaskFactory(succeeded=True)
    queryset = Task.objects.filter(pk__in=[t.pk for t in failed[:2]])
    assert transitions.requeue_many(queryset) == 2
    assert set(Task.objects.pending().values_list("pk", flat=True)) == {t.pk for t in failed[:2]}
