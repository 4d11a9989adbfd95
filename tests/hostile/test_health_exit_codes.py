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
