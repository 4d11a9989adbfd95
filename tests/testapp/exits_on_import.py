"""A task module that raises SystemExit while it is imported (the hostile suite enqueues its task
by name; nothing else imports it)."""

import sys

from jobs import task

sys.exit("this module exits when it is imported")


@task
def never_defined():  # pragma: no cover - the import fails first
    return "unreachable"
