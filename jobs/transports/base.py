"""What the broker transports share: the message format, the publisher's outage handling, and
the worker's listener thread with its reconnection backoff.

A message carries up to ``IDS_PER_MESSAGE`` task ids joined by commas; at most
``MESSAGES_PER_COMMIT`` are sent per queue per commit: a bulk enqueue of 10,000 tasks sends 64
messages, and the ids past the cap are found by the claim the first message causes (the claim
takes due rows, not the ids). A message that is not a list of ids wakes nobody.
"""

import contextlib
import logging
import os
import random
import threading
import time
import uuid

logger = logging.getLogger(__name__)

IDS_PER_MESSAGE = 100
MESSAGES_PER_COMMIT = 64
MAX_MESSAGE_BYTES = IDS_PER_MESSAGE * 37  # 100 UUIDs and their commas


def chunks(ids) -> list[str]:
    """The bodies to send for ``ids``: at most ``MESSAGES_PER_COMMIT`` of ``IDS_PER_MESSAGE``."""
    ids = [str(task_id) for task_id in ids]
    return [
        ",".join(ids[at : at + IDS_PER_MESSAGE])
        for at in range(0, min(len(ids), IDS_PER_MESSAGE * MESSAGES_PER_COMMIT), IDS_PER_MESSAGE)
    ]


def parse_ids(body: bytes | str) -> list[str] | None:
    """The task ids of a message body; None when it is anything else (it then wakes nobody)."""
    if len(body) > MAX_MESSAGE_BYTES:
        return None
    try:
        text = body.decode("ascii") if isinstance(body, bytes) else body
        return [str(uuid.UUID(part)) for part in text.split(",")]
    except (UnicodeDecodeError, ValueError):
        return None


class Backoff:
    """Waits between attempts after failures: from ``first`` doubling to ``cap``, with jitter
    (a fleet that lost its broker together does not reconnect in step)."""

    def __init__(self, first: float = 0.5, cap: float = 5.0):
        self.first, self.cap, self.failures = first, cap, 0

    def next(self) -> float:
        delay = min(self.cap, self.first * 2**self.failures)
        self.failures += 1
        return delay * random.uniform(0.8, 1.0)

    def reset(self):
        self.failures = 0


class Publisher:
    """Sends a queue's ids after commit, for one broker URL in one process; never raises.

    A failure is logged once (and the broker's return once), and for the next backoff delay
    (0.5 s doubling to 5 s) publishes are skipped: a broker host that does not answer then costs
    one commit in each delay its connect timeout, not every commit. The rows are not lost: the
    workers' poll finds them.
    """

    errors: tuple[type[BaseException], ...] = ()

    def __init__(self, url: str):
        self.url = url
        self.backoff = Backoff()
        self._down = False
        self._retry_at = 0.0
        self._lock = threading.Lock()  # clients like pika's are not thread-safe

    def send(self, queue: str, bodies: list[str]) -> None:
        raise NotImplementedError

    def reset(self) -> None:
        """Forget the connection after a failure; the next send opens another."""

    def publish(self, queue: str, ids) -> None:
        bodies = chunks(ids)
        if not bodies or time.monotonic() < self._retry_at:
            return
        with self._lock:
            try:
                self.send(queue, bodies)
            except Exception as exc:  # after the commit: never raise (self.errors and the rest)
                self.reset()
                self._retry_at = time.monotonic() + self.backoff.next()
                if not self._down:
                    logger.warning(
                        "broker down, workers will poll meanwhile url=%s error=%s",
                        redact(self.url),
                        str(exc) or type(exc).__name__,
                    )
                self._down = True
                return
            self.backoff.reset()
            if self._down:
                logger.info("broker back url=%s", redact(self.url))
            self._down = False


def redact(url: str) -> str:
    """``url`` without its password, for the log."""
    scheme, sep, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not sep or not at or ":" not in credentials:
        return url
    return f"{scheme}://{credentials.split(':', 1)[0]}:***@{host}"


class ThreadedListener:
    """The worker's side: the face of ``jobs.worker.notify.Listener`` over a broker.

    A thread of its own runs ``listen`` (connect, subscribe, then call ``announce`` for each
    message until ``stopping`` is set) and turns messages into a byte on a pipe that the worker's
    wait watches, like the LISTEN socket of the database transport. When ``listen`` fails the
    outage is logged once (the worker polls meanwhile: ``JOBS_POLL_INTERVAL``), and it is called
    again after a backoff of 0.5 s doubling to 5 s; ``connected_now`` logs the broker's return.
    """

    # Nothing proven of the task database's sessions (no LISTEN probe): the claim is prepared
    # only where the database OPTIONS set a prepare_threshold (jobs.worker.claimer).
    keeps_sessions = False
    supported = True
    wakes_all = False  # a message wakes one worker of its queue (jobs.worker.claimer.notified)
    thread_name = "jobs-broker"

    def __init__(self, url: str, queues):
        self.url = url
        self.queues = list(queues)
        self.consumer = f"{os.uname().nodename}-{os.getpid()}"
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._read_fd, False)
        os.set_blocking(self._write_fd, False)
        self._announced: set[str] = set()
        self._lock = threading.Lock()
        self.stopping = threading.Event()
        self.backoff = Backoff()
        self._failing = False
        self._thread: threading.Thread | None = None
        self.connection = self  # stable: the worker's selector is built once for it

    def listen(self) -> None:
        raise NotImplementedError

    @property
    def connected(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def fileno(self):
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
            self._thread.start()
        return self._read_fd

    def _run(self):
        while not self.stopping.is_set():
            try:
                self.listen()
            except Exception as exc:  # the thread must outlive any fault: the worker polls
                if not self._failing:
                    logger.warning(
                        "broker unreachable, polling meanwhile url=%s error=%s",
                        redact(self.url),
                        str(exc) or type(exc).__name__,
                    )
                self._failing = True
                self.stopping.wait(self.backoff.next())

    def connected_now(self):
        """Called by ``listen`` once subscribed."""
        self.backoff.reset()
        if self._failing:
            logger.info("broker back url=%s", redact(self.url))
        self._failing = False

    def announce(self, queue: str, body: bytes | str) -> None:
        """Wake the worker for ``queue`` if ``body`` names tasks; ignore it otherwise."""
        if parse_ids(body) is None:
            logger.debug("broker message ignored, not task ids queue=%s body=%.80r", queue, body)
            return
        with self._lock:
            self._announced.add(queue)
        with contextlib.suppress(BlockingIOError):  # a byte is waiting already
            os.write(self._write_fd, b"!")

    def drain(self) -> set[str]:
        with contextlib.suppress(BlockingIOError):
            os.read(self._read_fd, 4096)
        with self._lock:
            announced, self._announced = self._announced, set()
        return announced

    def close(self):
        self.stopping.set()
