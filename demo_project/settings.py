"""Settings of the demo product, read from the environment with django-environ.

DATABASE_URL defaults to a SQLite file in var/; set it to postgres://... for PostgreSQL.
"""

from pathlib import Path

import django
import environ
from django.core.checks.security.base import (
    SECRET_KEY_INSECURE_PREFIX,
    SECRET_KEY_MIN_LENGTH,
    SECRET_KEY_MIN_UNIQUE_CHARACTERS,
)
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"
VAR_DIR.mkdir(exist_ok=True)

env = environ.Env()
if (BASE_DIR / ".env").exists():
    environ.Env.read_env(BASE_DIR / ".env")

# Off unless asked (DEBUG=1: `make demo` asks, to serve static files from runserver): a copy of
# the demo left running somewhere must not show tracebacks and settings to strangers.
DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY.strip():  # blank or only spaces: as good as unset
    if not DEBUG:
        raise ImproperlyConfigured(
            "Set the SECRET_KEY environment variable (a long random string, e.g. from "
            "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`), or DEBUG=1 to run "
            "the demo locally with an insecure development key."
        )
    SECRET_KEY = "demo-only-insecure-key-for-debug"
elif not DEBUG and (
    # Django's own rule (manage.py check --deploy warns of the same keys), refused here: with
    # DEBUG off the demo is meant to be reachable, and a guessable key forges sessions.
    SECRET_KEY.startswith(SECRET_KEY_INSECURE_PREFIX)
    or len(SECRET_KEY) < SECRET_KEY_MIN_LENGTH
    or len(set(SECRET_KEY)) < SECRET_KEY_MIN_UNIQUE_CHARACTERS
):
    raise ImproperlyConfigured(
        f"SECRET_KEY is too weak for DEBUG off: it needs at least {SECRET_KEY_MIN_LENGTH} "
        f"characters, {SECRET_KEY_MIN_UNIQUE_CHARACTERS} of them different, and no "
        f"{SECRET_KEY_INSECURE_PREFIX!r} prefix (e.g. from "
        "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`)."
    )
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "jobs",
    "demo_project.demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "demo_project.demo.notifications.NotificationMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "demo_project.urls"
WSGI_APPLICATION = "demo_project.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'demo.sqlite3'}")}
DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=0)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several processes (web, workers) share one file: wait for the lock rather than fail, take
    # the write lock when a transaction starts, and let readers run beside the writer.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )

# Django Tasks (django.tasks on Django 6, the django_tasks backport on 5.2) stored by jobs.
TASKS = {"default": {"BACKEND": "jobs.backends.DatabaseBackend"}}
try:
    import django.tasks
except ImportError:
    INSTALLED_APPS.append("django_tasks")

# Django's validators for every password a person sets (seed_demo's alice/alice and friends
# are set with set_password, which does not validate: demo logins only).
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
MEDIA_ROOT = VAR_DIR / "media"
MEDIA_URL = "media/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
_email_backend = env.str("EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend")
if django.VERSION >= (6, 1):
    MAILERS = {"default": {"BACKEND": _email_backend}}
else:
    EMAIL_BACKEND = _email_backend

JOBS_CONCURRENCY = env.int("JOBS_CONCURRENCY", default=4)

# Pauses that let a person watch the demo's bars move (seconds per 100 rows imported, and per
# report section); the test settings set them to 0.
DEMO_IMPORT_CHUNK_SECONDS = env.float("DEMO_IMPORT_CHUNK_SECONDS", default=0.3)
DEMO_REPORT_SECTION_SECONDS = env.float("DEMO_REPORT_SECTION_SECONDS", default=0.5)
# Uploads and reports older than this are deleted by the hourly clean_up_files task, except
# those of tasks not finished yet.
DEMO_FILES_KEEP_SECONDS = env.float("DEMO_FILES_KEEP_SECONDS", default=24 * 3600)
JOBS_SCHEDULES = {
    "demo-clean-up-files": {"task": "demo_project.demo.tasks.clean_up_files", "every": 3600},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {"jobs": {"handlers": ["console"], "level": env.str("JOBS_LOG_LEVEL", "INFO")}},
}
