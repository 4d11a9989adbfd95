"""The Redis Streams transport against a redis-server of the test's own, killed mid-run."""

import shutil
import socket
import subprocess
import time

import pytest

from jobs.models import Task
from jobs.states import Status
from tests.conftest import wait_for
from tests.testapp import tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process, pytest.mark.broker]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    def __init__(self, tmp_path):
        if shutil.which("redis-server") is None:
            pytest.fail("redis-server is not installed (apt-get install redis-server)")
        self.port, self.dir, self.process = _free_port(), tmp_path, None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self):
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--dir", str(self.dir), "--save", ""],
            stdout=subprocess.DEVNULL,
        )
        import redis

        wait_for(lambda: _pings(redis.Redis.from_url(self.url)), timeout=10, message="redis up")

    def kill(self):
        assert self.process is not None
        self.process.kill()
        self.process.wait()


# DEBUG: the worker logs each claim ("claimed count=..."), so a test can wait for its first one.
IDLE_WORKER_ENV = {"JOBS_POLL_INTERVAL": "5", "JOBS_LOG_LEVEL": "DEBUG"}


def start_idle_worker(start_worker, url):
    """A worker on ``url`` with a long poll, returned once its first claim is made (it found
    nothing): a task enqueued after is picked up by the broker's message, not by that claim."""
    worker = start_worker(env={"JOBS_TRANSPORT": url, **IDLE_WORKER_ENV})
    wait_for(lambda: "claimed count=" in worker.output, timeout=30, message="its first claim")
    return worker


def _pings(client) -> bool:
    import redis

    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


@pytest.fixture
def redis_server(tmp_path):
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.kill()


def test_broker_wakes_worker_and_a_restart_loses_nothing(redis_server, start_worker, settings):
    settings.JOBS_TRANSPORT = redis_server.url
    # A long poll: a pickup within it came from the broker.
    # Its consumer group needs no wait: made from id 0, it reads what came before it too.
    start_idle_worker(start_worker, redis_server.url)
    first = tasks.record_effect.enqueue("via-broker").record
    started = time.monotonic()
    wait_for(lambda: Task.objects.get(pk=first.pk).status == Status.SUCCEEDED, timeout=10)
    assert time.monotonic() - started < 2.5, "picked up by the poll, not the broker"

    redis_server.kill()
    during = [tasks.record_effect.enqueue(f"down-{i}").record for i in range(5)]  # never fails
    redis_server.start()
    after = tasks.record_effect.enqueue("after").record
    wait_for(
        lambda: (
            Task.objects.filter(pk__in=[t.pk for t in [*during, after]])
            .exclude(status=Status.SUCCEEDED)
            .count()
            == 0
        ),
        timeout=30,
        message="every task of the outage done",
    )


def test_duplicated_and_stale_messages_change_nothing(redis_server, start_worker, settings):
    """The row decides: ids of a cancelled task, or of one already done, run nothing."""
    import redis

    from jobs.admin.actions import cancel
    from jobs.transports import redis_streams

    settings.JOBS_TRANSPORT = redis_server.url
    cancelled = tasks.record_effect.enqueue("cancelled", run_after=3600).record
    cancel(Task.objects.filter(pk=cancelled.pk))
    start_idle_worker(start_worker, redis_server.url)
    done = tasks.record_effect.enqueue("once").record
    wait_for(lambda: Task.objects.get(pk=done.pk).status == Status.SUCCEEDED, timeout=10)
    client = redis.Redis.from_url(redis_server.url)
    for _ in range(3):  # duplicates of both, and a message naming no task at all
        for ids in ([str(done.pk)], [str(cancelled.pk)], ["not-a-task"]):
            client.xadd(redis_streams.PREFIX + "default", {"ids": ",".join(ids)})
    time.sleep(2)
    assert Task.objects.get(pk=done.pk).attempts == 1
    assert Task.objects.get(pk=cancelled.pk).status == Status.CANCELLED
    from tests.testapp.models import SideEffect

    assert list(SideEffect.objects.values_list("key", flat=True)) == ["once"]


def test_bulk_enqueue_sends_at_most_64_messages(redis_server, settings):
    import redis

    from jobs.transports import base, redis_streams

    settings.JOBS_TRANSPORT = redis_server.url
    ids = tasks.record_effect.enqueue_many([((f"bulk-{i}",), {}) for i in range(10_000)])
    client = redis.Redis.from_url(redis_server.url)
    assert len(ids) == 10_000
    assert client.xlen(redis_streams.PREFIX + "default") == base.MESSAGES_PER_COMMIT
