"""Django's task signals with their receivers cached, as a worker's child has them.

``cache_task_signal_receivers`` turns on the receiver cache Django's own signals have: every
receiver connected, disconnected or collected afterwards must still be honoured, and any
sender (``None`` too) must still work.
"""

import gc
from types import SimpleNamespace

import pytest

from jobs.backends import DatabaseBackend
from jobs.tasks.django_api import (
    TaskResultStatus,
    cache_task_signal_receivers,
    task_finished,
    task_started,
)

# What Django's own receivers (its log lines) read of a result.
RESULT = SimpleNamespace(
    id="1", status=TaskResultStatus.SUCCESSFUL, task=SimpleNamespace(module_path="app.task")
)


@pytest.fixture
def cached():
    """The two signals cached for the test, as they were afterwards (other tests send them)."""
    before = [(signal, signal.use_caching) for signal in (task_started, task_finished)]
    cache_task_signal_receivers()
    yield
    for signal, use_caching in before:
        signal.use_caching = use_caching
        signal.sender_receivers_cache.clear()


def test_both_signals_cache_their_receivers(cached):
    assert task_started.use_caching
    assert task_finished.use_caching


@pytest.mark.parametrize("signal", [task_started, task_finished], ids=["started", "finished"])
def test_a_receiver_connected_after_a_send_is_called(cached, signal):
    calls = []
    signal.send(DatabaseBackend, task_result=RESULT)  # fills the cache for this sender

    def receiver(sender, task_result, **kwargs):
        calls.append(sender)

    signal.connect(receiver)
    try:
        signal.send(DatabaseBackend, task_result=RESULT)
    finally:
        signal.disconnect(receiver)
    signal.send(DatabaseBackend, task_result=RESULT)  # disconnected: not called again
    assert calls == [DatabaseBackend]


def test_a_receiver_for_one_sender_only_hears_that_sender(cached):
    calls = []

    class OtherBackend(DatabaseBackend):
        pass

    def receiver(sender, **kwargs):
        calls.append(sender)

    task_started.connect(receiver, sender=OtherBackend)
    try:
        task_started.send(DatabaseBackend, task_result=RESULT)
        task_started.send(OtherBackend, task_result=RESULT)
    finally:
        task_started.disconnect(receiver, sender=OtherBackend)
    assert calls == [OtherBackend]


def test_a_collected_receiver_is_not_called(cached):
    calls = []

    def make():
        def receiver(sender, **kwargs):
            calls.append(sender)

        return receiver

    receiver = make()
    task_finished.connect(receiver)  # weakly, Django's default
    task_finished.send(DatabaseBackend, task_result=RESULT)
    del receiver
    gc.collect()
    task_finished.send(DatabaseBackend, task_result=RESULT)
    assert calls == [DatabaseBackend]


def test_a_sender_that_cannot_be_weakly_referenced_still_works(cached):
    """Django's cache of a signal made with ``use_caching`` is weak and refuses ``None``; the
    plain one an uncached signal has, which stays, does not."""
    calls = []

    def receiver(sender, **kwargs):
        calls.append(sender)

    task_started.connect(receiver)
    try:
        task_started.send(None, task_result=RESULT)
        task_started.send(None, task_result=RESULT)
    finally:
        task_started.disconnect(receiver)
    assert calls == [None, None]
