"""The least a project needs for jobs: auth and contenttypes, no admin, sessions or messages.

Started in subprocesses by tests/process/test_install_anywhere.py, which sets DATABASE_URL.
"""

import environ

try:
    import django.tasks  # noqa: F401 - Django 6 has the Tasks framework built in
except ImportError:
    TASKS_APPS = ["django_tasks"]  # Django 5.2: the backport
else:
    TASKS_APPS = []

SECRET_KEY = "tests-projects-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["testserver", "localhost"]
USE_TZ = True
INSTALLED_APPS = ["django.contrib.auth", "django.contrib.contenttypes", "jobs", *TASKS_APPS]
# No SessionMiddleware, so no AuthenticationMiddleware (it needs sessions): no request.user.
MIDDLEWARE = ["django.middleware.common.CommonMiddleware"]
ROOT_URLCONF = "tests.projects.urls"
DATABASES = {"default": environ.Env().db("DATABASE_URL")}
TASKS = {"default": {"BACKEND": "jobs.backends.DatabaseBackend"}}
JOBS_CONCURRENCY = 1
JOBS_POLL_INTERVAL = 0.2
