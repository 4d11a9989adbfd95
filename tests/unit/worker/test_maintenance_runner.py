"""The maintenance runner alone, no database: a round when one is due and not before, on a
clock, and a worker that outlives a failing round."""

import logging

import pytest
from django.db import OperationalError

from jobs.maintenance import locks
from jobs.maintenance import rounds as maintenance_rounds
from jobs.worker.maintenance_runner import MaintenanceRunner

INTERVAL = 5.0


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def rounds(monkeypatch, settings):
    """The worker ids of the rounds run (``maintenance_rounds.run`` standing for the duties)."""
    settings.JOBS_MAINTENANCE_INTERVAL = INTERVAL
    done = []
    monkeypatch.setattr(maintenance_rounds, "run", lambda *, worker_id: done.append(worker_id))
    # This worker leads unless a test says otherwise (the lease itself: tests/db/test_leader_lock).
    monkeypatch.setattr(locks, "hold_lock", lambda *args, **kwargs: leading[0])
    leading[:] = [True]
    return done


leading = [True]


def retry(operation, what, **options):
    assert what in ("maintenance", "maintenance leader")
    return operation()


def test_a_worker_that_does_not_lead_skips_the_round(rounds):
    clock = Clock()
    runner = MaintenanceRunner("host:1:abc", retry=retry, clock=clock)
    leading[0] = False
    runner.run_if_due()
    assert rounds == []
    clock.now += INTERVAL
    leading[0] = True  # the leader's lease lapsed: this worker took it
    runner.run_if_due()
    assert rounds == ["host:1:abc"]


def test_a_round_runs_when_due_and_not_before(rounds):
    clock = Clock()
    runner = MaintenanceRunner("host:1:abc", retry=retry, clock=clock)
    runner.run_if_due()  # the first round: at once
    assert rounds == ["host:1:abc"]
    clock.now += INTERVAL - 0.1
    runner.run_if_due()
    assert rounds == ["host:1:abc"]
    clock.now += 0.1
    runner.run_if_due()
    assert rounds == ["host:1:abc"] * 2


@pytest.mark.parametrize(
    ("fault", "logged"),
    [
        (OperationalError("connection refused"), "maintenance skipped, database unreachable"),
        (RuntimeError("a bug in a duty"), "maintenance failed"),
    ],
)
def test_a_failing_round_is_logged_and_the_next_one_still_runs(rounds, caplog, fault, logged):
    clock = Clock()
    failing = [fault]

    def flaky(operation, what, **options):
        if failing:
            raise failing.pop()
        return operation()

    runner = MaintenanceRunner("host:1:abc", retry=flaky, clock=clock)
    with caplog.at_level(logging.WARNING, logger="jobs.worker.maintenance_runner"):
        runner.run_if_due()  # does not raise
    assert logged in caplog.text
    assert rounds == []
    runner.run_if_due()  # not retried before the interval
    assert rounds == []
    clock.now += INTERVAL
    runner.run_if_due()
    assert rounds == ["host:1:abc"]
