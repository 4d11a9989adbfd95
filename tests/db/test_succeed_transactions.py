"""How many statements a success recorded alone costs (transitions.succeed_many outside any
transaction, as ``jobs.execution.finishing.record_held`` calls it), and that a success
something waits for is still recorded with its settling in one transaction."""

import json

import pytest
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import jobs
from jobs import transitions
from jobs.models import Task, Workflow
from jobs.states import Status
from tests.helpers import claim, claim_for_dispatch, in_another_transaction
from tests.testapp import workflow_tasks as wt
from tests.testapp.tasks import add

# No receiver of task_succeeded: its signals read the rows again, statements of their own.
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("no_success_receivers"),
]


def successes(tasks):
    now = timezone.now()
    return [transitions.Success(t.pk, t.attempts, t.worker_id, 2, now) for t in tasks]


def statements(queries):
    return [query["sql"].split()[0].upper() for query in queries]


class InTransaction:
    """An execute wrapper noting, for every statement, whether a transaction was open."""

    def __init__(self):
        self.seen: list[tuple[str, bool]] = []

    def __call__(self, execute, sql, params, many, context):
        if not sql.upper().startswith("BEGIN"):  # SQLite's, opening the transaction
            self.seen.append((sql, context["connection"].in_atomic_block))
        return execute(sql, params, many, context)


def test_plain_successes_alone_are_one_statement_without_a_transaction():
    for n in range(3):
        add.enqueue(n, 1)
    running = claim("w", 3, lease_seconds=60)
    recorder = InTransaction()
    with CaptureQueriesContext(connection) as queries, connection.execute_wrapper(recorder):
        applied = transitions.succeed_many(successes(running))
    assert applied == {t.pk for t in running}
    # Before: SAVEPOINT, UPDATE, RELEASE SAVEPOINT inside BEGIN ... COMMIT (Django logs the
    # COMMIT; SQLite's BEGIN too, PostgreSQL's is psycopg's own).
    assert statements(queries) == ["WITH"]  # the UPDATE, its rows in a CTE
    assert recorder.seen
    assert not any(opened for _, opened in recorder.seen)
    assert set(Task.objects.values_list("status", flat=True)) == {Status.SUCCEEDED}


def test_inside_a_transaction_it_opens_none_of_its_own():
    add.enqueue(1, 1)
    running = claim("w", 1, lease_seconds=60)
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        transitions.succeed_many(successes(running))
    # The statement in a savepoint (a refused row must not abort the caller's transaction).
    assert statements(queries) == ["SAVEPOINT", "WITH", "RELEASE"]


def test_a_batchs_last_member_alone_is_recorded_with_its_settling_in_one_transaction():
    workflow = jobs.batch([wt.double.s(1)], on_finish=wt.callback.si("x", "finish"))
    running = claim("w", 1, lease_seconds=60)
    recorder = InTransaction()
    with CaptureQueriesContext(connection) as queries, connection.execute_wrapper(recorder):
        transitions.succeed_many(successes(running))
    workflow.refresh_from_db()
    assert workflow.status == Workflow.State.SUCCEEDED
    callback = Task.objects.get(workflow=workflow, workflow_role="on_finish")
    assert callback.status == Status.PENDING
    # The first statement, in autocommit, leaves the member alone (a workflow's); the member's
    # UPDATE and every settling statement after it run in one transaction.
    first, *rest = recorder.seen
    assert not first[1]
    assert "workflow_id IS NULL" in first[0]
    assert rest
    assert all(opened for _, opened in rest)
    assert statements(queries)[-1] == "COMMIT"  # one, closing the member and its settling
    assert statements(queries).count("COMMIT") == 1


def test_settling_that_fails_leaves_the_outcome_unwritten():
    """The outcome and its settling stand or fall together: a fault in the settling (here the
    workflow's lock refused) rolls the member's success back; it stays running, to be rescued."""
    workflow = jobs.batch([wt.double.s(1)], on_finish=wt.callback.si("x", "finish"))
    (member,) = claim("w", 1, lease_seconds=60)

    def refuse_the_lock(execute, sql, params, many, context):
        if sql.lstrip().upper().startswith('UPDATE "JOBS_WORKFLOW"'):
            raise DatabaseError("refused by the test")
        return execute(sql, params, many, context)

    with pytest.raises(DatabaseError), connection.execute_wrapper(refuse_the_lock):
        transitions.succeed_many(successes([member]))
    member.refresh_from_db()
    assert member.status == Status.RUNNING
    assert Workflow.objects.get(pk=workflow.pk).status == Workflow.State.RUNNING
    assert Task.objects.get(workflow=workflow, workflow_role="on_finish").status == Status.BLOCKED


def test_a_dependent_enqueued_while_its_dependency_ran_is_released_by_its_success_alone():
    """``has_dependents`` set after the claim: the autocommit statement, reading the row it
    moves, leaves the dependency to the transaction that settles it."""
    add.enqueue(1, 1)
    (dependency,) = claim("w", 1, lease_seconds=60)
    dependent = add.using(depends_on=[dependency.pk]).enqueue(2, 2)
    assert Task.objects.get(pk=dependent.id).status == Status.BLOCKED
    transitions.succeed_many(successes([dependency]))
    assert Task.objects.get(pk=dependency.pk).status == Status.SUCCEEDED
    assert Task.objects.get(pk=dependent.id).status == Status.PENDING


def test_a_mix_records_every_success():
    add.enqueue(1, 1)
    jobs.batch([wt.double.s(1)], on_finish=wt.callback.si("x", "finish"))
    running = claim("w", 2, lease_seconds=60)
    assert len(running) == 2
    applied = transitions.succeed_many(successes(running))
    assert applied == {t.pk for t in running}
    assert Task.objects.filter(status=Status.PENDING, workflow_role="on_finish").count() == 1


def test_a_success_known_to_be_waited_for_goes_straight_to_its_transaction():
    """``record_held`` knows a workflow's member from its row: no autocommit statement first."""
    jobs.batch([wt.double.s(1)], on_finish=wt.callback.si("x", "finish"))
    (member,) = claim("w", 1, lease_seconds=60)
    success = transitions.Success(
        member.pk, member.attempts, member.worker_id, 2, timezone.now(), waited_for=True
    )
    with CaptureQueriesContext(connection) as queries:
        assert transitions.succeed_many([success]) == {member.pk}
    assert "workflow_id IS NULL" not in queries[0]["sql"] + queries[1]["sql"]
    assert statements(queries)[:3] == ["BEGIN", "SAVEPOINT", "WITH"]
    assert Task.objects.get(workflow_role="on_finish").status == Status.PENDING


def test_a_dependent_enqueued_during_the_autocommit_statement_is_still_released(postgres_only):
    """PostgreSQL, two connections: the dependent's enqueue holds its dependency's row (not yet
    committed) when the success is written alone. The autocommit UPDATE waits for the row, then
    reads it as committed (``has_dependents``), leaves it, and the transaction that settles it
    records it: the dependent is released, not left blocked."""
    import threading

    from tests.conftest import wait_for

    add.enqueue(1, 1)
    (dependency,) = claim("w", 1, lease_seconds=60)
    errors: list = []

    def enqueue_dependent():
        return add.using(depends_on=[dependency.pk]).enqueue(2, 2).id

    def record():
        try:
            transitions.succeed_many(successes([dependency]))
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    def recorder_waits_for_the_row():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database()"
            )
            return cursor.fetchone()[0] > 0

    # The enqueue's transaction stays open until the recorder waits for the row.
    with in_another_transaction(enqueue_dependent, timeout=20) as dependent_id:
        recorder = threading.Thread(target=record)
        recorder.start()
        wait_for(recorder_waits_for_the_row, timeout=20, message="the success to wait for the row")
    recorder.join(30)
    assert not errors, errors
    assert Task.objects.get(pk=dependency.pk).status == Status.SUCCEEDED
    assert Task.objects.get(pk=dependent_id).status == Status.PENDING


def test_a_workflow_members_success_reported_to_the_supervisor_skips_the_unwaited_statement():
    """The claim says which tasks something waits for; the success the supervisor's pool makes
    of a child's reply carries it, so a workflow member's, recorded alone (the completer's
    ``flush``), goes straight to its transaction: no autocommit UPDATE that leaves it first
    (15 statements where 14 do). A plain task's still takes the one statement."""
    import time
    from multiprocessing import Pipe

    from jobs.worker.child import Child
    from jobs.worker.pool import ChildPool

    jobs.batch([wt.double.s(1)], on_finish=wt.callback.si("x", "finish"))
    plain_id = add.enqueue(1, 1).id
    claimed = {str(c.id): c for c in claim_for_dispatch("w", 2, lease_seconds=60)}
    plain = claimed.pop(str(plain_id))
    (member,) = claimed.values()
    assert (member.waited_for, plain.waited_for) == (True, False)

    reported: list = []
    pool = ChildPool(
        1, max_tasks=None, max_memory_bytes=None, retry=None, on_success=reported.append,
        stopping=lambda: False, before_fork=lambda: [],
    )  # fmt: skip
    ours, theirs = Pipe()
    child = Child(process=None, conn=ours, slot=None)
    child.batch, child.batch_number = {0: member, 1: plain}, 1
    results = [[0, "deferred", 2, time.time()], [1, "deferred", 2, time.time()]]
    theirs.send_bytes(
        json.dumps({"batch": 1, "results": results, "busy": 0.0, "final": False}).encode()
    )
    pool.receive(child)
    ours.close()
    theirs.close()
    by_id = {success.task_id: success for success in reported}
    assert by_id[member.id].waited_for
    assert not by_id[plain.id].waited_for

    with CaptureQueriesContext(connection) as queries:
        assert transitions.succeed_many([by_id[member.id]]) == {member.id}
    assert not any("workflow_id IS NULL" in query["sql"] for query in queries)
    assert len(queries) == 14
    assert Task.objects.get(workflow_role="on_finish").status == Status.PENDING
    with CaptureQueriesContext(connection) as queries:
        assert transitions.succeed_many([by_id[plain.id]]) == {plain.id}
    assert statements(queries) == ["WITH"]
