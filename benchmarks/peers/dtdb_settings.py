"""django-tasks-db's peer: a small Django project, its database from ``DATABASE_URL``."""

import os
from urllib.parse import urlsplit

_url = urlsplit(os.environ["DATABASE_URL"])
SECRET_KEY = "benchmark-only"
DEBUG = False
USE_TZ = True
INSTALLED_APPS = ["django_tasks", "django_tasks_db"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _url.path.lstrip("/"),
        "USER": _url.username or "",
        "HOST": _url.hostname or "",
        "PORT": _url.port or "",
        # The worker calls close_old_connections() before each task: with Django's default
        # (0) that is a new connection per task, 13 tasks/s here. Kept open, as a tuned site would.
        "CONN_MAX_AGE": 600,
        "CONN_HEALTH_CHECKS": True,
    }
}
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["bench"]}}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "INFO"},
}
