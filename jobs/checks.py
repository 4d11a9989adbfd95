"""System checks: settings of jobs that would fail later are reported at startup instead.

Every check of jobs is here, and every one is tagged ``"jobs"``: ``runworker`` runs only the
checks that concern a worker, by that tag (``requires_system_checks``). ``jobs.apps`` imports
this module to register them. The rules themselves stay with the code that applies them
(``jobs.limits``, ``jobs.web.health.threshold_problems``, ``jobs.maintenance.pruning.retention``,
``jobs.maintenance.periodic.from_settings``), so a check and its runtime never disagree.
"""

import sqlite3

from django.apps import apps
from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import connections

from jobs import limits, sql, transports
from jobs.conf import DEFAULTS, jobs_settings
from jobs.maintenance.periodic import from_settings, unstorable
from jobs.maintenance.pruning import retention
from jobs.maintenance.schedulable import check_declared
from jobs.sql.sqlite import has_json as sqlite_has_json
from jobs.tasks.enqueueing import INT_RANGES
from jobs.tasks.payload import queue_name_problem
from jobs.tasks.rates import RateError, queue_rate
from jobs.transports.base import redact
from jobs.web.health import Thresholds, threshold_problems

TAG = "jobs"  # runworker runs the checks with this tag before it starts

REQUIRED_APPS = ("django.contrib.auth", "django.contrib.contenttypes")

QUEUE_OPTIONS = {"rate_limit"}  # what an entry of JOBS_QUEUES may set


@checks.register(TAG)
def check_settings(app_configs, **kwargs):
    errors = []
    whole_numbers = (
        "MAX_PAYLOAD_BYTES",
        "MAX_RESULT_BYTES",
        "DEFAULT_MAX_ATTEMPTS",
        "CONCURRENCY",
        "BATCH_SIZE",
        "ASYNC_CONCURRENCY",
        "PRUNE_BATCH_SIZE",
        "PRUNE_MAX_BATCHES",
    )
    for name in whole_numbers:
        value = getattr(jobs_settings, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            errors.append(
                checks.Error(
                    f"JOBS_{name} must be a whole number of at least 1, got {value!r}.",
                    id="jobs.E001",
                )
            )
    seconds = ("LEASE_SECONDS", "POLL_INTERVAL", "DEFAULT_TIMEOUT", "BACKOFF_BASE", "BATCH_SECONDS")
    for name in seconds:
        value = getattr(jobs_settings, name)
        if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
            errors.append(
                checks.Error(
                    f"JOBS_{name} must be a number of seconds above 0, got {value!r} "
                    f"(default {DEFAULTS[name]}).",
                    id="jobs.E002",
                )
            )
    errors.extend(check_transport())
    return errors


def check_transport():
    """jobs.E050: JOBS_TRANSPORT names no transport, its URL is bad, or its client is missing;
    jobs.E051: its dict form has a key jobs does not read (a typo would be ignored).

    Messages show the URL without its password, as the transports' log lines do."""
    return _unknown_transport_keys() + _transport_problems()


def _unknown_transport_keys():
    setting = jobs_settings.TRANSPORT
    if not isinstance(setting, dict):
        return []
    allowed = ", ".join(transports.SETTING_KEYS)
    return [
        checks.Error(
            f"JOBS_TRANSPORT has the key {key!r:.80}, which jobs does not read; "
            f"the keys allowed are {allowed}.",
            hint="A misspelt key is ignored: correct it, or remove it.",
            id="jobs.E051",
        )
        for key in setting
        if key not in transports.SETTING_KEYS
    ]


def _transport_problems():
    try:
        backend, url = transports.parse(jobs_settings.TRANSPORT)
    except ValueError as exc:
        return [checks.Error(_redacted(str(exc)), id="jobs.E050")]
    if backend == "database":
        return []
    module, package = transports.CLIENTS[backend]
    try:
        __import__(module)
    except ImportError:
        return [
            checks.Error(
                f"JOBS_TRANSPORT names {backend} but {package} is not installed.",
                hint=f"pip install 'django-jobs-queue[{backend}]'",
                id="jobs.E050",
            )
        ]
    assert url is not None
    try:
        if backend == "rabbitmq":
            from jobs.transports.rabbitmq import parameters  # optional: pika, only when named

            parameters(url, name="check")
        else:
            import redis  # optional: redis-py, only when named

            try:  # builds a connection as the publisher will, without connecting
                redis.ConnectionPool.from_url(url).make_connection()
            except (ValueError, TypeError, redis.RedisError) as exc:  # TypeError: ?bogus=1
                raise ValueError(f"{url!r} is not a valid Redis URL: {exc}") from exc
    except ValueError as exc:
        return [checks.Error(_redacted(f"JOBS_TRANSPORT: {exc}"), id="jobs.E050")]
    return []


def _redacted(message: str) -> str:
    """``message`` with the password of JOBS_TRANSPORT's URL (string or dict form) masked."""
    setting = jobs_settings.TRANSPORT
    # Every value of the dict: a URL under a misspelt key (``jobs.E051``) is printed by E050.
    urls = list(setting.values()) if isinstance(setting, dict) else [setting]
    for url in urls:
        if isinstance(url, str) and redact(url) != url:
            message = message.replace(url, redact(url))
    return message


@checks.register(TAG)
def check_required_apps(app_configs, **kwargs):
    """Report the contrib apps jobs needs; the admin, sessions and messages are optional."""
    # Task.owner is a foreign key to AUTH_USER_MODEL, and who may see or act on a task is
    # decided by the task model's permissions: both need auth and its contenttypes.
    missing = [name for name in REQUIRED_APPS if not apps.is_installed(name)]
    if not missing:
        return []
    return [
        checks.Error(
            f"jobs needs {' and '.join(missing)} in INSTALLED_APPS: tasks have an owner "
            "(AUTH_USER_MODEL) and permissions (view, retry, cancel).",
            hint="The admin, sessions and messages are optional; these two are not.",
            id="jobs.E006",
        )
    ]


# Database-tagged too: Django runs it on "check --database" (runworker passes no database).
@checks.register(checks.Tags.database, TAG)
def check_sqlite_version(app_configs, databases=None, **kwargs):
    uses_sqlite = any(
        sql.dialect(connections[alias]).CHECK_LIBRARY
        for alias in (databases or ())
        if alias in connections
    )
    if uses_sqlite and sqlite3.sqlite_version_info < sql.sqlite.MINIMUM_VERSION:
        return [
            checks.Error(
                f"jobs needs SQLite 3.35 or newer (UPDATE ... RETURNING); this Python has "
                f"{sqlite3.sqlite_version}.",
                id="jobs.E003",
            )
        ]
    if uses_sqlite and not sqlite_has_json():
        return [
            checks.Error(
                "jobs needs SQLite's JSON functions (json_each, json_extract, json_object: built "
                f"in since SQLite 3.38); this Python's SQLite {sqlite3.sqlite_version} lacks them.",
                id="jobs.E004",
            )
        ]
    return []


# Seconds settings that may be 0 (no grace, no retry); the others must be above 0.
_SECONDS_FROM_ZERO = ("SHUTDOWN_GRACE", "DATABASE_RETRY_SECONDS")
_SECONDS = (
    "BACKOFF_MAX",
    "SHUTDOWN_GRACE",
    "CANCEL_GRACE",
    "MAINTENANCE_INTERVAL",
    "DATABASE_RETRY_SECONDS",
    "WAITING_WARNING_SECONDS",
    "WAITING_CRITICAL_SECONDS",
    "RUNNING_WARNING_SECONDS",
    "METRICS_WINDOW_SECONDS",
    "DASHBOARD_REFRESH_SECONDS",
    "PRUNE_INTERVAL",
)
# Checked above 0 by check_settings: here only NaN, infinity and the upper bound.
_SECONDS_CHECKED_ELSEWHERE = (
    "LEASE_SECONDS",
    "POLL_INTERVAL",
    "DEFAULT_TIMEOUT",
    "BACKOFF_BASE",
    "BATCH_SECONDS",
)


@checks.register(TAG)
def check_numeric_limits(app_configs, **kwargs):
    """Report numbers a worker would choke on: NaN, infinity, beyond ``jobs.limits``' bounds."""
    errors = []

    def error(name, expected):
        value = getattr(jobs_settings, name)
        errors.append(
            checks.Error(f"JOBS_{name} must be {expected}, got {value!r}.", id="jobs.E021")
        )

    for name in _SECONDS:
        zero_allowed = name in _SECONDS_FROM_ZERO
        if not limits.is_seconds(getattr(jobs_settings, name), zero_allowed=zero_allowed):
            error(name, limits.seconds_expected(zero_allowed=zero_allowed))
    for name in _SECONDS_CHECKED_ELSEWHERE:
        value = getattr(jobs_settings, name)
        real = isinstance(value, int | float) and not isinstance(value, bool)
        if real and (value != value or value > limits.MAX_SECONDS):  # NaN, +inf, too long
            error(name, f"a finite number of seconds at most {limits.MAX_SECONDS:,} (a year)")
    factor = jobs_settings.BACKOFF_FACTOR
    if not limits.is_number(factor) or not 1 <= factor <= 100:
        error("BACKOFF_FACTOR", "a number from 1 to 100")
    jitter = jobs_settings.BACKOFF_JITTER
    if not limits.is_number(jitter) or not 0 <= jitter < 1:  # jobs.Backoff refuses 1
        error("BACKOFF_JITTER", "a fraction from 0 to below 1")
    for name in ("AUTO_PRUNE", "LOG_EACH_SUCCESS"):
        if not isinstance(getattr(jobs_settings, name), bool):
            error(name, "True or False")
    keep, most = jobs_settings.HISTORY_KEEP_DAYS, limits.MAX_RETENTION_DAYS
    if not isinstance(keep, int) or isinstance(keep, bool) or not 1 <= keep <= most:
        error("HISTORY_KEEP_DAYS", f"a whole number of days from 1 to {most:,}")
    errors += _check_counts()
    errors += _check_enqueue_defaults()
    return errors


def _check_counts():
    errors = []
    whole = {
        "MAX_CONCURRENCY": 10**6,
        "CONCURRENCY": limits.max_concurrency(),
        "PRUNE_BATCH_SIZE": limits.MAX_BATCH_SIZE,
        "PRUNE_MAX_BATCHES": limits.MAX_COUNT,
        "BATCH_SIZE": limits.MAX_BATCH_SIZE,
        "ASYNC_CONCURRENCY": limits.MAX_ASYNC_CONCURRENCY,
        "MAX_PAYLOAD_BYTES": limits.MAX_PAYLOAD_BYTES,
        "MAX_RESULT_BYTES": limits.MAX_RESULT_BYTES,
        "DEFAULT_MAX_ATTEMPTS": INT_RANGES["max_attempts"][1],
        "MAX_TASKS_PER_CHILD": limits.MAX_TASKS_PER_CHILD,
        "MAX_SNOOZES": limits.MAX_COUNT,
        "MAX_MEMORY_PER_CHILD": limits.MAX_MEMORY_PER_CHILD_MIB,
    }
    # Below 1, or not whole, check_settings reports these already.
    reported_below = ("CONCURRENCY", "PRUNE_BATCH_SIZE", "PRUNE_MAX_BATCHES", "BATCH_SIZE",
                      "ASYNC_CONCURRENCY", "MAX_PAYLOAD_BYTES", "MAX_RESULT_BYTES",
                      "DEFAULT_MAX_ATTEMPTS")  # fmt: skip
    for name, most in whole.items():
        value = getattr(jobs_settings, name)
        if value is None and name.endswith("_PER_CHILD"):
            continue  # no limit
        if not isinstance(most, int) or isinstance(most, bool) or most < 1:
            continue  # JOBS_MAX_CONCURRENCY itself is broken: reported on its own
        if isinstance(value, int) and not isinstance(value, bool) and value > most:
            hint = " (JOBS_MAX_CONCURRENCY raises the limit)" if name == "CONCURRENCY" else ""
            errors.append(
                checks.Error(
                    f"JOBS_{name} must be at most {most:,}, got {value!r}{hint}.", id="jobs.E022"
                )
            )
        elif name not in reported_below and (
            not isinstance(value, int) or isinstance(value, bool) or value < 1
        ):
            errors.append(
                checks.Error(
                    f"JOBS_{name} must be a whole number of at least 1, got {value!r}.",
                    id="jobs.E022",
                )
            )
    return errors


def _check_enqueue_defaults():
    """The default priority of @jobs.task tasks: within Django's range, as every priority is."""
    low, high = INT_RANGES["priority"]
    value = jobs_settings.DEFAULT_PRIORITY
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return [
            checks.Error(
                f"JOBS_DEFAULT_PRIORITY must be a whole number from {low:,} to {high:,}, "
                f"got {value!r}.",
                id="jobs.E023",
            )
        ]
    return []


@checks.register(TAG)
def check_unknown_settings(app_configs, **kwargs):
    """Warn of a ``JOBS_*`` setting jobs does not have: a typo would be ignored in silence."""
    unknown = sorted(
        name
        for name in dir(settings)
        if name.startswith("JOBS_") and name.removeprefix("JOBS_") not in DEFAULTS
    )
    return [
        checks.Warning(
            f"{name} is not a setting of jobs; it has no effect.",
            hint="See the settings reference for the names jobs reads.",
            id="jobs.W001",
        )
        for name in unknown
    ]


@checks.register(TAG)
def check_default_queue(app_configs, **kwargs):
    """JOBS_DEFAULT_QUEUE follows the rule of every queue name (else every enqueue fails)."""
    problem = queue_name_problem(jobs_settings.DEFAULT_QUEUE)
    if problem is None:
        return []
    return [
        checks.Error(
            f"JOBS_DEFAULT_QUEUE {jobs_settings.DEFAULT_QUEUE!r} is no queue name: it {problem}.",
            hint="A queue name is 1 to 100 printable characters, with no comma and no "
            "whitespace at either end.",
            id="jobs.E030",
        )
    ]


@checks.register(TAG)
def check_poll_interval(app_configs, **kwargs):
    """JOBS_POLL_INTERVAL below ``jobs.limits.MIN_INTERVAL_SECONDS`` makes an idle worker spin."""
    value = jobs_settings.POLL_INTERVAL
    # Not a number, NaN or at most 0: check_settings and check_numeric_limits report it.
    if not limits.is_number(value) or value <= 0 or value >= limits.MIN_INTERVAL_SECONDS:
        return []
    return [
        checks.Error(
            f"JOBS_POLL_INTERVAL must be at least {limits.MIN_INTERVAL_SECONDS} seconds, got "
            f"{value!r}: shorter, an idle worker polls the database in a busy loop.",
            id="jobs.E031",
        )
    ]


@checks.register(TAG)
def check_listen_database(app_configs, **kwargs):
    """JOBS_LISTEN_DATABASE names a PostgreSQL database of DATABASES (or is None)."""
    alias = jobs_settings.LISTEN_DATABASE
    if alias is None:
        return []
    hint = (
        "Name the alias of a direct connection (not through a pooler in transaction mode) to "
        "the PostgreSQL database that holds the task table, or leave it unset to listen on "
        "the task table's own connection."
    )
    if not isinstance(alias, str) or alias not in settings.DATABASES:
        return [
            checks.Error(
                f"JOBS_LISTEN_DATABASE must be an alias of DATABASES, got {alias!r}.",
                hint=hint,
                id="jobs.E032",
            )
        ]
    try:
        listens = sql.dialect(alias).LISTENS
    except NotImplementedError:
        listens = False
    if not listens:
        return [
            checks.Error(
                f"JOBS_LISTEN_DATABASE {alias!r} is not a PostgreSQL database: only "
                "PostgreSQL has LISTEN.",
                hint=hint,
                id="jobs.E032",
            )
        ]
    return []


@checks.register(TAG)
def check_health_settings(app_configs, **kwargs):
    """Report health thresholds and a metrics token that would make the checks misbehave."""
    problems = threshold_problems(Thresholds().resolved())
    errors = [checks.Error(message, id=check_id) for check_id, message in problems]
    token = jobs_settings.METRICS_TOKEN
    if token is not None and (not isinstance(token, str) or len(token) < 16):
        errors.append(
            checks.Error(
                "JOBS_METRICS_TOKEN must be None or a string of at least 16 characters "
                "(a guessable token would open the metrics to anyone).",
                id="jobs.E304",
            )
        )
    return errors


@checks.register(TAG)
def check_prune_settings(app_configs, **kwargs):
    """Report a ``JOBS_PRUNE_AFTER`` that pruning would refuse, at startup."""
    try:
        retention()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="jobs.E101")]
    return []


@checks.register(TAG)
def check_schedules(app_configs, **kwargs):
    """Report invalid ``JOBS_SCHEDULES`` entries at startup rather than in a worker's log."""
    try:
        schedules = from_settings()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="jobs.E201")]
    except Exception as exc:  # a value of a kind no rule foresaw: reported, never a crash
        return [checks.Error(f"JOBS_SCHEDULES is not valid: {exc!r}", id="jobs.E201")]
    errors: list[checks.CheckMessage] = []
    for name, spec in schedules.items():
        problem = unstorable(spec)
        if problem is not None:  # a worker would refuse it at every round
            errors.append(checks.Error(f"JOBS_SCHEDULES[{name!r}]: {problem}", id="jobs.E201"))
        try:  # a Django task: a jobs backend must store it (the slot's uniqueness is jobs')
            unknown = check_declared(spec.task, queue=spec.queue, priority=spec.priority)
            if unknown is not None:
                message = f"JOBS_SCHEDULES[{name!r}]: {unknown}"
                errors.append(checks.Warning(message, id="jobs.W203"))
        except ImproperlyConfigured as exc:
            errors.append(checks.Error(f"JOBS_SCHEDULES[{name!r}]: {exc}", id="jobs.E202"))
        except Exception as exc:  # its module raised on import: reported, never a crash
            errors.append(
                checks.Error(
                    f"JOBS_SCHEDULES[{name!r}]: importing {spec.task!r} raised {exc!r}.",
                    id="jobs.E202",
                )
            )
    return errors


@checks.register(TAG)
def check_queues(app_configs, **kwargs):
    """Report a ``JOBS_QUEUES`` whose entries an enqueue would refuse, at startup."""
    value = jobs_settings.QUEUES
    if not isinstance(value, dict):
        return [
            checks.Error(
                f"JOBS_QUEUES must be a dict of queue name to options, got {value!r:.80}.",
                hint='For example {"emails": {"rate_limit": "10/s"}}.',
                id="jobs.E040",
            )
        ]
    errors = []
    for queue, options in value.items():
        problem = queue_name_problem(queue) if isinstance(queue, str) else "is no string"
        if problem is not None:
            errors.append(
                checks.Error(
                    f"JOBS_QUEUES: {queue!r:.80} is no queue name: it {problem}.", id="jobs.E040"
                )
            )
            continue
        unknown = sorted(set(options) - QUEUE_OPTIONS) if isinstance(options, dict) else None
        if unknown is None or unknown:
            errors.append(
                checks.Error(
                    f"JOBS_QUEUES[{queue!r}] must be a dict of options "
                    f"({', '.join(sorted(QUEUE_OPTIONS))}), got {options!r:.80}.",
                    id="jobs.E040",
                )
            )
            continue
        try:
            queue_rate(value, queue)
        except RateError as exc:
            errors.append(checks.Error(f"JOBS_QUEUES[{queue!r}]: {exc}", id="jobs.E041"))
    return errors
