"""Two connections recording the last two members of a batch at once (PostgreSQL: concurrent
writers): the callback is released exactly once, whatever the interleaving."""

import threading

import pytest
from django.db import connection
from django.utils import timezone

import jobs
from jobs import transitions
from jobs.models import Task, Workflow
from jobs.states import Status
from jobs.workflows import settling
from tests.helpers import claim
from tests.testapp import workflow_tasks as wt

pytestmark = pytest.mark.django_db(transaction=True)


def _batch_with_both_members_running():
    workflow = jobs.batch(
        [wt.double.s(1), wt.double.s(2)],
        on_success=wt.callback.si("x", "success"),
        on_finish=wt.callback.si("x", "finish"),
    )
    running = claim("racer", 2, lease_seconds=60)
    assert len(running) == 2
    now = timezone.now()
    successes = [transitions.Success(t.pk, t.attempts, t.worker_id, 2, now) for t in running]
    return workflow, successes


def _in_thread(name, work, errors):
    def run():
        try:
            work()
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run, name=name)
    thread.start()
    return thread


def _released(workflow):
    return dict(
        Task.objects.filter(workflow=workflow)
        .exclude(workflow_role="member")
        .values_list("workflow_role", "status")
    )


def test_each_sees_the_other_unfinished_in_its_snapshot_yet_one_releases(
    postgres_only, monkeypatch
):
    """The interleaving that loses a callback without the workflow's lock: the second outcome
    has written its row but not committed when the first reads the members."""
    workflow, (first, second) = _batch_with_both_members_running()
    written, go = threading.Event(), threading.Event()
    original = settling.settle

    def settle(rows, *, now):
        if threading.current_thread().name == "second":
            written.set()  # its member's row is written, not committed
            assert go.wait(20)
        return original(rows, now=now)

    monkeypatch.setattr(settling, "settle", settle)
    errors: list = []
    thread = _in_thread("second", lambda: transitions.succeed_many([second]), errors)
    assert written.wait(20)
    transitions.succeed_many([first])  # commits, seeing the second member still running
    assert _released(workflow) == {"on_success": Status.BLOCKED, "on_finish": Status.BLOCKED}
    go.set()
    thread.join(30)
    assert not errors, errors
    assert _released(workflow) == {"on_success": Status.PENDING, "on_finish": Status.PENDING}
    workflow.refresh_from_db()
    assert workflow.status == Workflow.State.SUCCEEDED


def test_outcomes_recorded_at_the_same_moment_release_each_callback_once(postgres_only):
    for _ in range(10):
        workflow, successes = _batch_with_both_members_running()
        barrier = threading.Barrier(2)
        errors: list = []

        def record(success, barrier=barrier):
            barrier.wait(10)
            transitions.succeed_many([success])

        threads = [
            _in_thread(f"r{n}", lambda s=s: record(s), errors) for n, s in enumerate(successes)
        ]
        for thread in threads:
            thread.join(30)
        assert not errors, errors
        assert _released(workflow) == {"on_success": Status.PENDING, "on_finish": Status.PENDING}
        Task.objects.filter(workflow=workflow).delete()
