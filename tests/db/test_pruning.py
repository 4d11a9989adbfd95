import threading
from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from jobs import checks
from jobs.maintenance import pruning, rollups
from jobs.maintenance import rounds as maintenance
from jobs.models import MaintenanceLock, Task
from tests.factories import TaskFactory

pytestmark = pytest.mark.django_db

DAY = timedelta(days=1)


def finished(status, age, now):
    return TaskFactory(**{status: True}, finished_at=now - age)


@pytest.fixture
def now():
    return timezone.now()


@pytest.fixture
def aged(now):
    """Old and recent tasks of every status, by label."""
    return {
        "old_succeeded": finished("succeeded", 8 * DAY, now),
        "new_succeeded": finished("succeeded", 6 * DAY, now),
        "old_failed": finished("failed", 31 * DAY, now),
        "new_failed": finished("failed", 8 * DAY, now),
        "old_cancelled": finished("cancelled", 31 * DAY, now),
        # Unfinished tasks are never pruned, however old.
        "old_pending": TaskFactory(created_at=now - 90 * DAY),
        "old_retrying": TaskFactory(retrying=True, created_at=now - 90 * DAY),
        "old_running": TaskFactory(running=True, created_at=now - 90 * DAY),
    }


def remaining(aged):
    ids = set(Task.objects.values_list("pk", flat=True))
    return {label for label, task in aged.items() if task.pk in ids}


def test_prune_deletes_only_finished_tasks_past_their_status_retention(aged, now):
    report = pruning.prune(now=now)
    assert report.counts == {"succeeded": 1, "failed": 1, "cancelled": 1}
    assert remaining(aged) == {
        "new_succeeded",
        "new_failed",
        "old_pending",
        "old_retrying",
        "old_running",
    }


def test_dry_run_counts_and_deletes_nothing(aged, now):
    report = pruning.prune(now=now, dry_run=True)
    assert report.total == 3
    assert Task.objects.count() == len(aged)


def test_retention_is_configurable_per_status(settings, aged, now):
    settings.JOBS_PRUNE_AFTER = {"succeeded": timedelta(days=1), "failed": None}
    report = pruning.prune(now=now)
    # Cancelled keeps its default of 30 days; failed is kept for ever.
    assert report.counts == {"succeeded": 2, "cancelled": 1}
    assert {"old_failed", "new_failed"} <= remaining(aged)


def test_small_batches_delete_everything_due(now):
    for _ in range(7):
        finished("succeeded", 10 * DAY, now)
    keep = finished("succeeded", DAY, now)
    report = pruning.prune(now=now, batch_size=3)
    assert report.counts["succeeded"] == 7
    assert list(Task.objects.values_list("pk", flat=True)) == [keep.pk]


def test_a_batch_limit_stops_early_and_says_so(now):
    for _ in range(5):
        finished("succeeded", 10 * DAY, now)
    # A bounded pass (the maintenance round's) deletes only what the rollups counted.
    rollups.catch_up(now=now)
    report = pruning.prune(now=now, batch_size=2, max_batches=2)
    assert (report.total, report.complete) == (4, False)
    assert Task.objects.count() == 1


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"running": 10}, "only finished statuses"),
        ({"succeeded": "7d"}, "a finite number of seconds"),
        ({"failed": -1}, "above 0"),
    ],
)
def test_nonsense_retention_is_refused_before_anything_is_deleted(settings, value, message):
    settings.JOBS_PRUNE_AFTER = value
    with pytest.raises(ImproperlyConfigured, match=message):
        pruning.prune()
    errors = checks.check_prune_settings(None)
    assert [e.id for e in errors] == ["jobs.E101"]


def test_command_prunes_and_reports(aged, capsys):
    call_command("jobs_prune", "--keep", "succeeded=30")
    out = capsys.readouterr().out
    assert "pruned 2 tasks" in out
    assert "succeeded=0 failed=1 cancelled=1" in out
    assert {"old_succeeded", "new_succeeded"} <= remaining(aged)


def test_command_dry_run_changes_nothing(aged, capsys):
    call_command("jobs_prune", "--dry-run")
    assert "would prune 3 tasks" in capsys.readouterr().out
    assert Task.objects.count() == len(aged)


def test_command_refuses_a_bad_keep_option():
    from django.core.management import CommandError

    with pytest.raises(CommandError, match="STATUS=DAYS"):
        call_command("jobs_prune", "--keep", "succeeded")


# Automatic pruning ---------------------------------------------------------------------------


def test_automatic_pruning_is_off_by_default(aged, now):
    assert maintenance.run(now=now)["pruned"] == 0
    assert Task.objects.count() == len(aged)


def test_automatic_pruning_runs_once_per_interval(settings, aged, now):
    settings.JOBS_AUTO_PRUNE = True
    assert maintenance.run(now=now)["pruned"] == 3
    finished("succeeded", 9 * DAY, now)
    # Another worker a minute later: the pass is not due again yet.
    assert maintenance.run(now=now + timedelta(minutes=1))["pruned"] == 0
    assert maintenance.run(now=now + timedelta(hours=2))["pruned"] == 1


def test_an_unfinished_automatic_pass_carries_on_next_round(settings, now):
    settings.JOBS_AUTO_PRUNE = True
    settings.JOBS_PRUNE_BATCH_SIZE = 2
    settings.JOBS_PRUNE_MAX_BATCHES = 1
    for _ in range(5):
        finished("succeeded", 10 * DAY, now)
    rollups.catch_up(now=now)
    counts = [pruning.auto_prune("w", now=now + timedelta(seconds=5 * i)) for i in range(4)]
    assert counts == [2, 2, 1, 0]


def test_a_held_lease_keeps_other_workers_out(settings, aged, now):
    settings.JOBS_AUTO_PRUNE = True
    rollups.catch_up(now=now)
    assert pruning.acquire_lock("prune", "worker-a", now=now, hold_seconds=600)
    assert pruning.auto_prune("worker-b", now=now) == 0
    # Worker A died holding it: once the lease runs out, another worker takes over.
    assert pruning.auto_prune("worker-b", now=now + timedelta(minutes=11)) == 3


@pytest.mark.django_db(transaction=True)
def test_of_workers_racing_for_the_lease_exactly_one_gets_it(now):
    MaintenanceLock.objects.create(name="prune")
    barrier = threading.Barrier(4)
    won, errors = [], []

    def contend(i):
        try:
            barrier.wait(10)
            if pruning.acquire_lock("prune", f"worker-{i}", now=now, hold_seconds=60):
                won.append(i)
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert len(won) == 1
    assert MaintenanceLock.objects.get().holder == f"worker-{won[0]}"
