import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from jobs import checks
from jobs.maintenance import pausing
from jobs.web import health
from tests.factories import TaskFactory, UserFactory, WorkerFactory
from tests.helpers import staff

pytestmark = pytest.mark.django_db

LIMITS = health.Thresholds(
    max_wait=600, max_failure_rate=0.5, window=900, min_tasks=4, heartbeat=120
)


@pytest.fixture
def now():
    return timezone.now()


@pytest.fixture
def worker(now):
    return WorkerFactory(last_heartbeat_at=now - timedelta(seconds=10))


def waiting_since(seconds, now, queue="default"):
    return TaskFactory(queue=queue, run_after=now - timedelta(seconds=seconds))


def finished(status, n, now, queue="default"):
    return TaskFactory.create_batch(
        n,
        **{status: True},
        queue=queue,
        started_at=now - timedelta(seconds=70),
        finished_at=now - timedelta(seconds=60),
    )


def test_healthy_when_everything_is_within_limits(worker, now):
    waiting_since(599, now)
    finished("succeeded", 2, now)
    finished("failed", 2, now)  # 50%: at the limit, not above it
    verdict = health.check(LIMITS, now=now)
    assert verdict.ok
    assert verdict.reason == "OK: 1 queues within limits, last heartbeat 10s ago"


def test_a_task_waiting_too_long_trips(worker, now):
    waiting_since(601, now, queue="emails")
    waiting_since(30, now)
    # A task delayed into the future is not waiting, however long ago it was enqueued.
    TaskFactory(run_after=now + timedelta(hours=1), created_at=now - timedelta(days=1))
    verdict = health.check(LIMITS, now=now)
    assert [(p.check, p.queue) for p in verdict.problems] == [("waiting", "emails")]
    assert verdict.reason == (
        "UNHEALTHY: queue emails: oldest waiting task has waited 601s (limit 600s)"
    )


def test_a_failure_rate_above_the_limit_trips(worker, now):
    finished("succeeded", 1, now, queue="imports")
    finished("failed", 3, now, queue="imports")
    verdict = health.check(LIMITS, now=now)
    assert [(p.check, p.queue) for p in verdict.problems] == [("failures", "imports")]
    assert "queue imports: 75% of 4 tasks failed in the last 900s (limit 50%)" in verdict.reason


def test_few_failures_or_old_ones_do_not_trip(worker, now):
    finished("failed", 3, now)  # 100%, but fewer than min_tasks
    old = now - timedelta(hours=2)
    TaskFactory.create_batch(5, failed=True, started_at=old, finished_at=old)  # outside window
    assert health.check(LIMITS, now=now).ok


def test_no_recent_heartbeat_trips(now):
    WorkerFactory(last_heartbeat_at=now - timedelta(seconds=121))
    WorkerFactory(stopped=True)  # stopped workers beat no more, and do not count
    verdict = health.check(LIMITS, now=now)
    assert [p.check for p in verdict.problems] == ["workers"]
    assert verdict.reason == "UNHEALTHY: no worker heartbeat in 120s (last heartbeat 121s ago)"


def test_no_worker_at_all_trips(now):
    verdict = health.check(LIMITS, now=now)
    assert verdict.reason == "UNHEALTHY: no worker heartbeat in 120s (no worker is running)"


def test_only_the_queues_asked_for_are_judged(worker, now):
    waiting_since(9999, now, queue="emails")
    assert health.check(LIMITS, now=now, queues=["default"]).ok
    assert not health.check(LIMITS, now=now, queues=["emails"]).ok


def test_settings_give_the_default_limits(settings, worker, now):
    waiting_since(100, now)
    assert health.check(now=now).ok
    settings.JOBS_HEALTH_MAX_WAIT_SECONDS = 60
    assert not health.check(now=now).ok


# The command -----------------------------------------------------------------------------------


def test_command_exits_0_with_one_line_when_healthy(worker, capsys):
    call_command("jobs_health")
    out = capsys.readouterr().out
    assert out.startswith("OK: ")
    assert out.count("\n") == 1


def test_command_exits_1_with_the_reason_when_unhealthy(worker, capsys):
    waiting_since(120, timezone.now())
    with pytest.raises(SystemExit) as exit_:
        call_command("jobs_health", "--max-wait", "60")
    assert exit_.value.code == 1
    out = capsys.readouterr().out
    assert out.startswith("UNHEALTHY: queue default: oldest waiting task has waited")
    assert out.count("\n") == 1


def test_command_json(capsys):
    with pytest.raises(SystemExit):
        call_command("jobs_health", "--json")
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["status"] == "unhealthy"
    assert verdict["problems"][0]["check"] == "workers"


def test_command_refuses_a_negative_threshold():
    from django.core.management import CommandError

    with pytest.raises(CommandError, match="must be at least 0"):
        call_command("jobs_health", "--max-wait", "-5")


# The endpoint ----------------------------------------------------------------------------------


def test_endpoint_says_200_when_healthy(client, worker):
    response = client.get("/jobs/ops/health")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


def test_endpoint_says_503_with_the_same_reason_to_readers_of_tasks_when_not(client, now):
    waiting_since(4000, now)
    client.force_login(staff("view_task"))
    response = client.get("/jobs/ops/health")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unhealthy"
    assert body["reason"] == health.check().reason
    assert {p["check"] for p in body["problems"]} == {"waiting", "workers"}


def test_anonymous_probes_get_the_status_but_not_the_reasons(client, now):
    waiting_since(4000, now)
    response = client.get("/jobs/ops/health")
    assert response.status_code == 503
    assert response.json() == {"status": "unhealthy"}


def test_staff_without_the_view_permission_get_no_reasons(client, now):
    waiting_since(4000, now)
    client.force_login(staff())
    response = client.get("/jobs/ops/health")
    assert response.status_code == 503
    assert response.json() == {"status": "unhealthy"}


def test_the_metrics_token_also_shows_the_reasons(client, settings, now):
    settings.JOBS_METRICS_TOKEN = "a-long-enough-secret-token-for-tests"
    waiting_since(4000, now)
    response = client.get(
        "/jobs/ops/health", headers={"Authorization": f"Bearer {settings.JOBS_METRICS_TOKEN}"}
    )
    assert response.status_code == 503
    assert "reason" in response.json()


def test_endpoint_needs_no_login_and_is_not_cached(client, worker):
    UserFactory()  # no one logged in
    response = client.get("/jobs/ops/health")
    assert response.status_code == 200
    assert "no-cache" in response["Cache-Control"]


def test_a_minimum_of_zero_tasks_with_nothing_finished_does_not_trip(worker, now):
    assert health.check(health.Thresholds(min_tasks=0), now=now).ok


def test_a_probe_may_send_head(client, worker):
    assert client.head("/jobs/ops/health").status_code == 200


@pytest.mark.parametrize(
    ("name", "value", "error"),
    [
        ("JOBS_HEALTH_MAX_WAIT_SECONDS", 0, "jobs.E301"),
        ("JOBS_HEALTH_HEARTBEAT_SECONDS", "2m", "jobs.E301"),
        ("JOBS_HEALTH_MAX_FAILURE_RATE", 50, "jobs.E302"),
        ("JOBS_HEALTH_FAILURE_MIN_TASKS", -1, "jobs.E303"),
        ("JOBS_METRICS_TOKEN", "short", "jobs.E304"),
    ],
)
def test_nonsense_settings_are_reported_at_startup(settings, name, value, error):
    assert checks.check_health_settings(None) == []
    setattr(settings, name, value)
    assert [e.id for e in checks.check_health_settings(None)] == [error]


# Severity and paused queues (the dashboard's banner reads this verdict) ------------------------


def test_problems_come_worst_first_with_what_to_do(now):
    WorkerFactory(last_heartbeat_at=now - timedelta(seconds=185))
    waiting_since(700, now, queue="emails")
    waiting_since(4000, now, queue="imports")
    finished("failed", 5, now, queue="reports")
    verdict = health.check(LIMITS, now=now)
    # No worker first (nothing runs at all), then the longest wait, then failures.
    assert [(p.check, p.queue) for p in verdict.problems] == [
        ("workers", None),
        ("waiting", "imports"),
        ("waiting", "emails"),
        ("failures", "reports"),
    ]
    worst = verdict.problems[0]
    assert (worst.headline, worst.advice) == (
        "No worker has sent a heartbeat for 3 min 5 s",
        "start one with manage.py runworker",
    )
    assert verdict.problems[1].headline == (
        "Queue imports: the oldest waiting task has waited 1 h 6 min (limit 10 min)"
    )
    assert verdict.problems[1].advice == (
        "start more workers, or one that serves it (manage.py runworker --queues imports)"
    )
    assert verdict.problems[3].advice == "read their errors on the Errors page"
    assert verdict.reason.startswith("UNHEALTHY: no worker heartbeat in 120s")


def test_no_worker_ever_is_said_so(now):
    (problem,) = health.check(LIMITS, now=now).problems
    assert problem.headline == "No worker is running: nothing is being run"


def test_a_paused_queue_is_named_not_judged(worker, now):
    ops = UserFactory(username="ops")
    waiting_since(9999, now, queue="emails")  # waits because it is paused: no problem
    pausing.pause("emails", user=ops, now=now - timedelta(hours=1))
    verdict = health.check(LIMITS, now=now)
    assert verdict.ok
    assert [(p.queue, p.paused_by) for p in verdict.paused] == [("emails", "ops")]
    assert verdict.reason == (
        "OK: 1 queues within limits, last heartbeat 10s ago; queue emails paused"
    )
    body = verdict.as_dict()
    assert body["status"] == "ok"
    assert body["paused"][0]["queue"] == "emails"
    assert body["paused"][0]["paused_at"] == (now - timedelta(hours=1)).isoformat()


def test_a_paused_queue_still_shows_among_problems_of_others(worker, now):
    waiting_since(9999, now, queue="emails")
    waiting_since(9999, now, queue="default")
    pausing.pause("emails")
    verdict = health.check(LIMITS, now=now)
    assert [p.queue for p in verdict.problems] == ["default"]
    assert verdict.reason.endswith("; queue emails paused")
    # Judging some queues names only their pauses.
    assert health.check(LIMITS, now=now, queues=["default"]).paused == []


def test_the_endpoint_and_the_command_say_a_queue_is_paused(client, worker, capsys):
    pausing.pause("emails")
    client.force_login(staff("view_task"))
    response = client.get("/jobs/ops/health")
    assert response.status_code == 200  # paused on purpose: healthy
    assert [pause["queue"] for pause in response.json()["paused"]] == ["emails"]
    call_command("jobs_health")
    assert capsys.readouterr().out.rstrip().endswith("; queue emails paused")
