"""A real worker asked from the admin to stop after its current tasks: it claims nothing more,
finishes what it runs (its timeouts still enforced), and exits 0; a signal afterwards starts
the grace as it would on any worker."""

import signal

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from jobs.models import Task, Worker
from jobs.states import Status
from tests.conftest import wait_for
from tests.helpers import staff
from tests.testapp import tasks
from tests.testapp.models import SideEffect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]

# A heartbeat every half second (half of JOBS_CANCEL_GRACE): the request is seen soon.
FAST = {
    "JOBS_LEASE_SECONDS": "3",
    "JOBS_MAINTENANCE_INTERVAL": "0.3",
    "JOBS_CANCEL_GRACE": "1",
    "JOBS_LOG_LEVEL": "DEBUG",  # "task started" lines
}


def until_started(worker, task, timeout=30):
    line = f"task started name={task.name} id={task.pk}"
    wait_for(lambda: line in worker.output, timeout, message=f"{task.name} started")


def ask_to_stop_from_the_admin() -> list[str]:
    """Do what an operator does: tick the live worker and run the action."""
    client = Client()
    client.force_login(staff("view_worker", "stop_worker", username="operator"))
    (worker,) = Worker.objects.filter(stopped_at__isnull=True)
    data = {"action": "stop_after_current_tasks", "_selected_action": [worker.pk]}
    response = client.post(reverse("admin:jobs_worker_changelist"), data, follow=True)
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_a_worker_asked_from_the_admin_finishes_its_task_claims_no_more_and_exits_0(
    start_worker,
):
    first = tasks.sleep_then_effect.enqueue("first", 2).record
    worker = start_worker("--concurrency", "1", "--grace", "0.5", env=FAST)
    until_started(worker, first)
    second = tasks.sleep_then_effect.enqueue("second", 0).record
    assert ask_to_stop_from_the_admin() == ["1 worker asked to stop after current tasks"]
    # Past the grace of a SIGTERM (0.5 s): an operator's request has no deadline.
    assert worker.wait(timeout=30) == 0, worker.output
    assert "worker stopping after its current tasks" in worker.output
    first.refresh_from_db()
    assert (first.status, first.attempts) == (Status.SUCCEEDED, 1)
    # Claimed ahead or not, the second never ran: it waits for another worker.
    second.refresh_from_db()
    assert (second.status, second.attempts) == (Status.PENDING, 0)
    assert list(SideEffect.objects.values_list("key", flat=True)) == ["first"]
    row = Worker.objects.get()
    assert row.stopped_at is not None
    assert row.stop_requested_by.username == "operator"


def test_a_stopping_worker_still_stops_a_task_past_its_timeout(start_worker):
    hung = tasks.hang.enqueue().record  # timeout=1, one attempt
    worker = start_worker("--concurrency", "1", env=FAST)
    until_started(worker, hung)
    ask_to_stop_from_the_admin()
    assert worker.wait(timeout=30) == 0, worker.output
    hung.refresh_from_db()
    assert hung.status == Status.FAILED
    assert "TaskTimeout" in hung.error_details[-1]["exception"]


def test_sigterm_to_a_stopping_worker_starts_the_grace_and_hands_the_task_back(start_worker):
    long = tasks.slow_on_first_attempt.enqueue("long", 60).record
    worker = start_worker("--concurrency", "1", "--grace", "0.5", env=FAST)
    until_started(worker, long)
    ask_to_stop_from_the_admin()
    wait_for(lambda: "worker stopping after its current tasks" in worker.output, 15,
             message="the worker to read the request")  # fmt: skip
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0, worker.output
    assert "action=finish_running" in worker.output  # a first stop, not "stop now"
    long.refresh_from_db()
    assert (long.status, long.attempts) == (Status.PENDING, 0)  # handed back, no attempt spent
    assert not Task.objects.running().exists()
