"""jobs in projects other than the demo: without the admin, sessions or messages, and misused.

Each test runs a minimal project (tests/projects/) in real processes, as a user's would: its own
settings module, ``manage.py check``, ``migrate``, an enqueue, ``runworker --burst``. The
database is the run's: a fresh SQLite file in a temporary directory on SQLite, the test database
on PostgreSQL (where the test is transactional, so what the processes wrote is flushed after).
"""

import json
import subprocess
import sys

import pytest
from django.db import connection

from tests.conftest import ROOT, database_url_for_tests

# Transactional, so pytest-django orders these among the tests that share committed data with
# processes (and flushes what the processes wrote on PostgreSQL).
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def project(tmp_path, worker_env):
    """Run ``manage.py`` commands and scenario steps of a minimal project in subprocesses."""
    if connection.vendor == "sqlite":
        database_url = f"sqlite:///{tmp_path / 'project.sqlite3'}"
    else:
        database_url = database_url_for_tests()

    def run(settings, *command, env=None, timeout=120):
        program = (
            ["manage.py", *command]
            if command[0] != "scenario"
            else ["-m", "tests.projects.scenario", *command[1:]]
        )
        return subprocess.run(
            [sys.executable, *program],
            cwd=ROOT,
            env={
                **worker_env,
                "DJANGO_SETTINGS_MODULE": f"tests.projects.{settings}",
                "DATABASE_URL": database_url,
                **(env or {}),
            },
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return run


def succeeded(completed) -> str:
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed.stdout


@pytest.mark.parametrize("settings", ["bare_settings", "no_admin_settings"])
def test_a_project_without_the_admin_checks_migrates_enqueues_and_runs(project, settings):
    assert "no issues" in succeeded(project(settings, "check"))
    succeeded(project(settings, "migrate", "--noinput"))
    ids = json.loads(succeeded(project(settings, "scenario", "enqueue")))

    succeeded(project(settings, "runworker", "--burst"))

    outcome = json.loads(
        succeeded(project(settings, "scenario", "outcome", ids["ours"], ids["django"]))
    )
    assert outcome["ours"] == ["succeeded", 5]
    assert outcome["django"] == ["SUCCESSFUL", 42]
    # Without a login nobody sees a task; without sessions there is no login at all, and the
    # views answer as to any anonymous visitor instead of failing on a missing request.user.
    assert outcome["status_view"] == [404, {"error": "No such task."}]
    assert outcome["action_view"] == [404, {"error": "No such task."}]
    assert outcome["health"] in (200, 503)


def test_the_task_backend_without_jobs_installed_is_a_check_error(project):
    completed = project("no_jobs_settings", "check")
    assert completed.returncode == 1
    assert "RuntimeError" not in completed.stderr
    assert "(jobs.E005)" in completed.stderr
    assert '"jobs" is not in INSTALLED_APPS' in completed.stderr


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        ("cron", "(jobs.E201) Schedule 'nightly': cron '61 * * * *' is not valid"),
        ("pruning", "(jobs.E101) JOBS_PRUNE_AFTER has 'running'"),
        ("health", "(jobs.E302) JOBS_HEALTH_MAX_FAILURE_RATE must be a fraction from 0 to 1"),
    ],
)
def test_runworker_refuses_to_start_with_a_broken_jobs_setting(project, wrong, message):
    succeeded(project("bare_settings", "migrate", "--noinput"))
    completed = project(
        "misconfigured_settings", "runworker", "--burst", env={"JOBS_TEST_MISCONFIGURED": wrong}
    )
    assert completed.returncode != 0
    assert "SystemCheckError" in completed.stderr
    assert message in completed.stderr
    assert "worker started" not in completed.stdout + completed.stderr


def test_a_project_without_auth_is_told_what_jobs_needs(project):
    completed = project("no_auth_settings", "check")
    assert completed.returncode == 1
    assert "(jobs.E006) jobs needs django.contrib.auth and django.contrib.contenttypes" in (
        completed.stderr
    )
