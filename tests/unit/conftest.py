"""Unit tests: one part alone in plain Python, no database, no process.

A test here marked ``django_db``, asking for a database or worker fixture, or starting a
process fails before it runs. (pytest-django already refuses a query from an unmarked test.)
"""

import os
import subprocess

import pytest

from tests.layers import refuse, starts_processes, uses_database


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if uses_database(item):
        refuse(item, "uses the database", "tests/db/")
    if starts_processes(item):
        refuse(item, "starts worker processes", "tests/process/")


def _no_process(*args, **kwargs):
    pytest.fail("a unit test starts no process: move it to tests/process/", pytrace=False)


@pytest.fixture(autouse=True)
def _no_processes(monkeypatch):
    """Refuse subprocesses and forks, the ways a test would start another process."""
    monkeypatch.setattr(subprocess, "Popen", _no_process)
    monkeypatch.setattr(os, "fork", _no_process)
