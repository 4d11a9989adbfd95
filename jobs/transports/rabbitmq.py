"""RabbitMQ transport (pika): a topic exchange, an AMQP queue per jobs queue, ids only.

Enqueue publishes to the exchange ``jobs`` after commit, with the jobs queue's name as routing
key, in the chunks of ``jobs.transports.base``; transient messages (the row is the record, a
message lost in a broker restart costs a poll). Workers of named queues consume the AMQP queue
``jobs.queue.<name>`` (bound with that name), workers of all queues consume ``jobs.all``
(bound with ``#``): the workers of one queue share its AMQP queue, so each message wakes one
of them. The AMQP queues are bounded: ``x-max-length`` (the oldest message dropped first), a
message TTL, and ``x-expires``, so the queue of a jobs queue whose workers are all gone is
deleted after ten minutes instead of filling up. A message published while no worker's queue
exists is dropped by the exchange; the poll finds its rows.

A queue name with a word that is exactly ``*`` or ``#`` (``"a.*"``) is a wildcard in the
binding: its workers are then woken for other queues too, which costs a claim and nothing else.
"""

import contextlib
import urllib.parse
from typing import Any

from jobs.transports.base import Publisher, ThreadedListener

EXCHANGE = "jobs"
ALL_QUEUES = "jobs.all"
QUEUE_PREFIX = "jobs.queue."
QUEUE_ARGUMENTS = {
    "x-max-length": 10_000,
    "x-overflow": "drop-head",
    "x-message-ttl": 60_000,  # ms: a wake-up older than a minute is one the poll made already
    "x-expires": 600_000,  # ms without a consumer: the queue of workers that are gone
}
CONNECT_TIMEOUT = 2  # seconds; what an unanswering broker host costs a commit (docs/howto)
CONSUME_SECONDS = 1.0  # how often the listener thread looks at its stop flag


def parameters(url: str, *, name: str):
    """pika's connection parameters for ``url``, with bounded timeouts unless the URL sets
    them (``?socket_timeout=5``); ValueError when the URL is bad."""
    import pika

    if not url.startswith(("amqp://", "amqps://")):
        raise ValueError(f"{url!r} is not an amqp:// or amqps:// URL")
    try:
        split = urllib.parse.urlsplit(url)
        split.port  # noqa: B018 (raises ValueError for a port that is not a number)
        params = pika.URLParameters(url)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{url!r} is not a valid AMQP URL: {exc}") from None
    given = urllib.parse.parse_qs(split.query)
    if "socket_timeout" not in given:
        params.socket_timeout = CONNECT_TIMEOUT
    if "stack_timeout" not in given:
        params.stack_timeout = CONNECT_TIMEOUT * 2  # TCP, TLS and the AMQP handshake together
    if "blocked_connection_timeout" not in given:
        # A broker in a resource alarm blocks publishers: give up instead of holding a commit.
        params.blocked_connection_timeout = CONNECT_TIMEOUT
    if "connection_attempts" not in given:
        params.connection_attempts = 1
    params.client_properties = {"connection_name": name}
    return params


def _declare_exchange(channel):
    channel.exchange_declare(EXCHANGE, exchange_type="topic", durable=True)


class RabbitPublisher(Publisher):
    def __init__(self, url: str):
        import os

        import pika.exceptions

        super().__init__(url)
        self.errors = (pika.exceptions.AMQPError, OSError)
        self.params = parameters(url, name=f"jobs enqueue {os.uname().nodename}-{os.getpid()}")
        self._connection: Any = None  # pika's BlockingConnection and its channel, once open
        self._channel: Any = None
        self._pid = os.getpid()

    def _open(self):
        import os

        import pika

        if self._pid != os.getpid():  # forked: the socket is the parent's, leave it alone
            self._connection = self._channel = None
            self._pid = os.getpid()
        if self._channel is None or not self._channel.is_open:
            self.reset()
            self._connection = pika.BlockingConnection(self.params)
            self._channel = self._connection.channel()
            _declare_exchange(self._channel)
        return self._channel

    def send(self, queue: str, bodies: list[str]) -> None:
        import pika

        properties = pika.BasicProperties(content_type="text/plain", delivery_mode=1)
        fresh = self._channel is None
        try:
            channel = self._open()
            for body in bodies:
                channel.basic_publish(EXCHANGE, queue, body.encode(), properties)
        except self.errors:
            if fresh:
                raise
            # An idle connection the broker dropped (missed heartbeats, a restart): once again
            # on a new one before calling the broker down.
            self.reset()
            channel = self._open()
            for body in bodies:
                channel.basic_publish(EXCHANGE, queue, body.encode(), properties)

    def reset(self):
        connection, self._connection, self._channel = self._connection, None, None
        if connection is not None and connection.is_open:
            with contextlib.suppress(Exception):  # closing a broken connection: nothing to do
                connection.close()


class RabbitListener(ThreadedListener):
    thread_name = "jobs-rabbitmq"

    def bindings(self) -> list[tuple[str, str]]:
        """(AMQP queue, binding key) pairs this worker consumes."""
        if not self.queues:
            return [(ALL_QUEUES, "#")]
        return [(QUEUE_PREFIX + queue, queue) for queue in self.queues]

    def listen(self):
        import pika

        params = parameters(self.url, name=f"jobs worker {self.consumer}")
        connection = pika.BlockingConnection(params)
        try:
            channel = connection.channel()
            _declare_exchange(channel)
            for name, key in self.bindings():
                channel.queue_declare(name, durable=True, arguments=QUEUE_ARGUMENTS)
                channel.queue_bind(name, EXCHANGE, routing_key=key)
                channel.basic_consume(name, self._on_message, auto_ack=True)
            self.connected_now()
            while not self.stopping.is_set():
                connection.process_data_events(time_limit=CONSUME_SECONDS)
        finally:
            if connection.is_open:
                with contextlib.suppress(Exception):  # the broker went away meanwhile
                    connection.close()

    def _on_message(self, _channel, method, _properties, body):
        self.announce(method.routing_key, body)
