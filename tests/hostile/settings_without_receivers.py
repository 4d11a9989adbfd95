"""The test settings without the demo app, whose ``task_finished`` receiver makes a worker's
child record each success itself: without it, successes go to the supervisor, many per
statement, the way a project without receivers runs."""

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS

INSTALLED_APPS = [app for app in INSTALLED_APPS if app != "demo_project.demo"]
