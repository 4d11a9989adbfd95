"""What a test uses, read from its marks and fixtures: each layer's conftest refuses the rest.

A test's layer is its folder: tests/unit (plain Python), tests/db (the database, in-process),
tests/process (real processes). These functions tell from a collected test which it needs, so
that a test in the wrong folder fails at once, naming the folder it belongs in.
"""

import pytest

# pytest-django's fixtures that open the test database (the django_db mark does too).
DATABASE_FIXTURES = frozenset(
    {
        "db",
        "transactional_db",
        "django_db_reset_sequences",
        "django_db_serialized_rollback",
        "live_server",
        "admin_user",
        "admin_client",
    }
)
# tests/conftest.py's fixtures that start ``runworker`` (or prepare its environment).
PROCESS_FIXTURES = frozenset({"runworker", "start_worker", "worker_env"})


def uses_database(item) -> bool:
    """Say whether ``item`` is marked ``django_db`` or asks for a database fixture."""
    fixtures = set(getattr(item, "fixturenames", ()))
    return item.get_closest_marker("django_db") is not None or bool(fixtures & DATABASE_FIXTURES)


def starts_processes(item) -> bool:
    """Say whether ``item`` is marked ``process`` or asks for a worker fixture."""
    fixtures = set(getattr(item, "fixturenames", ()))
    return item.get_closest_marker("process") is not None or bool(fixtures & PROCESS_FIXTURES)


def refuse(item, what: str, folder: str):
    """Fail ``item`` before its fixtures run: it uses what its layer does not allow."""
    pytest.fail(
        f"{item.nodeid} {what}, which its layer does not allow: move it to {folder} "
        "(docs/development.md, 'Test layers')",
        pytrace=False,
    )
