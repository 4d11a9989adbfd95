"""Redis Streams transport: a stream per queue, ids only; the row stays the record.

Enqueue XADDs (capped with MAXLEN) after commit, in the chunks of ``jobs.transports.base``.
Workers read with XREADGROUP NOACK in one consumer group, so each message wakes one worker.
"""

import contextlib
from typing import cast

from jobs.transports.base import Publisher, ThreadedListener

PREFIX = "jobs:queue:"
QUEUES_KEY = "jobs:queues"  # every queue ever announced, for workers of all queues
GROUP = "jobs-workers"
MAXLEN = 10_000
BLOCK_MS = 1000
CONNECT_TIMEOUT = 2  # seconds; what an unanswering broker host costs a commit (docs/howto)


class RedisPublisher(Publisher):
    def __init__(self, url: str):
        import redis

        super().__init__(url)
        self.errors = (redis.RedisError,)
        self.client = redis.Redis.from_url(
            url, socket_timeout=CONNECT_TIMEOUT, socket_connect_timeout=CONNECT_TIMEOUT
        )

    def send(self, queue: str, bodies: list[str]) -> None:
        pipe = self.client.pipeline(transaction=False)
        pipe.sadd(QUEUES_KEY, queue)
        for body in bodies:
            pipe.xadd(PREFIX + queue, {"ids": body}, maxlen=MAXLEN, approximate=True)
        pipe.execute()


class RedisListener(ThreadedListener):
    thread_name = "jobs-redis"

    def _streams(self, client) -> list[str]:
        queues = self.queues or sorted(q.decode() for q in client.smembers(QUEUES_KEY))
        return [PREFIX + q for q in queues]

    def listen(self):
        import redis

        client = redis.Redis.from_url(
            self.url, socket_timeout=BLOCK_MS / 1000 + 5, socket_connect_timeout=CONNECT_TIMEOUT
        )
        ready: set[str] = set()  # a new connection makes its groups again: a restart lost them
        try:
            while not self.stopping.is_set():
                streams = self._streams(client)
                for stream in set(streams) - ready:
                    with contextlib.suppress(redis.ResponseError):  # BUSYGROUP: exists already
                        client.xgroup_create(stream, GROUP, id="0", mkstream=True)
                    ready.add(stream)
                self.connected_now()
                if not streams:
                    self.stopping.wait(BLOCK_MS / 1000)
                    continue
                replies = client.xreadgroup(
                    GROUP, self.consumer, {s: ">" for s in streams}, block=BLOCK_MS, noack=True
                )
                for key, messages in cast(list, replies or []):
                    name = key.decode() if isinstance(key, bytes) else str(key)
                    for _id, fields in messages:
                        self.announce(name.removeprefix(PREFIX), fields.get(b"ids", b""))
        finally:
            client.close()
