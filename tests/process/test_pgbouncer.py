"""jobs through a real PgBouncer in transaction pooling mode, as most production PostgreSQL is
reached: enqueue, claims, outcomes and the admin in processes whose DATABASE_URL goes through
the pooler; LISTEN over a direct connection when one is named, polling (said at start) when not;
and the pooler restarting under a running worker with nothing lost.

The test itself reads and writes the database over its direct connection, so what it checks is
what PostgreSQL holds, not what the pooler says.
"""

import json
import subprocess
import sys
from urllib.parse import urlsplit

import pytest
from django.db import connection

from jobs.models import Task
from jobs.states import Status
from tests.conftest import ROOT, WORKER_APP_NAME, database_url_for_tests, wait_for
from tests.factories import TaskFactory
from tests.pgbouncer import PgBouncer
from tests.testapp import tasks
from tests.testapp.models import SideEffect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]

TERMINAL = {Status.SUCCEEDED, Status.FAILED, Status.CANCELLED}


@pytest.fixture(autouse=True)
def _postgres(postgres_only):
    pass


@pytest.fixture
def pgbouncer():
    direct = urlsplit(database_url_for_tests())
    bouncer = PgBouncer(host=direct.hostname, port=direct.port or 5432, user=direct.username)
    bouncer.start()
    yield bouncer
    # Before the test database is flushed or dropped: the pooler's server connections would
    # keep it busy.
    bouncer.remove()


@pytest.fixture
def pooled_env(worker_env, pgbouncer):
    """The environment of a process that reaches the test database through PgBouncer only."""
    name = connection.settings_dict["NAME"]
    return {
        **worker_env,
        "DATABASE_URL": pgbouncer.url(name, application_name=WORKER_APP_NAME),
        "JOBS_TEST_THROUGH_POOLER": "1",
    }


def run_step(env, step: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-m", "tests.process.through_pooler", step],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def all_finished(ids) -> bool:
    return Task.objects.filter(pk__in=ids).exclude(status__in=TERMINAL).count() == 0


def test_enqueue_claims_and_outcomes_through_pgbouncer(start_worker, pooled_env):
    worker = start_worker("--concurrency", "3", env=pooled_env)
    made = run_step(pooled_env, "enqueue")
    ids = [
        *made["adds"],
        *made["many"],
        *made["keyed"],
        *made["unique"],
        made["permanent"],
        made["retried"],
        made["committed"],
    ]
    wait_for(lambda: all_finished(ids), timeout=90, interval=0.2, message="every task to end")

    assert made["keyed"][0] == made["keyed"][1]  # the idempotency key held through the pooler
    assert made["unique"][0] == made["unique"][1]
    assert not Task.objects.filter(pk=made["rolled_back"]).exists()
    results = dict(Task.objects.filter(pk__in=made["adds"]).values_list("pk", "result"))
    assert [results[Task._meta.pk.to_python(i)] for i in made["adds"]] == [i + i for i in range(20)]
    assert set(Task.objects.filter(pk__in=made["many"]).values_list("status", flat=True)) == {
        Status.SUCCEEDED
    }
    permanent = Task.objects.get(pk=made["permanent"])
    assert (permanent.status, permanent.attempts) == (Status.FAILED, 1)
    assert permanent.last_error == "Unsupported file format: please upload a CSV"
    retried = Task.objects.get(pk=made["retried"])
    assert (retried.status, retried.attempts) == (Status.SUCCEEDED, 2)
    assert SideEffect.objects.filter(key="pooled-retry").count() == 2
    assert not Task.objects.running().exists()
    assert worker.process.poll() is None, worker.output


def test_without_a_direct_connection_the_worker_polls_and_says_why(start_worker, pooled_env):
    # Session rescue asked for: the worker says why the pooler leaves it off.
    worker = start_worker("--poll-interval", "0.2", env={**pooled_env, "JOBS_SESSION_RESCUE": "1"})
    wait_for(lambda: "worker started" in worker.output, message="worker start")
    assert "listen off, polling instead" in worker.output
    assert "listen=False" in worker.output
    assert "JOBS_LISTEN_DATABASE" in worker.output
    # Nor a session lock: through transaction pooling it would be a pooled server's.
    assert "session rescue off" in worker.output
    assert "not_proven_to_keep_their_session" in worker.output
    assert "session_rescue=False" in worker.output
    task = tasks.add.enqueue(1, 2).record
    wait_for(
        lambda: Task.objects.filter(pk=task.pk, status=Status.SUCCEEDED).exists(),
        timeout=30,
        message="the task to run by polling",
    )


def test_listen_over_the_direct_connection_wakes_the_worker_at_once(start_worker, pooled_env):
    env = {**pooled_env, "JOBS_TEST_DIRECT_DATABASE_URL": database_url_for_tests()}
    worker = start_worker("--poll-interval", "30", env={**env, "JOBS_SESSION_RESCUE": "1"})
    wait_for(lambda: "worker started" in worker.output, message="worker start")
    assert "listen=True" in worker.output, worker.output
    assert "listen off" not in worker.output
    assert "session rescue off" in worker.output  # the task table's connections are pooled
    assert "JOBS_LISTEN_DATABASE_is_set" in worker.output
    latencies = []
    for i in range(5):
        task = tasks.add.enqueue(i, i).record
        wait_for(
            lambda task=task: Task.objects.filter(pk=task.pk, status=Status.SUCCEEDED).exists(),
            timeout=10,
            interval=0.01,
            message="the task to run",
        )
        task.refresh_from_db()
        latencies.append((task.started_at - task.created_at).total_seconds())
    assert max(latencies) < 2.0, latencies  # a poll would take up to 30 s


def test_the_admin_through_pgbouncer(pooled_env):
    failed = TaskFactory(failed=True, name="tests.testapp.tasks.bad_file", payload={})
    seen = run_step(pooled_env, "admin")
    assert seen["pages"] == {
        "list": 200,
        "failed list": 200,
        "task page": 200,
        "dashboard": 200,
        "errors": 200,
    }
    assert seen["retry"] == [200, str(failed.pk)]
    assert Task.objects.get(pk=failed.pk).status == Status.PENDING
    assert Task.objects.get(pk=seen["cancel"][1]).status == Status.CANCELLED
    assert any("requeued" in message for message in seen["messages"]), seen["messages"]
    assert any("cancelled" in message for message in seen["messages"]), seen["messages"]


def test_pgbouncer_restarting_under_a_running_worker_loses_nothing(
    start_worker, pooled_env, pgbouncer
):
    work = [tasks.write_and_pause.enqueue(f"k{i}").record.pk for i in range(60)]
    worker = start_worker("--concurrency", "2", env=pooled_env)
    wait_for(
        lambda: Task.objects.filter(pk__in=work, status=Status.SUCCEEDED).exists(),
        timeout=30,
        message="the drain to begin",
    )
    pgbouncer.restart(down_for=1.0)  # every connection of the worker's is cut at once
    wait_for(
        lambda: Task.objects.filter(pk__in=work, status=Status.SUCCEEDED).count() == len(work),
        timeout=120,
        interval=0.2,
        message="every task to succeed across the pooler's restart",
    )
    assert not Task.objects.running().exists()
    assert worker.process.poll() is None, worker.output  # still serving
    # write_and_pause writes one effect per run: a task run twice shows twice; at-least-once
    # allows a rerun of a task whose outcome was cut off, never a lost one.
    keys = set(SideEffect.objects.values_list("key", flat=True))
    assert keys == {f"k{i}" for i in range(60)}
