"""Workflows with real worker processes (jobs.workflows): dependencies never start early, and a
batch's callback runs exactly once while workers are killed (SIGKILL to the whole process
group) during its last members."""

import signal
import time

import pytest

import jobs
from jobs.models import Task, TaskDependency, Workflow
from jobs.states import Status
from tests.conftest import wait_for
from tests.hostile.adversarial import GroupWorker
from tests.testapp import workflow_tasks as wt
from tests.testapp.models import SideEffect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]

CHAOS = {"JOBS_LEASE_SECONDS": "1", "JOBS_MAINTENANCE_INTERVAL": "0.3"}


def test_dependencies_never_start_before_what_they_wait_for_has_finished(start_worker):
    firsts = [wt.slow_mark.enqueue(f"first-{n}", 0.3) for n in range(4)]
    fan_in = wt.mark.using(depends_on=firsts).enqueue("fan-in")
    chained = jobs.chain(*(wt.add_one.s(0) if n == 0 else wt.add_one.s() for n in range(6)))
    for _ in range(2):
        start_worker("--concurrency", "4")

    def finished():
        return not Task.objects.exclude(status=Status.SUCCEEDED).exists()

    wait_for(finished, timeout=90, interval=0.2, message="every task to succeed")
    for edge in TaskDependency.objects.select_related("task", "depends_on"):
        assert edge.task.started_at >= edge.depends_on.finished_at, edge
    # What the bodies did, by their own clock: the fan-in ran after every first had written.
    written = dict(SideEffect.objects.values_list("key", "created_at"))
    assert written["fan-in:[]"] >= max(written[f"first-{n}"] for n in range(4))
    assert Task.objects.get(pk=fan_in.id).result == "fan-in"
    links = Task.objects.filter(workflow=chained).order_by("-result")
    assert links.first().result == 6  # each link got the previous one's result


def _group_worker(worker_env, tmp_path, number):
    return GroupWorker(
        ["--concurrency", "2"], {**worker_env, **CHAOS}, tmp_path / f"group-{number}.log"
    )


def test_a_batch_callback_runs_once_while_workers_are_killed_during_its_last_members(
    worker_env, tmp_path
):
    members = 24
    workflow = jobs.batch(
        # Attempts to spare: each kill costs the members it interrupts one.
        [wt.slow_mark.using(max_attempts=20).s(f"member-{n}", 0.4) for n in range(members)],
        on_success=wt.callback.s("on-success"),
        on_failure=wt.callback.s("on-failure"),
        on_finish=wt.callback.s("on-finish"),
    )
    workers = [_group_worker(worker_env, tmp_path, n) for n in range(3)]
    started = len(workers)
    kills = 0

    def unfinished():
        return Task.objects.filter(
            workflow=workflow, workflow_role="member", status__in=["pending", "retrying", "running"]
        ).count()

    def running_on(worker):
        return Task.objects.filter(
            workflow=workflow,
            workflow_role="member",  # never a callback: its release is what is tested
            status=Status.RUNNING,
            worker_id__contains=f":{worker.process.pid}:",
        ).exists()

    try:
        deadline = time.monotonic() + 120
        # Kill whole process groups (the supervisor and its children) while the batch's last
        # members run: a success a child reported and its supervisor had not written dies too.
        while kills < 4 and time.monotonic() < deadline:
            wait_for(lambda: unfinished() <= 8, timeout=90, message="the batch's last members")
            victims = [w for w in workers if running_on(w)]
            if not unfinished():
                break
            if not victims:
                time.sleep(0.05)
                continue
            victim = victims[0]
            victim.signal_group(signal.SIGKILL)
            victim.wait()
            victim.stop()  # its log closed; any child left of its group killed
            kills += 1
            workers[workers.index(victim)] = _group_worker(worker_env, tmp_path, started)
            started += 1
        assert kills >= 1, "no worker was killed during the batch's last members"

        def done():
            return Task.objects.filter(
                workflow=workflow, workflow_role="on_success", status=Status.SUCCEEDED
            ).exists()

        wait_for(done, timeout=180, interval=0.2, message="the on_success callback")
        wait_for(
            lambda: Task.objects.filter(
                workflow=workflow, workflow_role="on_finish", status=Status.SUCCEEDED
            ).exists(),
            timeout=60,
            message="the on_finish callback",
        )
    finally:
        for worker in workers:
            worker.stop()
    workflow.refresh_from_db()
    assert workflow.status == Workflow.State.SUCCEEDED
    assert SideEffect.objects.filter(key="on-success").count() == 1
    assert SideEffect.objects.filter(key="on-finish").count() == 1
    assert SideEffect.objects.filter(key="on-failure").count() == 0
    failure = Task.objects.get(workflow=workflow, workflow_role="on_failure")
    assert failure.status == Status.CANCELLED
    assert Task.objects.filter(workflow=workflow).count() == members + 3
    # Every member ran (at least once: a killed one ran again), and the kills hit members.
    keys = set(SideEffect.objects.filter(key__startswith="member-").values_list("key", flat=True))
    assert keys == {f"member-{n}" for n in range(members)}
