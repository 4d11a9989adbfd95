"""``jobs_health`` exits 2 whenever it could not judge, never 1 (1 means "judged: unhealthy")."""

import json
import subprocess
import sys

import pytest
from django.core.management import call_command

from tests.conftest import ROOT

pytestmark = pytest.mark.django_db


def exit_code(*args) -> int:
    with pytest.raises(SystemExit) as exit_:
        call_command("jobs_health", *args)
    return exit_.value.code


def test_a_broken_setting_is_unknown_not_unhealthy(settings, capsys):
    settings.JOBS_HEALTH_FAILURE_WINDOW = "fifteen minutes"
    assert exit_code() == 2
    assert capsys.readouterr().out.startswith("UNKNOWN: check failed: ")


def test_unknown_as_json(settings, capsys):
    settings.JOBS_HEALTH_HEARTBEAT_SECONDS = float("nan")
    settings.JOBS_HEALTH_FAILURE_WINDOW = float("inf")
    assert exit_code("--json") == 2
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["status"] == "unknown"
    assert verdict["reason"].startswith("UNKNOWN: ")


def test_an_unreachable_database_is_unknown(worker_env):
    env = {**worker_env, "DATABASE_URL": "postgres://nobody@127.0.0.1:9/none?connect_timeout=2"}
    done = subprocess.run(
        [sys.executable, "manage.py", "jobs_health"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout.startswith("UNKNOWN: database unreachable: ")
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("HEALTH_MAX_WAIT_SECONDS", float("nan")),
        ("HEALTH_MAX_WAIT_SECONDS", float("inf")),
        ("HEALTH_MAX_FAILURE_RATE", 2),
        ("HEALTH_MAX_FAILURE_RATE", -1),
        ("HEALTH_HEARTBEAT_SECONDS", float("inf")),
        ("HEALTH_HEARTBEAT_SECONDS", -5),
        ("HEALTH_FAILURE_MIN_TASKS", -1),
        ("HEALTH_FAILURE_WINDOW", 10**30),
    ],
)
def test_broken_health_settings_are_unknown(settings, capsys, name, value):
    """Today "no worker heartbeat in infs" and exit 1: a verdict on thresholds that cannot judge."""
    setattr(settings, f"JOBS_{name}", value)
    assert exit_code() == 2
    line = capsys.readouterr().out
    assert line.startswith("UNKNOWN: check failed: ")
    assert f"JOBS_{name}" in line


def test_the_health_endpoint_answers_unknown_on_broken_settings(settings, client):
    settings.JOBS_HEALTH_HEARTBEAT_SECONDS = float("inf")
    response = client.get("/jobs/ops/health")
    assert response.status_code == 503
    assert response.json()["status"] == "unknown"
