from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from jobs import transitions
from jobs.execution import executor
from jobs.metrics import counters, exporter
from jobs.models import Task
from tests import helpers
from tests.factories import TaskFactory, UserFactory, WorkerFactory
from tests.helpers import staff
from tests.testapp import tasks

pytestmark = pytest.mark.django_db


def scrape(now=None) -> dict:
    """Export, then read back with prometheus-client's own parser: {(name, labels): value}."""
    text = exporter.render(now=now).decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def types() -> dict:
    text = exporter.render().decode()
    return {family.name: family.type for family in text_string_to_metric_families(text)}


def test_every_metric_is_declared_with_its_type():
    TaskFactory(succeeded=True)  # the histograms' count and sum appear once they have data
    assert types() == {
        "jobs_tasks": "gauge",
        "jobs_oldest_waiting_seconds": "gauge",
        "jobs_task_run_seconds": "histogram",
        "jobs_task_run_seconds_gcount": "gauge",
        "jobs_task_run_seconds_gsum": "gauge",
        "jobs_task_wait_seconds": "histogram",
        "jobs_task_wait_seconds_gcount": "gauge",
        "jobs_task_wait_seconds_gsum": "gauge",
        "jobs_task_retries": "counter",
        "jobs_task_failures": "counter",
        "jobs_task_rescues": "counter",
        "jobs_live_workers": "gauge",
        "jobs_queue_paused": "gauge",
        "jobs_task_type_paused": "gauge",
    }


def test_tasks_by_queue_and_status_and_oldest_waiting_age():
    now = timezone.now()
    TaskFactory.create_batch(2, queue="emails", run_after=now - timedelta(seconds=90))
    TaskFactory(succeeded=True, queue="emails")
    TaskFactory(failed=True)
    samples = scrape(now)
    assert samples[("jobs_tasks", (("queue", "emails"), ("status", "pending")))] == 2
    assert samples[("jobs_tasks", (("queue", "emails"), ("status", "succeeded")))] == 1
    assert samples[("jobs_tasks", (("queue", "default"), ("status", "failed")))] == 1
    assert samples[("jobs_tasks", (("queue", "default"), ("status", "running")))] == 0
    assert samples[("jobs_oldest_waiting_seconds", (("queue", "emails"),))] == pytest.approx(90)
    assert samples[("jobs_oldest_waiting_seconds", (("queue", "default"),))] == 0


def test_run_and_wait_time_histograms_of_the_window():
    now = timezone.now()
    for run, wait in ((0.3, 2), (4, 20), (45, 400)):
        started = now - timedelta(minutes=5)
        TaskFactory(
            succeeded=True,
            run_after=started - timedelta(seconds=wait),
            started_at=started,
            finished_at=started + timedelta(seconds=run),
        )
    old = now - timedelta(days=2)
    TaskFactory(succeeded=True, started_at=old, finished_at=old + timedelta(seconds=1))
    samples = scrape(now)

    def bucket(name, le):
        return samples[(f"{name}_bucket", (("le", le), ("queue", "default")))]

    assert bucket("jobs_task_run_seconds", "0.5") == 1
    assert bucket("jobs_task_run_seconds", "5.0") == 2
    assert bucket("jobs_task_run_seconds", "60.0") == 3
    assert bucket("jobs_task_run_seconds", "+Inf") == 3
    assert samples[("jobs_task_run_seconds_gsum", (("queue", "default"),))] == pytest.approx(49.3)
    assert samples[("jobs_task_run_seconds_gcount", (("queue", "default"),))] == 3
    assert bucket("jobs_task_wait_seconds", "5.0") == 1
    assert bucket("jobs_task_wait_seconds", "30.0") == 2
    assert bucket("jobs_task_wait_seconds", "300.0") == 2
    assert bucket("jobs_task_wait_seconds", "900.0") == 3


@pytest.mark.django_db(transaction=True)
def test_retries_failures_and_rescues_are_counted_and_survive_pruning():
    from jobs.maintenance import pruning

    tasks.always_transient.using(max_attempts=2, queue="mail").enqueue()
    (task,) = helpers.claim("w", 1, lease_seconds=30)
    executor.run(task)  # retrying
    Task.objects.filter(pk=task.pk).update(run_after=timezone.now())
    (task,) = helpers.claim("w", 1, lease_seconds=30)
    executor.run(task)  # failed
    lost = TaskFactory(stale=True, queue="mail")
    transitions.rescue_expired()
    assert Task.objects.get(pk=lost.pk).status == "retrying"

    samples = scrape()
    assert samples[("jobs_task_retries_total", (("queue", "mail"),))] == 2
    assert samples[("jobs_task_failures_total", (("queue", "mail"),))] == 1
    assert samples[("jobs_task_rescues_total", (("queue", "mail"),))] == 1
    pruning.prune(now=timezone.now() + timedelta(days=365))
    assert not Task.objects.filter(status="failed").exists()
    assert scrape()[("jobs_task_failures_total", (("queue", "mail"),))] == 1


@pytest.mark.django_db(transaction=True)
def test_counters_add_up_from_several_increments():
    for _ in range(3):
        counters.increment(counters.FAILED, "q")
    counters.increment(counters.FAILED, "q", by=2)
    assert counters.totals()[counters.FAILED] == {"q": 5}


def test_live_workers_and_paused_queues():
    from jobs.maintenance import pausing

    WorkerFactory.create_batch(2)
    WorkerFactory(silent=True)
    WorkerFactory(stopped=True)
    pausing.pause("imports")
    pausing.pause_task_type("tests.testapp.tasks.add")
    samples = scrape()
    assert samples[("jobs_live_workers", ())] == 2
    assert samples[("jobs_queue_paused", (("queue", "imports"),))] == 1
    assert samples[("jobs_task_type_paused", (("name", "tests.testapp.tasks.add"),))] == 1


# Who may read them -----------------------------------------------------------------------------


def test_anonymous_visitors_get_401(client):
    response = client.get("/jobs/ops/metrics")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_a_logged_in_user_without_the_view_permission_gets_403(client):
    client.force_login(UserFactory())
    assert client.get("/jobs/ops/metrics").status_code == 403


def test_staff_without_the_view_permission_get_403(client):
    client.force_login(staff("retry_task", "cancel_task"))
    response = client.get("/jobs/ops/metrics")
    assert response.status_code == 403
    assert b"jobs.view_task" in response.content


def test_readers_of_tasks_read_them(client):
    TaskFactory()
    client.force_login(staff("view_task"))
    response = client.get("/jobs/ops/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    families = {f.name for f in text_string_to_metric_families(response.content.decode())}
    assert "jobs_tasks" in families


def test_a_scraper_with_the_bearer_token_reads_them(client, settings):
    settings.JOBS_METRICS_TOKEN = "s3cret-token-for-tests"
    ok = client.get("/jobs/ops/metrics", headers={"Authorization": "Bearer s3cret-token-for-tests"})
    assert ok.status_code == 200
    wrong = client.get(
        "/jobs/ops/metrics", headers={"Authorization": "Bearer s3cret-token-for-testX"}
    )
    assert wrong.status_code == 401
    basic = client.get(
        "/jobs/ops/metrics", headers={"Authorization": "Basic s3cret-token-for-tests"}
    )
    assert basic.status_code == 401


def test_no_token_configured_means_no_token_works(client, settings):
    settings.JOBS_METRICS_TOKEN = None
    response = client.get("/jobs/ops/metrics", headers={"Authorization": "Bearer None"})
    assert response.status_code == 401
