"""Workflows on the task record: dependencies, chains, batches (jobs.workflows), run in this
process as a worker would (jobs.testing.drain)."""

import uuid

import pytest

import jobs
from jobs import transitions
from jobs.exceptions import PayloadError
from jobs.models import Task, TaskDependency, Workflow
from jobs.states import Status
from jobs.testing import drain
from jobs.workflows import progress
from tests.factories import MemberFactory, TaskFactory
from tests.testapp import django_tasks
from tests.testapp import workflow_tasks as wt
from tests.testapp.models import SideEffect

pytestmark = pytest.mark.django_db(transaction=True)


def effects(prefix=""):
    return sorted(SideEffect.objects.filter(key__startswith=prefix).values_list("key", flat=True))


# Dependencies ---------------------------------------------------------------------------------


def test_a_dependent_is_blocked_until_its_dependencies_succeed_then_runs():
    a, b = wt.double.enqueue(1), wt.double.enqueue(2)
    waiting = wt.mark.using(depends_on=[a, b]).enqueue("after")
    row = Task.objects.get(pk=waiting.id)
    assert row.status == Status.BLOCKED
    assert set(Task.objects.filter(has_dependents=True).values_list("pk", flat=True)) == {
        uuid.UUID(a.id),
        uuid.UUID(b.id),
    }

    drain(until_empty=False)  # one round: a and b only; the dependent was not claimable
    row.refresh_from_db()
    assert row.status == Status.PENDING
    assert effects() == []
    drain()
    row.refresh_from_db()
    assert row.status == Status.SUCCEEDED
    assert effects() == ["after:[]"]


def test_a_failed_dependency_cancels_its_dependents_with_a_reason_naming_it():
    failing = wt.fail_now.enqueue()
    dependent = wt.mark.using(depends_on=[failing]).enqueue("never")
    further = wt.mark.using(depends_on=[dependent]).enqueue("never either")
    drain()
    first, second = Task.objects.get(pk=dependent.id), Task.objects.get(pk=further.id)
    assert first.status == second.status == Status.CANCELLED
    assert first.last_error == (
        f"Cancelled: it depended on tests.testapp.workflow_tasks.fail_now ({failing.id}), "
        "which failed."
    )
    assert f"({dependent.id}), which was cancelled." in second.last_error
    assert effects() == []


def test_run_anyway_runs_the_dependent_once_every_dependency_has_finished():
    failing, fine = wt.fail_now.enqueue(), wt.double.enqueue(3)
    anyway = wt.mark.using(depends_on=[failing, fine], on_dependency_failure="run").enqueue("x")
    drain()
    assert Task.objects.get(pk=anyway.id).status == Status.SUCCEEDED
    assert effects() == ["x:[]"]


def test_a_cancelled_dependency_cancels_its_dependents():
    first = wt.double.using(delay=3600).enqueue(1)
    dependent = wt.mark.using(depends_on=[first]).enqueue("never")
    transitions.cancel(Task.objects.get(pk=first.id))
    row = Task.objects.get(pk=dependent.id)
    assert row.status == Status.CANCELLED
    assert "which was cancelled" in row.last_error


def test_a_dependency_finished_already_decides_at_the_enqueue():
    done = TaskFactory(succeeded=True)
    failed = TaskFactory(failed=True)
    assert wt.mark.using(depends_on=[done]).enqueue("a").status.name == "READY"
    assert Task.objects.get(pk=wt.mark.using(depends_on=[done]).enqueue("b").id).status == (
        Status.PENDING
    )
    cancelled = Task.objects.get(pk=wt.mark.using(depends_on=[failed]).enqueue("c").id)
    assert cancelled.status == Status.CANCELLED
    anyway = wt.mark.using(depends_on=[failed], on_dependency_failure="run").enqueue("d")
    assert Task.objects.get(pk=anyway.id).status == Status.PENDING


def test_a_dependency_that_does_not_exist_is_refused_and_nothing_is_written():
    with pytest.raises(PayloadError, match="no task"):
        wt.mark.using(depends_on=[uuid.uuid4()]).enqueue("x")
    assert not Task.objects.exists()
    assert not TaskDependency.objects.exists()


def test_another_owners_task_is_no_dependency():
    alice, bob = MemberFactory(), MemberFactory()
    hers = wt.double.using(owner=alice).enqueue(1)
    with pytest.raises(PayloadError, match="no task"):
        wt.mark.using(owner=bob, depends_on=[hers]).enqueue("x")
    with pytest.raises(PayloadError, match="no task"):  # nobody's task may not wait on hers
        wt.mark.using(depends_on=[hers]).enqueue("x")
    assert wt.mark.using(owner=alice, depends_on=[hers]).enqueue("mine").status.name == "READY"


@pytest.mark.parametrize(
    ("value", "message"),
    [("not-a-uuid", "no task"), (42, "no task"), (object(), "no task")],
)
def test_a_dependency_that_is_no_task_is_refused_by_using(value, message):
    with pytest.raises(ValueError, match=message):
        wt.mark.using(depends_on=[value])


def test_an_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="on_dependency_failure"):
        wt.mark.using(on_dependency_failure="ignore")


def test_no_cycle_can_be_made_an_idempotent_duplicate_adds_no_wait():
    first = wt.mark.using(idempotency_key="k").enqueue("first")
    again = wt.mark.using(idempotency_key="k", depends_on=[first]).enqueue("again")
    assert again.id == first.id
    assert not TaskDependency.objects.exists()
    assert Task.objects.get(pk=first.id).status == Status.PENDING


def test_a_blocked_task_can_be_cancelled_and_its_dependents_follow():
    first = wt.double.using(delay=3600).enqueue(1)
    second = wt.mark.using(depends_on=[first]).enqueue("2")
    third = wt.mark.using(depends_on=[second]).enqueue("3")
    transitions.cancel(Task.objects.get(pk=second.id))
    assert Task.objects.get(pk=third.id).status == Status.CANCELLED
    assert Task.objects.get(pk=first.id).status == Status.PENDING


# Chains ---------------------------------------------------------------------------------------


def test_a_chain_passes_each_result_to_the_next():
    workflow = jobs.chain(wt.double.s(5), wt.add_one.s(), wt.mark.s("end"))
    assert workflow.kind == Workflow.Kind.CHAIN
    assert progress(workflow).text == "0 of 3 done"
    drain()
    links = list(Task.objects.filter(workflow=workflow).order_by("created_at", "id"))
    assert [t.status for t in links] == [Status.SUCCEEDED] * 3
    assert effects() == ["11:['end']"]  # the result first, as Celery's signatures
    workflow.refresh_from_db()
    assert workflow.status == Workflow.State.SUCCEEDED
    assert progress(workflow).text == "3 of 3 done"


def test_a_chain_through_djangos_task_decorator():
    workflow = jobs.chain(django_tasks.django_double.s(2), django_tasks.django_double.s())
    drain()
    results = sorted(Task.objects.filter(workflow=workflow).values_list("result", flat=True))
    assert results == [4, 8]


def test_an_immutable_link_receives_nothing():
    jobs.chain(wt.double.s(5), wt.mark.si("plain"))
    drain()
    assert effects() == ["plain:[]"]


def test_a_failed_link_cancels_the_rest_and_fails_the_chain():
    workflow = jobs.chain(wt.double.s(1), wt.fail_now.si(), wt.mark.s("never"))
    drain()
    workflow.refresh_from_db()
    assert workflow.status == Workflow.State.FAILED
    assert progress(workflow).text == "3 of 3 done, 1 failed, 1 cancelled"
    assert effects() == []


def test_an_empty_chain_is_refused():
    with pytest.raises(PayloadError):
        jobs.chain()
    with pytest.raises(PayloadError):
        jobs.chain(wt.double)  # a task, not a call


# Batches --------------------------------------------------------------------------------------


def test_a_batch_runs_on_success_and_on_finish_once_and_cancels_on_failure():
    workflow = jobs.batch(
        [wt.double.s(i) for i in range(5)],
        on_success=wt.callback.s("success"),
        on_failure=wt.callback.s("failure"),
        on_finish=wt.callback.s("finish"),
        summary="five doubles",
    )
    assert Task.objects.filter(workflow=workflow, status=Status.BLOCKED).count() == 3
    drain()
    workflow.refresh_from_db()
    assert workflow.status == Workflow.State.SUCCEEDED
    assert effects() == ["finish", "success"]
    failure = Task.objects.get(workflow=workflow, workflow_role="on_failure")
    assert failure.status == Status.CANCELLED
    assert failure.last_error == "Not run: the batch succeeded."
    success = Task.objects.get(workflow=workflow, workflow_role="on_success")
    assert success.result == str(workflow.pk)  # .s(): the batch's id first
    assert progress(workflow).as_dict()["text"] == "5 of 5 done"


def test_a_batch_with_a_failed_member_runs_on_failure_and_retry_runs_only_the_failed():
    workflow = jobs.batch(
        [wt.double.s(1), wt.fail_now.s("one"), wt.double.s(2)],
        on_success=wt.callback.s("success"),
        on_failure=wt.callback.s("failure"),
    )
    drain()
    workflow.refresh_from_db()
    assert workflow.status == Workflow.State.FAILED
    assert progress(workflow).text == "3 of 3 done, 1 failed"
    assert effects() == ["failure"]

    assert jobs.retry_workflow(workflow) == 1
    workflow.refresh_from_db()
    assert workflow.status == Workflow.State.RUNNING
    assert Task.objects.filter(workflow=workflow, status=Status.PENDING).count() == 1
    ran = drain()
    # Only the failed member ran again, then the callback its new outcome says.
    assert [t.name.rsplit(".", 1)[1] for t in ran.tasks] == ["fail_now", "callback"]
    workflow.refresh_from_db()
    assert workflow.status == Workflow.State.FAILED
    assert effects() == ["failure", "failure"]  # once per completion


def test_a_batch_cancelled_as_a_whole_runs_no_callback():
    workflow = jobs.batch(
        [wt.double.using(delay=3600).s(i) for i in range(3)],
        on_finish=wt.callback.s("finish"),
    )
    counts = jobs.cancel_workflow(workflow)
    assert counts.cancelled == 4
    workflow.refresh_from_db()
    assert workflow.status == Workflow.State.CANCELLED
    drain(with_scheduled=True)
    assert effects() == []


@pytest.mark.parametrize("action", [jobs.cancel_workflow, jobs.retry_workflow])
@pytest.mark.parametrize(
    "workflow_id", [uuid.uuid4(), str(uuid.uuid4()), "not-a-uuid", "a\x00b", "\ud800", 5, None]
)
def test_an_action_on_a_workflow_that_does_not_exist_says_so(action, workflow_id):
    other = jobs.batch([wt.double.using(delay=3600).s(1)])
    with pytest.raises(Workflow.DoesNotExist, match="No workflow has the id "):
        action(workflow_id)
    other.refresh_from_db()  # nothing else touched
    assert other.status == Workflow.State.RUNNING
    assert Task.objects.get(workflow=other).status == Status.PENDING


def test_a_batch_of_no_members_has_succeeded_at_once():
    workflow = jobs.batch([], on_success=wt.callback.s("empty"), on_failure=wt.callback.s("no"))
    assert workflow.status == Workflow.State.SUCCEEDED
    assert progress(workflow).text == "0 of 0 done"
    drain()
    assert effects() == ["empty"]


def test_a_batch_of_mixed_tasks_and_owners():
    owner = MemberFactory()
    workflow = jobs.batch(
        [wt.double.s(1), django_tasks.django_double.s(2), wt.double.s(3)],
        on_finish=wt.callback.si("x", "done"),
        owner=owner,
    )
    assert set(Task.objects.filter(workflow=workflow).values_list("owner", flat=True)) == {owner.pk}
    drain()
    assert effects() == ["done"]


def test_a_batch_refuses_what_is_no_call():
    with pytest.raises(PayloadError):
        jobs.batch([wt.double])
    with pytest.raises(PayloadError):
        jobs.batch([wt.double.s(1)], on_success=wt.callback)
    assert not Workflow.objects.exists()
