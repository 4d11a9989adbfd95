"""A claim's start time is taken once the claim may write: a claim that waited for another
writer (SQLite's one write lock) is not dated before that writer's commit, so that a dependent
released by a commit never seems to have started before what it waited for had finished."""

import sqlite3
import threading
import time

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from jobs import sql
from tests import helpers
from tests.factories import TaskFactory

pytestmark = pytest.mark.django_db(transaction=True)

sqlite_only = pytest.mark.skipif(
    connection.vendor != "sqlite", reason="SQLite's write lock; PostgreSQL locks rows"
)


@sqlite_only
def test_a_claim_that_waited_for_the_writer_is_stamped_after_its_commit():
    TaskFactory()
    other_writer = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    other_writer.execute("BEGIN IMMEDIATE")
    claimed = []

    def claim_in_a_thread():
        try:
            claimed.extend(helpers.claim("w1", 1, lease_seconds=30))
        finally:
            connections.close_all()  # the thread's own connection, not left to the collector

    claimer = threading.Thread(target=claim_in_a_thread)
    claimer.start()
    time.sleep(0.3)  # the claim is waiting for the lock by now
    assert not claimed
    committed_at = timezone.now()
    other_writer.execute("COMMIT")
    claimer.join(timeout=30)
    other_writer.close()
    (task,) = claimed
    assert task.started_at >= committed_at
    assert task.lease_expires_at >= committed_at


@sqlite_only
def test_the_claim_lock_is_released_when_the_claim_fails():
    with pytest.raises(RuntimeError), sql.sqlite.claim_lock(connection):
        raise RuntimeError("the claim failed")
    probe = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None, timeout=0)
    probe.execute("BEGIN IMMEDIATE")  # would raise "database is locked" if still held
    probe.execute("ROLLBACK")
    probe.close()
    assert connection.get_autocommit()
    assert not connection.in_atomic_block


def test_inside_a_transaction_the_claim_lock_leaves_the_transaction_to_its_owner():
    with transaction.atomic():
        with sql.dialect(connection).claim_lock(connection):
            pass
        assert connection.in_atomic_block  # no COMMIT of the owner's transaction
