"""The session proof of life on a real PostgreSQL (``jobs.worker.session``, issue 16): a peer's
advisory lock read in pg_locks, the rescue's guard on the key, and the lock's own holder."""

import os
import threading
import time
from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from jobs import transitions
from jobs.models import Worker
from jobs.states import Status
from jobs.worker import liveness, session
from tests.conftest import wait_for
from tests.factories import TaskFactory, WorkerFactory

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _postgres(postgres_only, settings):
    settings.JOBS_SESSION_RESCUE = None  # on where it can be (off by default)


def direct(operation, what, **options):
    return operation()


def holder(key):
    """Another session holding ``key``, as a worker on another host does."""
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    other = psycopg.connect(**params, autocommit=True)
    assert other.execute("SELECT pg_try_advisory_lock(%s)", [key]).fetchone()[0]
    return other


def end_session(other, key):
    """Close ``other`` and wait until the server has let its lock go: a backend ends after its
    client has closed, and a look before that still sees the key held."""
    other.close()
    wait_for(lambda: not key_held(key), timeout=10, interval=0.01, message="the session to end")


def key_held(key):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND ((classid::bigint << 32) | objid::bigint) = %s",
            [key],
        )
        return cursor.fetchone()[0] > 0


def watch_at(now):
    return liveness.PeerWatch("me", retry=direct, sessions=True, clock=lambda: now[0])


def test_a_held_key_is_alive_and_a_free_one_is_dead_after_two_looks():
    key = 2**62 + 12345
    other = holder(key)
    row = WorkerFactory(session_key=key, boot_id="another-host")
    task = TaskFactory(running=True, worker_id=row.pk)
    now = [1.0]
    watch = watch_at(now)
    for _ in range(3):
        assert watch.check_if_due() == 0  # held: alive
        now[0] += 1.0
    end_session(other, key)  # the session ends, the lock with it
    assert watch.check_if_due() == 0  # free once: a suspect
    assert watch.next_at() == now[0] + liveness.SESSION_CHECK_INTERVAL
    now[0] += session.FREE_CONFIRM_SECONDS / 2
    assert watch.check_if_due() == 0  # free again, too soon
    now[0] += session.FREE_CONFIRM_SECONDS / 2
    assert watch.check_if_due() == 1
    task.refresh_from_db()
    assert task.status == Status.RETRYING
    assert "its database session ended" in task.error_details[-1]["message"]
    assert not Worker.objects.filter(pk=row.pk).exists()


def test_a_new_key_or_a_newer_heartbeat_between_the_looks_keeps_the_worker():
    row = WorkerFactory(session_key=7, boot_id="another-host")
    task = TaskFactory(running=True, worker_id=row.pk)
    now = [1.0]
    watch = watch_at(now)
    assert watch.check_if_due() == 0  # key 7 free: a suspect
    new_key = 2**40 + 1
    other = holder(new_key)
    Worker.objects.filter(pk=row.pk).update(session_key=new_key)  # re-keyed in time
    now[0] += 2 * session.FREE_CONFIRM_SECONDS
    assert watch.check_if_due() == 0
    end_session(other, new_key)
    assert watch.check_if_due() == 0  # the new key free: suspect again, from scratch
    Worker.objects.filter(pk=row.pk).update(last_heartbeat_at=timezone.now())
    now[0] += 2 * session.FREE_CONFIRM_SECONDS
    assert watch.check_if_due() == 0  # a newer heartbeat: from scratch again
    task.refresh_from_db()
    assert task.status == Status.RUNNING


def test_the_rescue_checks_the_key_and_the_heartbeat_it_saw_under_the_rows_lock():
    seen = timezone.now() - timedelta(seconds=5)
    row = WorkerFactory(session_key=11, last_heartbeat_at=seen)
    task = TaskFactory(running=True, worker_id=row.pk)
    # The worker wrote a new key after the peer's second look: nothing rescued.
    Worker.objects.filter(pk=row.pk).update(session_key=12)
    assert transitions.rescue_dead([row.pk], sessions={row.pk: (11, seen)}) == 0
    # A heartbeat newer than the one seen: nothing rescued.
    Worker.objects.filter(pk=row.pk).update(session_key=11, last_heartbeat_at=timezone.now())
    assert transitions.rescue_dead([row.pk], sessions={row.pk: (11, seen)}) == 0
    task.refresh_from_db()
    assert task.status == Status.RUNNING
    Worker.objects.filter(pk=row.pk).update(last_heartbeat_at=seen)
    assert transitions.rescue_dead([row.pk], sessions={row.pk: (11, seen)}) == 1
    assert not Worker.objects.filter(pk=row.pk).exists()


def test_a_worker_holds_its_key_writes_it_and_fences_when_its_session_is_ended():
    """The holder: the key held in pg_locks and on the row; its session terminated, it takes
    a new key at once, and no fence (its children keep running) as it did so in time."""
    row = WorkerFactory()
    fenced, woken = [], []
    lock = session.SessionLock(row.pk, fence=lambda: fenced.append(1), wake=lambda: woken.append(1))
    try:
        assert lock.start()
        first = lock.key
        row.refresh_from_db()
        assert row.session_key == first
        held = Worker.objects.filter(pk=row.pk)
        assert liveness.PeerWatch(row.pk, retry=direct, sessions=True)._session_peers() == []
        other = liveness.PeerWatch("someone-else", retry=direct, sessions=True)
        [(_, key, _, is_held)] = other._session_peers()
        assert (key, is_held) == (first, True)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [lock._backend_pid])
        deadline = time.monotonic() + 5
        while held.values_list("session_key", flat=True).get() == first:
            assert time.monotonic() < deadline, "no new key within 5 s"
            time.sleep(0.02)
        [(_, key, _, is_held)] = other._session_peers()
        assert key != first
        assert is_held
        time.sleep(session.SILENT_LIMIT + 0.3)
        assert fenced == []  # re-keyed before the limit: the children were left alone
        assert lock.held
    finally:
        lock.close()
    [(_, _, _, is_held)] = other._session_peers()
    assert not is_held  # closed: the lock went with the session


def test_a_worker_whose_row_was_rescued_meanwhile_fences_and_says_so():
    """A rescuer won the race: the new key finds no row; the children are killed at once."""
    row = WorkerFactory()
    fenced, woken = [], []
    lock = session.SessionLock(row.pk, fence=lambda: fenced.append(1), wake=lambda: woken.append(1))
    try:
        assert lock.start()
        Worker.objects.filter(pk=row.pk).delete()  # as rescue_dead does
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [lock._backend_pid])
        deadline = time.monotonic() + 5
        while not fenced:
            assert time.monotonic() < deadline, "no fence within 5 s"
            time.sleep(0.02)
        assert lock.orphaned
        assert not lock.held
        assert woken
        assert lock.take_fenced()
    finally:
        lock.close()


def test_a_silent_connection_is_fenced_at_the_limit():
    """A connection that stops answering (its backend stopped, as a network cut would leave
    it): the fence comes SILENT_LIMIT after the last answer, whatever taking a new key does."""
    row = WorkerFactory()
    fenced_at = []
    lock = session.SessionLock(
        row.pk, fence=lambda: fenced_at.append(time.monotonic()), wake=lambda: None
    )
    try:
        assert lock.start()
        time.sleep(0.5)
        # Stop the backend's process: its socket stays open, nothing answers.
        os.kill(lock._backend_pid, 19)  # SIGSTOP
        stopped_at = time.monotonic()
        # Taking a new key must wait too: hold the row's lock, as a rescuer's transaction would.
        blocker = threading.Event()

        def hold_row():
            from django.db import connections, transaction

            with transaction.atomic():
                list(Worker.objects.select_for_update().filter(pk=row.pk))
                blocker.wait(5)
            connections.close_all()

        thread = threading.Thread(target=hold_row)
        thread.start()
        try:
            deadline = time.monotonic() + 5
            while not fenced_at:
                assert time.monotonic() < deadline, "no fence within 5 s"
                time.sleep(0.02)
        finally:
            os.kill(lock._backend_pid, 18)  # SIGCONT
            blocker.set()
            thread.join()
        assert fenced_at[0] - stopped_at <= session.SILENT_LIMIT + 0.3
    finally:
        lock.close()
