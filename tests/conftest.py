import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


def database_url_for_tests() -> str:
    """The URL of the test database, for processes started by a test."""
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings['NAME']}"
    user = settings.get("USER") or ""
    host = settings.get("HOST") or "127.0.0.1"
    port = settings.get("PORT") or 5432
    return f"postgres://{user}@{host}:{port}/{settings['NAME']}"


@pytest.fixture
def worker_env():
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="tests.settings",
        DATABASE_URL=database_url_for_tests(),
        PYTHONUNBUFFERED="1",
    )
    return env


@pytest.fixture
def runworker(worker_env):
    """Run ``manage.py runworker`` in a real process and return its completed result."""

    def run(*args, timeout=60, env=None):
        return subprocess.run(
            [sys.executable, "manage.py", "runworker", *args],
            cwd=ROOT,
            env={**worker_env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return run


@pytest.fixture
def postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL behaviour; the suite's PostgreSQL run covers it")
