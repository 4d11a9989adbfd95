"""How workers learn of new tasks: the database (default), Redis Streams or RabbitMQ.

``JOBS_TRANSPORT`` is ``None`` or ``"database"`` (PostgreSQL LISTEN/NOTIFY, polling elsewhere),
a Redis URL (``"redis://host:6379/0"``), an AMQP URL (``"amqp://guest:guest@host:5672/%2F"``),
or ``{"BACKEND": "redis" | "rabbitmq", "URL": "..."}``. The task row stays the record in every
case: a broker carries only ids, published once the enqueueing transaction commits, and a worker
woken by them still takes tasks with the database's guarded claim. A message lost, duplicated or
late changes nothing; the worker's poll (every ``JOBS_POLL_INTERVAL``) finds what no message
announced. What the brokers share is in ``jobs.transports.base``.
"""

import logging

from django.db import transaction

from jobs.conf import jobs_settings
from jobs.transports.base import redact

logger = logging.getLogger(__name__)

SCHEMES = {"redis": ("redis://", "rediss://", "unix://"), "rabbitmq": ("amqp://", "amqps://")}
CLIENTS = {"redis": ("redis", "redis-py"), "rabbitmq": ("pika", "pika")}  # module, package
SETTING_KEYS = ("BACKEND", "URL")  # what the dict form may set; ``jobs.E051`` reports the rest

_publishers: dict[tuple[str, str], object] = {}
_unusable: set[tuple[str, str]] = set()  # URLs whose client refused them, logged once


def parse(setting) -> tuple[str, str | None]:
    """Return ``(backend, url)`` for a ``JOBS_TRANSPORT`` value; ValueError when it is bad."""
    if setting is None or setting == "database":
        return "database", None
    if isinstance(setting, str):
        for name, schemes in SCHEMES.items():
            if setting.startswith(schemes):
                return name, setting
        raise ValueError(
            f"JOBS_TRANSPORT {setting!r}: expected 'database', a redis:// or an amqp:// URL"
        )
    if isinstance(setting, dict):
        backend = setting.get("BACKEND")
        if backend == "database":
            return "database", None
        if backend in SCHEMES and isinstance(setting.get("URL"), str):
            if not setting["URL"].startswith(SCHEMES[backend]):
                raise ValueError(
                    f"JOBS_TRANSPORT {setting!r}: a {backend} URL starts with "
                    + " or ".join(SCHEMES[backend])
                )
            return backend, setting["URL"]
        if backend in SCHEMES:
            raise ValueError(f"JOBS_TRANSPORT {setting!r}: BACKEND {backend!r} needs a URL (text)")
        raise ValueError(
            f"JOBS_TRANSPORT {setting!r}: BACKEND must be 'database', 'redis' or 'rabbitmq' "
            "(with a URL)"
        )
    raise ValueError(f"JOBS_TRANSPORT {setting!r}: expected None, a string or a dict")


def backend() -> tuple[str, str | None]:
    return parse(jobs_settings.TRANSPORT)


def listener(queues):
    """The worker's listener for ``queues`` (all when empty), per ``JOBS_TRANSPORT``."""
    name, url = backend()
    if name == "redis":
        assert url is not None
        from jobs.transports.redis_streams import RedisListener  # optional: redis-py

        return RedisListener(url, queues)
    if name == "rabbitmq":
        assert url is not None
        from jobs.transports.rabbitmq import RabbitListener  # optional: pika

        return RabbitListener(url, queues)
    from jobs.worker.notify import Listener  # app registry: it imports jobs' models

    return Listener()


def publisher(name: str, url: str):
    """This process's publisher for a broker URL, made once."""
    key = (name, url)
    if key not in _publishers:
        if name == "redis":
            from jobs.transports.redis_streams import RedisPublisher  # optional: redis-py

            _publishers[key] = RedisPublisher(url)
        else:
            from jobs.transports.rabbitmq import RabbitPublisher  # optional: pika

            _publishers[key] = RabbitPublisher(url)
    return _publishers[key]


def announce_on_commit(queue: str, ids, *, using: str) -> None:
    """Publish ``ids`` of ``queue`` once the caller's transaction commits (database: nothing,
    its trigger announces); never raises because the broker is down."""
    name, url = backend()
    if name == "database" or not ids:
        return
    assert url is not None
    ids = [str(task_id) for task_id in ids]
    transaction.on_commit(lambda: _publish(name, url, queue, ids), using=using)


def _publish(name: str, url: str, queue: str, ids: list[str]) -> None:
    """After the commit: a URL the client cannot read (a port that is not a number, which
    ``jobs.E050`` reports) is logged once and the poll finds the rows; the commit never raises."""
    if (name, url) in _unusable:
        return
    try:
        sender = publisher(name, url)
    except Exception as exc:  # the rows are committed: raising now would fail a done enqueue
        _unusable.add((name, url))
        logger.warning("broker URL unusable, workers will poll url=%s error=%s", redact(url), exc)
        return
    sender.publish(queue, ids)
