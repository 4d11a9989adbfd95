import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from jobs.management.commands.jobs_stats import age
from tests.factories import TaskFactory, WorkerFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def queues():
    now = timezone.now()
    TaskFactory.create_batch(3, queue="emails", run_after=now - timedelta(minutes=12))
    TaskFactory(running=True, queue="emails")
    recent = now - timedelta(minutes=5)
    TaskFactory.create_batch(3, succeeded=True, queue="emails", finished_at=recent)
    TaskFactory(failed=True, queue="emails", finished_at=recent)
    TaskFactory(succeeded=True, queue="imports", finished_at=recent)
    TaskFactory(succeeded=True, queue="imports", finished_at=now - timedelta(seconds=10))
    WorkerFactory(queues=["emails"])
    WorkerFactory(queues=[])  # serves every queue
    WorkerFactory(queues=["imports"], silent=True)


def stats_json():
    from io import StringIO

    out = StringIO()
    call_command("jobs_stats", "--json", stdout=out)
    return json.loads(out.getvalue())


def test_json_has_every_number_per_queue(queues):
    document = stats_json()
    assert document["live_workers"] == 2
    emails, imports = document["queues"]
    assert emails["queue"] == "emails"
    assert emails["counts"]["pending"] == 3
    assert emails["counts"]["running"] == 1
    assert emails["counts"]["succeeded"] == 3
    assert emails["oldest_waiting_seconds"] == pytest.approx(720, abs=5)
    assert emails["failure_rate"] == 0.25
    # Over the last 59 whole minutes and the current one as far as it has gone.
    # The JSON rounds to three places: 4/59 = 0.0678 is printed as 0.068.
    assert round(4 / 60, 3) <= emails["throughput_per_minute"] <= round(4 / 59, 3)
    assert (emails["finished_last_minute"], imports["finished_last_minute"]) == (0, 1)
    assert emails["live_workers"] == 2
    assert (imports["queue"], imports["live_workers"], imports["failure_rate"]) == ("imports", 1, 0)
    assert imports["oldest_waiting_seconds"] is None


def test_table_has_a_row_per_queue(queues, capsys):
    call_command("jobs_stats")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "queue",
        "pending",
        "running",
        "succeeded",
        "failed",
        "retrying",
        "cancelled",
        "blocked",
        "oldest_wait",
        "last_min",
        "per_min",
        "failure_rate",
        "workers",
    ]
    emails = ["emails", "3", "1", "3", "1", "0", "0", "0", "12m", "0", "0.1", "25.0%", "2"]
    imports = ["imports", "0", "0", "2", "0", "0", "0", "0", "-", "1", "0.0", "0.0%", "1"]
    assert (lines[1].split(), lines[2].split()) == (emails, imports)
    assert lines[3].startswith("2 live workers")


def test_an_empty_table_says_so(capsys):
    call_command("jobs_stats")
    assert "(no tasks)" in capsys.readouterr().out


def test_ages_read_like_a_person_would_say_them():
    assert [age(None), age(45), age(720), age(3 * 3600), age(2 * 86400)] == [
        "-",
        "45s",
        "12m",
        "3h",
        "2d",
    ]
