"""A task module that fails at import: how depends on ``BROKENAPP_RAISES`` (set by the test)."""

import os

from jobs import task

if os.environ.get("BROKENAPP_RAISES") == "SystemExit":
    raise SystemExit(0)

import nonexistent_dependency_of_brokenapp  # noqa: F401 - the point: it is not installed


@task
def echo(value):
    return value
