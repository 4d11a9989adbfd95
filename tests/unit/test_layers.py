"""tests/layers.py tells a test's needs from its marks and fixtures."""

from types import SimpleNamespace

import pytest

from tests.layers import starts_processes, uses_database


def item(marks=(), fixtures=()):
    """A stand-in for a collected test with ``marks`` and ``fixtures``."""
    found = {name: getattr(pytest.mark, name) for name in marks}
    return SimpleNamespace(get_closest_marker=found.get, fixturenames=list(fixtures))


@pytest.mark.parametrize(
    ("marks", "fixtures", "database", "processes"),
    [
        ((), ("settings", "monkeypatch", "client"), False, False),
        (("django_db",), (), True, False),
        ((), ("transactional_db",), True, False),
        ((), ("live_server",), True, False),
        (("process",), (), False, True),
        ((), ("worker_env",), False, True),
        (("django_db", "process"), ("runworker",), True, True),
    ],
)
def test_marks_and_fixtures_tell_the_layer(marks, fixtures, database, processes):
    test = item(marks, fixtures)
    assert uses_database(test) is database
    assert starts_processes(test) is processes
