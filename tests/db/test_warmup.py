"""The warm-up before forking runs the framework's per-task code and nothing of the task's."""

import dataclasses
import logging

import pytest

from jobs import signals
from jobs.models import Task
from jobs.tasks import registry
from jobs.worker import warmup
from tests.testapp import tasks  # noqa: F401 (registers the test tasks)

pytestmark = pytest.mark.django_db(transaction=True)


_ran: list = []


def _spy(context=None, *args, **kwargs):  # module level, "context" first: any task can be it
    _ran.append((context, *args))


def test_warm_up_runs_no_task_sends_no_signal_logs_nothing_writes_nothing(caplog, monkeypatch):
    sent: list = []
    _ran.clear()
    name = registry.registered_names()[0]  # the task the warm-up resolves
    spy = dataclasses.replace(registry.get_task(name), func=_spy)
    monkeypatch.setitem(registry._registry, name, spy)
    signals.task_started.connect(lambda **kwargs: sent.append(kwargs), weak=False, dispatch_uid="w")
    try:
        with caplog.at_level(logging.DEBUG, logger="jobs"):
            warmup.warm_children_path()
    finally:
        signals.task_started.disconnect(dispatch_uid="w")
    assert (_ran, sent, caplog.records) == ([], [], [])
    assert not Task.objects.exists()


def test_a_failed_warm_up_is_logged_and_the_worker_starts_anyway(caplog, monkeypatch):
    def broken(rounds):
        raise RuntimeError("boom")

    monkeypatch.setattr(warmup, "_warm", broken)
    with caplog.at_level(logging.WARNING, logger="jobs"):
        warmup.warm_children_path()
    assert "warm-up failed, children start cold error=RuntimeError('boom')" in caplog.text
