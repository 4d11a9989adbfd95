"""The benchmarks still run: each script, at a tiny size, against a database of its own.

Their figures are read by people, never checked here (the machines are shared and noisy); what
is checked is that a change to the package or the demo did not leave a benchmark unable to start.
"""

import contextlib
import sqlite3
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.process


def test_worker_benchmark_runs_at_a_tiny_size(tmp_path, worker_env):
    env = {key: value for key, value in worker_env.items() if key != "DJANGO_SETTINGS_MODULE"}
    env.pop("SECRET_KEY", None)  # the benchmark needs none of its own
    done = subprocess.run(
        [sys.executable, "benchmarks/workers.py", "--database", f"sqlite:///{tmp_path}/b.sqlite3",
         "--only", "enqueue,drain,pickup", "--runs", "1", "--enqueue-one", "20",
         "--enqueue-bulk", "200", "--drain", "200", "--pickup", "5"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    for measurement in ("enqueue in bulk", "drain 200 no-op tasks", "pickup latency p50"):
        assert measurement in done.stdout, done.stdout


def test_django_drain_benchmark_runs_and_stores_rows_as_the_backend_does(tmp_path, worker_env):
    env = {key: value for key, value in worker_env.items() if key != "DJANGO_SETTINGS_MODULE"}
    env.pop("SECRET_KEY", None)
    database = tmp_path / "d.sqlite3"
    done = subprocess.run(
        [sys.executable, "benchmarks/django_drain.py", "--database", f"sqlite:///{database}",
         "--runs", "1", "--tasks", "30", "--concurrency", "2"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    for measurement in ("Django's @task, 1 worker x 2", "worker CPU per task, Django's @task"):
        assert measurement in done.stdout, done.stdout
    # The last kind drained is Django's: its rows are due at their creation, as
    # jobs.backends.DatabaseBackend stores a task that is not deferred (not as deferred ones).
    # closing(): sqlite3's own context manager ends the transaction but leaves the connection
    # open (a ResourceWarning, an error in this suite, when Python 3.13 collects it).
    with contextlib.closing(sqlite3.connect(database)) as db:
        rows = db.execute("SELECT name, run_after = created_at, status FROM jobs_task").fetchall()
    assert len(rows) == 30
    assert set(rows) == {("benchmarks.tasks.django_noop", 1, "succeeded")}


def test_flow_control_benchmark_runs(tmp_path, worker_env):
    env = {key: value for key, value in worker_env.items() if key != "DJANGO_SETTINGS_MODULE"}
    env.pop("SECRET_KEY", None)
    done = subprocess.run(
        [sys.executable, "benchmarks/flow_control.py", "--database",
         f"sqlite:///{tmp_path / 'f.sqlite3'}", "--runs", "1", "--tasks", "30", "--keys", "3",
         "--concurrency", "2"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    for measurement in ("3 keys at limit 1, 1 worker x 2", "3 keys at limit 1 / no key"):
        assert measurement in done.stdout, done.stdout


def test_claim_cost_benchmark_runs_against_another_revision(worker_env, postgres_only):
    env = {key: value for key, value in worker_env.items() if key != "DJANGO_SETTINGS_MODULE"}
    env.pop("SECRET_KEY", None)
    url = worker_env["DATABASE_URL"].split("?")[0] + "_claim_cost"  # a database of its own
    done = subprocess.run(
        [sys.executable, "benchmarks/claim_cost.py", "--database", url, "--runs", "1",
         "--tasks", "40", "--keys", "4", "--limit", "10", "--against", "HEAD"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    # One task a key at limit 1; without a key, as many as asked for; both revisions alike.
    for name in ("this checkout", "HEAD"):
        assert f"4 keys, statistics lagging, {name}: claimed 4," in done.stdout, done.stdout
        assert f"no key, statistics fresh, {name}: claimed 10," in done.stdout, done.stdout


def test_fleet_benchmark_reports_the_lock_waits_it_saw(worker_env, postgres_only):
    env = {key: value for key, value in worker_env.items() if key != "DJANGO_SETTINGS_MODULE"}
    env.pop("SECRET_KEY", None)
    url = worker_env["DATABASE_URL"].split("?")[0] + "_fleet"  # a database of its own
    done = subprocess.run(
        [sys.executable, "benchmarks/fleet.py", "--database", url, "--sizes", "1",
         "--tasks", "40", "--trickle", "3"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "lock waits: claims, outcomes, others (samples)" in done.stdout, done.stdout
    assert "| workers | kind | lock | waiting statement | blocked by | waits |" in done.stdout


def test_result_check_benchmark_runs(worker_env):
    env = {key: value for key, value in worker_env.items() if key != "DJANGO_SETTINGS_MODULE"}
    env.pop("SECRET_KEY", None)
    done = subprocess.run(
        [sys.executable, "benchmarks/result_check.py", "--number", "100", "--runs", "1"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "check_result_size(None): " in done.stdout, done.stdout
