"""Settings of the stranger's project: what `startproject` wrote, plus what the README asks.

Copied next to the generated settings.py. JOBS_SMOKE_VARIANT=noadmin leaves out the admin,
sessions and messages (and the middleware and context processor that need them).
"""

import os

from mysite.settings import *  # noqa: F403
from mysite.settings import INSTALLED_APPS, MIDDLEWARE, TEMPLATES

INSTALLED_APPS = [*INSTALLED_APPS, "jobs", "shop"]
TASKS = {"default": {"BACKEND": "jobs.backends.DatabaseBackend"}}
try:
    import django.tasks  # noqa: F401  (Django >= 6.0)
except ImportError:
    INSTALLED_APPS.append("django_tasks")  # Django 5.2 with the backport, as the README says

if os.environ.get("JOBS_SMOKE_VARIANT") == "noadmin":
    left_out = ("django.contrib.admin", "django.contrib.sessions", "django.contrib.messages")
    INSTALLED_APPS = [app for app in INSTALLED_APPS if app not in left_out]
    MIDDLEWARE = [
        name
        for name in MIDDLEWARE
        if not name.startswith(("django.contrib.sessions.", "django.contrib.messages."))
        and name != "django.contrib.auth.middleware.AuthenticationMiddleware"
    ]
    for engine in TEMPLATES:
        processors = engine["OPTIONS"]["context_processors"]
        engine["OPTIONS"]["context_processors"] = [p for p in processors if "messages" not in p]
