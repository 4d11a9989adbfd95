"""The log lines of a real task run parse back as key=value pairs."""

import logging

import pytest
from django.utils import timezone

from jobs.execution import executor
from jobs.logfmt import KeyValueFormatter, parse
from tests import helpers
from tests.testapp import tasks


def fmt(rec):
    return KeyValueFormatter().format(rec)


@pytest.mark.django_db
def test_lines_of_a_real_task_run_parse_back(caplog):
    caplog.set_level(logging.INFO, logger="jobs")
    tasks.add.enqueue(1, 2)
    tasks.bad_file.enqueue()
    for task in helpers.claim("w", 2, lease_seconds=30, now=timezone.now()):
        executor.run(task)
    lines = [parse(fmt(r)) for r in caplog.records if r.name.startswith("jobs")]
    finished = [f for f in lines if f["msg"] == "task finished"]
    assert {f["outcome"] for f in finished} == {"succeeded", "failed"}
    failed = next(f for f in finished if f["outcome"] == "failed")
    assert failed["error"] == "jobs.exceptions.PermanentError"
    assert failed["message"] == "got image/png"  # the exception, quoted as one value
    assert failed["level"] == "error"
