"""Test settings for a worker with an installed app whose ``tasks.py`` fails to import."""

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.brokenapp"]
