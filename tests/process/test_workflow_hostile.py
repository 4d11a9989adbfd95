"""Hostile workflows with a real worker: the owner deleted while the batch runs, and callbacks
that raise ``BaseException`` (``SystemExit``, ``KeyboardInterrupt``) from their body."""

import pytest
from django.urls import reverse

import jobs
from jobs.models import Task, Workflow
from jobs.states import Status
from jobs.tasks.retry import GENERIC_FAILURE_MESSAGE
from tests.conftest import wait_for
from tests.factories import UserFactory
from tests.helpers import staff
from tests.hostile.adversarial import assert_succeeded_once, enqueue_bystanders
from tests.testapp import workflow_tasks as wt
from tests.testapp.models import SideEffect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]


def _callbacks(workflow) -> dict:
    rows = Task.objects.filter(workflow=workflow).exclude(workflow_role="member")
    return {task.workflow_role: task for task in rows}


def _settled(workflow):
    def done():
        rows = Task.objects.filter(workflow=workflow)
        return not rows.exclude(status__in=["succeeded", "failed", "cancelled"]).exists()

    return done


def test_a_batch_whose_owner_is_deleted_while_it_runs_finishes_and_runs_its_callback(
    start_worker, client
):
    """Task.owner and Workflow.owner are SET_NULL: the work outlives the account, as a task
    does. The batch finishes, its callback runs once; nobody's now, only a viewer sees it."""
    owner = UserFactory(username="leaving")
    workflow = jobs.batch(
        [wt.slow_mark.s("member-1", 1.0), wt.slow_mark.s("member-2", 1.0)],
        on_finish=wt.callback.s("finish"),
        on_failure=wt.callback.s("failure"),
        owner=owner,
        summary="Import of 2 files",
    )
    worker = start_worker("--concurrency", "1")
    wait_for(
        lambda: Task.objects.filter(workflow=workflow, status=Status.RUNNING).exists(),
        timeout=30,
        message="a member running",
    )
    owner.delete()  # while a member runs and the other waits
    wait_for(_settled(workflow), timeout=60, message="the batch and its callbacks to finish")

    workflow.refresh_from_db()
    assert workflow.owner_id is None
    assert workflow.status == Workflow.State.SUCCEEDED
    assert not Task.objects.filter(workflow=workflow, owner__isnull=False).exists()
    callbacks = _callbacks(workflow)
    assert callbacks["on_finish"].status == Status.SUCCEEDED
    assert callbacks["on_finish"].attempts == 1
    assert callbacks["on_failure"].status == Status.CANCELLED
    assert SideEffect.objects.filter(key="finish").count() == 1
    assert worker.process.poll() is None  # the worker carries on
    assert "Traceback" not in worker.output

    status = reverse("jobs:workflow-status", args=[workflow.pk])
    assert client.get(status).status_code == 404  # anonymous
    client.force_login(UserFactory(username="someone-else"))
    assert client.get(status).json() == {"error": "No such workflow."}
    client.force_login(staff(username="staff-without-permission"))
    assert client.get(status).status_code == 404
    client.force_login(staff("view_task", username="viewer"))
    assert client.get(status).json()["status"] == Workflow.State.SUCCEEDED


@pytest.mark.parametrize(
    ("kind", "exception"),
    [("exit", "builtins.SystemExit"), ("ctrl-c", "builtins.KeyboardInterrupt")],
)
def test_a_callback_raising_a_base_exception_fails_once_and_the_worker_survives(
    start_worker, kind, exception
):
    """A failed batch's callbacks (on_failure, on_finish) raise from their body: each is
    recorded failed, its exception named, once; the batch ends failed; the worker serves on."""
    workflow = jobs.batch(
        [wt.double.s(1), wt.fail_now.s("a member")],
        on_failure=wt.callback_raises.s("on-failure", kind),
        on_finish=wt.callback_raises.s("on-finish", kind),
    )
    worker = start_worker("--concurrency", "1")
    wait_for(_settled(workflow), timeout=60, message="the batch and its callbacks to finish")
    bystanders = enqueue_bystanders(f"after-callback-{kind}")
    wait_for(
        lambda: (
            not Task.objects.filter(pk__in=[b.pk for b in bystanders])
            .exclude(status=Status.SUCCEEDED)
            .exists()
        ),
        timeout=30,
        message="the bystanders, after the callbacks",
    )

    workflow.refresh_from_db()
    assert workflow.status == Workflow.State.FAILED
    assert workflow.finished_at is not None
    for role in ("on_failure", "on_finish"):
        callback = _callbacks(workflow)[role]
        assert (callback.status, callback.attempts) == (Status.FAILED, 1), role
        assert callback.last_error == GENERIC_FAILURE_MESSAGE
        [detail] = callback.error_details
        assert detail["exception"] == exception
        assert detail["transient"] is False
        assert SideEffect.objects.filter(key=role.replace("_", "-")).count() == 1  # run once
    assert worker.process.poll() is None
    assert_succeeded_once(bystanders)
    # The child that ran each is replaced, and says why; the supervisor never stopped.
    assert f'reason="the task raised {exception}"' in worker.output


def test_a_callback_that_exits_after_a_successful_batch_fails_alone(start_worker):
    """A workflow's status is its members' outcome: an on_finish raising SystemExit after every
    member succeeded is a failed task of its own (the page lists it), the batch still succeeded."""
    workflow = jobs.batch(
        [wt.double.s(1)],
        on_success=wt.callback.s("on-success"),
        on_finish=wt.callback_raises.s("on-finish", "exit"),
    )
    worker = start_worker("--concurrency", "1")
    wait_for(_settled(workflow), timeout=60, message="the batch and its callbacks to finish")
    workflow.refresh_from_db()
    assert workflow.status == Workflow.State.SUCCEEDED
    callbacks = _callbacks(workflow)
    assert (callbacks["on_finish"].status, callbacks["on_finish"].attempts) == (Status.FAILED, 1)
    assert callbacks["on_finish"].error_details[0]["exception"] == "builtins.SystemExit"
    assert callbacks["on_success"].status == Status.SUCCEEDED
    assert SideEffect.objects.filter(key="on-finish").count() == 1
    assert worker.process.poll() is None
