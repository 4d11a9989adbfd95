"""A task module that imports a package the worker does not have (the hostile suite enqueues
its task by name; nothing else imports it)."""

import jobs_hostile_no_such_package  # noqa: F401

from jobs import task


@task
def never_defined():  # pragma: no cover - the import fails first
    return "unreachable"
