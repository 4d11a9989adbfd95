"""A task module that raises while it is imported (the hostile suite enqueues its task by name;
nothing else imports it)."""

from jobs import task

raise RuntimeError("this module cannot be imported: JOBS_EXAMPLE_SETTING is missing")


@task
def never_defined():  # pragma: no cover - the import fails first
    return "unreachable"
