"""Several real worker processes started together enqueue a due slot once."""

from datetime import timedelta

import pytest

from jobs.models import Task

pytestmark = pytest.mark.django_db(transaction=True)


WORKERS = 4


@pytest.mark.process
@pytest.mark.parametrize(
    ("task", "result"),
    [
        ("tests.testapp.tasks.add", 3),
        ("tests.testapp.django_tasks.nightly_total", 3),  # a Django @task, run by jobs
    ],
)
def test_several_worker_processes_started_together_enqueue_the_slot_once(
    worker_env, tmp_path, task, result
):
    """Four real ``runworker --burst`` processes, each running a maintenance round at start."""
    import subprocess
    import sys

    from django.utils import timezone

    from jobs.models import Schedule
    from tests.conftest import ROOT

    (tmp_path / "periodic_settings.py").write_text(
        "from tests.settings import *  # noqa: F403\n"
        f"JOBS_SCHEDULES = {{'hourly': {{'task': {task!r}, 'every': 3600, 'args': [1, 2]}}}}\n"
    )
    # The schedule has existed for a day and last ran long ago: its latest slot is due.
    day_ago = timezone.now() - timedelta(days=1)
    Schedule.objects.create(
        name="hourly",
        task=task,
        interval_seconds=3600,
        created_at=day_ago,
        last_run_at=day_ago,
    )
    env = {
        **worker_env,
        "DJANGO_SETTINGS_MODULE": "periodic_settings",
        "PYTHONPATH": f"{tmp_path}:{ROOT}",
    }
    workers = [
        subprocess.Popen(
            [sys.executable, "manage.py", "runworker", "--burst"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(WORKERS)
    ]
    outputs = [worker.communicate(timeout=60) for worker in workers]
    assert [worker.returncode for worker in workers] == [0] * WORKERS, outputs
    scheduled = Task.objects.filter(idempotency_key__startswith="periodic:hourly:")
    assert scheduled.count() == 1
    assert (scheduled.get().status, scheduled.get().result) == ("succeeded", result)
    assert scheduled.get().backend == ("default" if "django_tasks" in task else "")
    assert sum(err.count("periodic task enqueued") for _, err in outputs) == 1


@pytest.mark.process
def test_several_worker_processes_enqueue_a_schedule_added_in_the_admin_once(worker_env):
    """Four real ``runworker --burst`` processes, the schedule a row saved by the admin's form."""
    import subprocess
    import sys

    from django.test import Client
    from django.urls import reverse
    from django.utils import timezone

    from jobs.models import Schedule
    from tests.conftest import ROOT
    from tests.helpers import staff

    client = Client()
    client.force_login(staff("view_schedule", "add_schedule", username="operator"))
    form = {"name": "admin-hourly", "task": "tests.testapp.tasks.add", "cron": "",
            "interval_seconds": "3600", "time_zone": "UTC", "args": "[1, 2]", "kwargs": "{}",
            "queue": "", "priority": "", "enabled": "on"}  # fmt: skip
    assert client.post(reverse("admin:jobs_schedule_add"), form).status_code == 302
    # Added a day ago and run long ago: its latest slot is due.
    day_ago = timezone.now() - timedelta(days=1)
    Schedule.objects.filter(pk="admin-hourly").update(created_at=day_ago, last_run_at=day_ago)
    workers = [
        subprocess.Popen(
            [sys.executable, "manage.py", "runworker", "--burst"],
            cwd=ROOT,
            env=worker_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(WORKERS)
    ]
    outputs = [worker.communicate(timeout=60) for worker in workers]
    assert [worker.returncode for worker in workers] == [0] * WORKERS, outputs
    scheduled = Task.objects.filter(idempotency_key__startswith="periodic:admin-hourly:")
    assert scheduled.count() == 1
    assert (scheduled.get().status, scheduled.get().result) == ("succeeded", 3)
    assert sum(err.count("periodic task enqueued") for _, err in outputs) == 1
