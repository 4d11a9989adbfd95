"""Redis Streams transport: a stream per queue, ids only; the row stays the record.

Enqueue XADDs (capped with MAXLEN) after commit, at most ``IDS_PER_MESSAGE`` ids per message
and ``MESSAGES_PER_COMMIT`` messages per queue per commit: a bulk enqueue of 10,000 tasks
sends 64 messages, and the ids past the cap are found by the claim the first message causes
(the claim takes due rows, not the ids). Workers read with XREADGROUP NOACK in one consumer
group, so each message wakes one worker. A reader thread turns messages into a byte on a
pipe that the worker's wait watches, like the LISTEN socket of the database transport.
"""

import contextlib
import logging
import os
import threading

logger = logging.getLogger(__name__)

PREFIX = "jobs:queue:"
QUEUES_KEY = "jobs:queues"  # every queue ever announced, for workers of all queues
GROUP = "jobs-workers"
IDS_PER_MESSAGE = 100
MESSAGES_PER_COMMIT = 64
MAXLEN = 10_000
BLOCK_MS = 1000

_clients: dict[str, object] = {}
_down = False  # the broker failed the last publish: log an outage once, and its end once


def _client(url: str):
    import redis

    if url not in _clients:
        _clients[url] = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    return _clients[url]


def publish(url: str, queue: str, ids: list[str]) -> None:
    """XADD ``ids`` to the queue's stream; a broker fault is logged (once), never raised: the
    worker's poll finds the rows anyway."""
    global _down
    import redis

    chunks = [ids[at : at + IDS_PER_MESSAGE] for at in range(0, len(ids), IDS_PER_MESSAGE)]
    try:
        pipe = _client(url).pipeline(transaction=False)
        pipe.sadd(QUEUES_KEY, queue)
        for chunk in chunks[:MESSAGES_PER_COMMIT]:
            pipe.xadd(PREFIX + queue, {"ids": ",".join(chunk)}, maxlen=MAXLEN, approximate=True)
        pipe.execute()
    except redis.RedisError as exc:
        if not _down:
            logger.warning("broker down, workers will poll meanwhile error=%s", exc)
        _down = True
        return
    if _down:
        logger.info("broker back url=%s", url)
    _down = False


class RedisListener:
    """The worker's side: the same face as ``jobs.worker.notify.Listener``."""

    def __init__(self, url: str, queues):
        self.url = url
        self.queues = list(queues)
        self.consumer = f"{os.uname().nodename}-{os.getpid()}"
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._read_fd, False)
        self._announced: set[str] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.connection = self  # stable: the worker's selector is built once for it

    supported = True

    @property
    def connected(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def fileno(self):
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="jobs-redis", daemon=True)
            self._thread.start()
        return self._read_fd

    def _streams(self, client) -> list[str]:
        queues = self.queues or sorted(q.decode() for q in client.smembers(QUEUES_KEY))
        return [PREFIX + q for q in queues]

    def _run(self):
        import redis

        client = redis.Redis.from_url(self.url, socket_timeout=BLOCK_MS / 1000 + 5)
        ready: set[str] = set()
        failing = False
        while not self._stopping.is_set():
            try:
                streams = self._streams(client)
                for stream in set(streams) - ready:
                    with contextlib.suppress(redis.ResponseError):  # BUSYGROUP: exists already
                        client.xgroup_create(stream, GROUP, id="0", mkstream=True)
                    ready.add(stream)
                if not streams:
                    self._stopping.wait(BLOCK_MS / 1000)
                    continue
                replies = client.xreadgroup(
                    GROUP, self.consumer, {s: ">" for s in streams}, block=BLOCK_MS, noack=True
                )
                if failing:
                    logger.info("broker back url=%s", self.url)
                    failing = False
            except redis.RedisError as exc:
                if not failing:
                    logger.warning("broker unreachable, polling meanwhile error=%s", exc)
                failing = True
                ready.clear()  # a restarted server lost its groups
                self._stopping.wait(1.0)  # NOGROUP after a restart lands here too
                continue
            if replies:
                with self._lock:
                    for key, _messages in replies:  # type: ignore[str-unpack]
                        name = key.decode() if isinstance(key, bytes) else str(key)
                        self._announced.add(name.removeprefix(PREFIX))
                with contextlib.suppress(BlockingIOError):
                    os.write(self._write_fd, b"!")

    def drain(self) -> set[str]:
        with contextlib.suppress(BlockingIOError):
            os.read(self._read_fd, 4096)
        with self._lock:
            announced, self._announced = self._announced, set()
        return announced

    def close(self):
        self._stopping.set()
