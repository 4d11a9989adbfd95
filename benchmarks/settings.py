"""Benchmark settings: the demo's, plus the benchmark's tasks, without the query log."""

from demo_project.settings import *  # noqa: F403
from demo_project.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "benchmarks"]
DEBUG = False
