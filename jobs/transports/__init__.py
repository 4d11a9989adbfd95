"""How workers learn of new tasks: the database (default) or Redis Streams.

``JOBS_TRANSPORT`` is ``None`` or ``"database"`` (PostgreSQL LISTEN/NOTIFY, polling elsewhere),
or a Redis URL (``"redis://host:6379/0"``), or ``{"BACKEND": "redis", "URL": "redis://..."}``.
The task row stays the record in every case: a broker carries only ids, published once the
enqueueing transaction commits, and a worker woken by them still takes tasks with the
database's guarded claim. A message lost, duplicated or late changes nothing; the worker's poll
(every ``JOBS_POLL_INTERVAL``) finds what no message announced.
"""

from django.db import transaction

from jobs.conf import jobs_settings
from jobs.transports.redis_streams import RedisListener, publish


def parse(setting) -> tuple[str, str | None]:
    """Return ``(backend, url)`` for a ``JOBS_TRANSPORT`` value; ValueError when it is bad."""
    if setting is None or setting == "database":
        return "database", None
    if isinstance(setting, str):
        if setting.startswith(("redis://", "rediss://", "unix://")):
            return "redis", setting
        raise ValueError(f"JOBS_TRANSPORT {setting!r}: expected 'database' or a redis:// URL")
    if isinstance(setting, dict):
        backend = setting.get("BACKEND")
        if backend == "database":
            return "database", None
        if backend == "redis" and isinstance(setting.get("URL"), str):
            return "redis", setting["URL"]
        raise ValueError(
            f"JOBS_TRANSPORT {setting!r}: BACKEND must be 'database' or 'redis' (with a URL)"
        )
    raise ValueError(f"JOBS_TRANSPORT {setting!r}: expected None, a string or a dict")


def backend() -> tuple[str, str | None]:
    return parse(jobs_settings.TRANSPORT)


def listener(queues):
    """The worker's listener for ``queues`` (all when empty), per ``JOBS_TRANSPORT``."""
    name, url = backend()
    if name == "redis":
        assert url is not None
        return RedisListener(url, queues)
    from jobs.worker.notify import Listener  # app registry: it imports jobs' models

    return Listener()


def announce_on_commit(queue: str, ids, *, using: str) -> None:
    """Publish ``ids`` of ``queue`` once the caller's transaction commits (database: nothing,
    its trigger announces); never raises because the broker is down."""
    name, url = backend()
    if name != "redis" or not ids:
        return
    ids = [str(task_id) for task_id in ids]
    assert url is not None
    transaction.on_commit(lambda: publish(url, queue, ids), using=using)
