"""Test settings for a worker process without the demo's ``task_finished`` receiver.

With no receiver waiting for a success, children hand their successes to the supervisor, which
records them many at once (``jobs.execution.executor._nothing_after_success``): the path a project
without receivers takes, and the one these workers exercise.
"""

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS

INSTALLED_APPS = [app for app in INSTALLED_APPS if app != "demo_project.demo"]
MIDDLEWARE = []
