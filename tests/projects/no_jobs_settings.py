"""A project that names jobs' task backend but forgot "jobs" in INSTALLED_APPS."""

from tests.projects.bare_settings import *  # noqa: F403
from tests.projects.bare_settings import INSTALLED_APPS

INSTALLED_APPS = [app for app in INSTALLED_APPS if app != "jobs"]
ROOT_URLCONF = "tests.projects.no_urls"
