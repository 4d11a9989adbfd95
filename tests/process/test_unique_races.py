"""Real processes enqueue one unique key at the same moment: one task results, in every scope."""

import json
import subprocess
import sys
import time

import pytest

from jobs.models import Task, UniqueHold
from tests.conftest import ROOT

pytestmark = pytest.mark.django_db(transaction=True)

PROCESSES = 6


@pytest.mark.parametrize(
    "options",
    [
        {"unique_key": "race", "unique_while": "waiting"},
        {"unique_key": "race", "unique_while": "active", "on_duplicate": "replace"},
        {"unique_key": "race", "unique_for": 60},
        {"unique_key": "race", "unique_for": 60, "on_duplicate": "replace"},
    ],
)
def test_processes_enqueueing_one_key_at_once_make_one_task(worker_env, tmp_path, options):
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.process.unique_racer", str(tmp_path), str(number),
             json.dumps(options)],
            cwd=ROOT, env=worker_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for number in range(PROCESSES)
    ]  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("ready-*"))) < PROCESSES:
            assert time.monotonic() < deadline, "the racers did not start"
            assert all(child.poll() is None for child in children), "a racer died"
            time.sleep(0.01)
        (tmp_path / "go").touch()
        outputs = [child.communicate(timeout=60) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.communicate()
    for child, (_, err) in zip(children, outputs, strict=True):
        assert child.returncode == 0, err
    lines = [line.split() for out, _ in outputs for line in out.splitlines()]
    assert len(lines) == PROCESSES * 5
    (task,) = Task.objects.all()
    assert {task_id for task_id, _ in lines} == {str(task.pk)}
    assert [created for _, created in lines].count("True") == 1
    if "unique_for" in options:
        assert UniqueHold.objects.get().task_id == task.pk
    if options.get("on_duplicate") == "replace":
        assert task.args[1] == 4  # a last round's arguments: every duplicate replaced them
