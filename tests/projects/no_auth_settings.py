"""A project without django.contrib.auth: jobs cannot own tasks by user, and says so."""

from tests.projects.bare_settings import *  # noqa: F403
from tests.projects.bare_settings import INSTALLED_APPS

INSTALLED_APPS = [app for app in INSTALLED_APPS if not app.startswith("django.contrib.")]
ROOT_URLCONF = "tests.projects.no_urls"
