"""The RabbitMQ transport against the machine's RabbitMQ, each test in a vhost of its own.

Deleting the vhost, or closing its connections, is the broker going away mid-run without
stopping the server other runs share (``rabbitmqctl``, run as root; ``.ci/ensure-rabbitmq``).
"""

import os
import shutil
import signal
import subprocess
import time
import uuid

import pytest

from jobs.models import Task
from jobs.states import Status
from tests.conftest import WorkerProcess, wait_for
from tests.testapp import tasks
from tests.testapp.models import SideEffect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process, pytest.mark.broker]

BROKER = "amqp://guest:guest@127.0.0.1:5672/"


def rabbitmqctl(*args):
    subprocess.run(["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=60)


class VHost:
    def __init__(self):
        if shutil.which("rabbitmqctl") is None:
            pytest.fail("RabbitMQ is not installed (.ci/ensure-rabbitmq)")
        self.name = f"jobs-test-{uuid.uuid4().hex[:12]}"
        self.url = BROKER + self.name

    def add(self):
        rabbitmqctl("add_vhost", self.name)
        rabbitmqctl("set_permissions", "-p", self.name, "guest", ".*", ".*", ".*")

    def delete(self):
        rabbitmqctl("delete_vhost", self.name)

    def close_connections(self):
        rabbitmqctl("close_all_connections", "-p", self.name, "jobs test: outage")

    def channel(self):
        import pika

        connection = pika.BlockingConnection(pika.URLParameters(self.url))
        return connection, connection.channel()


@pytest.fixture
def vhost():
    host = VHost()
    host.add()
    yield host
    subprocess.run(["rabbitmqctl", "-q", "delete_vhost", host.name], capture_output=True)


def done(records) -> bool:
    pks = [record.pk for record in records]
    return Task.objects.filter(pk__in=pks, status=Status.SUCCEEDED).count() == len(pks)


def picked_up_by_the_broker(key) -> float:
    """Enqueue a task and return how long it took to finish (a 5 s poll makes it the broker's)."""
    record = tasks.record_effect.enqueue(key).record
    started = time.monotonic()
    wait_for(lambda: done([record]), timeout=10, message=f"{key} done")
    return time.monotonic() - started


def test_broker_wakes_worker_and_an_outage_loses_nothing(vhost, start_worker, settings):
    """All queues (``jobs.all``); the vhost deleted mid-run and made again."""
    settings.JOBS_TRANSPORT = vhost.url
    worker = start_worker(env={"JOBS_TRANSPORT": vhost.url, "JOBS_POLL_INTERVAL": "5"})
    wait_for(lambda: "worker started" in worker.output, timeout=20, message="worker started")
    time.sleep(1)  # its first claim is made: the next task waits for a message or the poll
    assert picked_up_by_the_broker("via-broker") < 2.5, "picked up by the poll, not the broker"

    vhost.delete()
    started = time.monotonic()
    during = [tasks.record_effect.enqueue(f"down-{i}").record for i in range(5)]
    assert time.monotonic() - started < 2, "enqueue held up by the broker's outage"
    wait_for(lambda: "broker unreachable, polling meanwhile" in worker.output, timeout=10)
    wait_for(lambda: done(during), timeout=20, message="the outage's tasks done by the poll")

    vhost.add()
    wait_for(lambda: "broker back" in worker.output, timeout=20, message="worker reconnected")
    time.sleep(1)  # past the worker's last poll, and the publisher's backoff
    tasks.record_effect.enqueue("wakes-the-publisher")  # its first publish after the outage
    time.sleep(0.5)
    assert picked_up_by_the_broker("after") < 2.5, "the broker did not wake the worker again"
    assert set(Task.objects.values_list("attempts", flat=True)) == {1}
    assert SideEffect.objects.count() == Task.objects.count() == 8


def test_closed_connections_are_opened_again(vhost, start_worker, settings):
    """Named queues (``jobs.queue.default``); every connection of the vhost closed mid-run."""
    settings.JOBS_TRANSPORT = vhost.url
    env = {"JOBS_TRANSPORT": vhost.url, "JOBS_POLL_INTERVAL": "5"}
    worker = start_worker("--queues", "default", env=env)
    wait_for(lambda: "worker started" in worker.output, timeout=20, message="worker started")
    time.sleep(1)
    assert picked_up_by_the_broker("before") < 2.5
    vhost.close_connections()  # the worker's and this process's publisher's
    wait_for(lambda: "broker back" in worker.output, timeout=20, message="worker reconnected")
    time.sleep(1)
    # The publisher finds its connection closed, opens another and sends: no poll needed.
    assert picked_up_by_the_broker("after") < 2.5
    assert "broker down" not in worker.output


def test_a_vhost_that_does_not_exist_polls_and_enqueue_commits(start_worker, settings, caplog):
    url = BROKER + f"jobs-missing-{uuid.uuid4().hex[:8]}"
    settings.JOBS_TRANSPORT = url
    worker = start_worker(env={"JOBS_TRANSPORT": url, "JOBS_POLL_INTERVAL": "0.5"})
    started = time.monotonic()
    records = [tasks.record_effect.enqueue(f"t-{i}").record for i in range(3)]
    assert time.monotonic() - started < 2, "enqueue held up by the missing vhost"
    assert "broker down, workers will poll meanwhile" in caplog.text
    assert "guest:guest" not in caplog.text, "the password is in the log"
    wait_for(lambda: done(records), timeout=20, message="tasks done by the poll")
    wait_for(lambda: "broker unreachable, polling meanwhile" in worker.output, timeout=10)


def test_the_start_line_names_the_broker_without_its_password(vhost, runworker):
    done = runworker("--burst", env={"JOBS_TRANSPORT": vhost.url})
    assert done.returncode == 0, done.stderr
    [start] = [line for line in done.stderr.splitlines() if "worker started" in line]
    masked = f"amqp://guest:***@127.0.0.1:5672/{vhost.name}"
    assert start.endswith(f" transport=rabbitmq broker={masked}"), start
    assert "guest:guest" not in done.stderr


def test_a_bad_url_is_a_check_error_at_start(runworker):
    result = runworker("--burst", env={"JOBS_TRANSPORT": "amqp://guest@127.0.0.1:port/"})
    assert result.returncode != 0
    assert "jobs.E050" in result.stderr


def test_messages_that_are_not_ids_duplicated_or_stale_change_nothing(
    vhost, start_worker, settings
):
    """The row decides: ids of a cancelled task or of one done already run nothing, and a
    message that is not ids wakes nobody and breaks nothing."""
    import pika

    from jobs.admin.actions import cancel
    from jobs.transports import rabbitmq

    settings.JOBS_TRANSPORT = vhost.url
    cancelled = tasks.record_effect.enqueue("cancelled", run_after=3600).record
    cancel(Task.objects.filter(pk=cancelled.pk))
    worker = start_worker(env={"JOBS_TRANSPORT": vhost.url, "JOBS_POLL_INTERVAL": "5"})
    wait_for(lambda: "worker started" in worker.output, timeout=20, message="worker started")
    time.sleep(1)
    first = tasks.record_effect.enqueue("once").record
    wait_for(lambda: done([first]), timeout=10)
    connection, channel = vhost.channel()
    hostile = [b"", b"not-a-task", b"\xff\xfe\x00", b"1,2,3", b"x" * 1_000_000]
    for _ in range(3):
        for body in [str(first.pk).encode(), str(cancelled.pk).encode(), *hostile]:
            channel.basic_publish(rabbitmq.EXCHANGE, "default", body, pika.BasicProperties())
    connection.close()
    time.sleep(2)
    assert Task.objects.get(pk=first.pk).attempts == 1
    assert Task.objects.get(pk=cancelled.pk).status == Status.CANCELLED
    assert picked_up_by_the_broker("still-listening") < 2.5
    assert sorted(SideEffect.objects.values_list("key", flat=True)) == ["once", "still-listening"]
    assert worker.process.poll() is None


def test_a_huge_burst_sends_at_most_64_messages_and_the_queue_is_bounded(vhost, settings):
    from jobs.transports import base, rabbitmq

    settings.JOBS_TRANSPORT = vhost.url
    connection, channel = vhost.channel()
    rabbitmq._declare_exchange(channel)
    name, key = rabbitmq.RabbitListener(vhost.url, ["default"]).bindings()[0]
    channel.queue_declare(name, durable=True, arguments=rabbitmq.QUEUE_ARGUMENTS)
    channel.queue_bind(name, rabbitmq.EXCHANGE, routing_key=key)

    ids = tasks.record_effect.enqueue_many([((f"bulk-{i}",), {}) for i in range(10_000)])
    assert len(ids) == 10_000
    assert Task.objects.count() == 10_000
    wait_for(
        lambda: (
            channel.queue_declare(name, passive=True).method.message_count
            == base.MESSAGES_PER_COMMIT
        ),
        timeout=10,
        message="64 messages",
    )
    # Nobody consumes (the workers of the queue are gone): it stops at x-max-length.
    for _ in range(11_000):
        channel.basic_publish(rabbitmq.EXCHANGE, "default", str(uuid.uuid4()).encode())
    wait_for(
        lambda: (
            channel.queue_declare(name, passive=True).method.message_count
            == rabbitmq.QUEUE_ARGUMENTS["x-max-length"]
        ),
        timeout=10,
        message="the queue at its bound",
    )
    connection.close()


def test_the_broker_going_away_during_a_sigterm_grace_loses_nothing(
    vhost, worker_env, tmp_path, runworker, settings
):
    """SIGTERM to the worker's whole group, then the vhost deleted (its connections closed)
    within the grace: the running tasks still finish and are recorded, the worker exits within
    its grace, and what it had not started waits for the next worker once the broker is back."""
    settings.JOBS_TRANSPORT = vhost.url
    grace = 30
    env = {
        **worker_env,
        "JOBS_TRANSPORT": vhost.url,
        "JOBS_POLL_INTERVAL": "5",
        "JOBS_SHUTDOWN_GRACE": str(grace),
    }
    records = [tasks.sleep_then_effect.enqueue(f"grace-{i}", 8.0).record for i in range(6)]
    worker = WorkerProcess(
        ["--concurrency", "2"], env, tmp_path / "worker.log", start_new_session=True
    )
    deleted = False
    try:
        wait_for(
            lambda: Task.objects.filter(status=Status.RUNNING).count() == 2,
            timeout=30,
            message="two tasks running",
        )
        running = set(Task.objects.filter(status=Status.RUNNING).values_list("pk", flat=True))
        os.killpg(worker.process.pid, signal.SIGTERM)  # the supervisor and every child
        stopped_at = time.monotonic()
        vhost.delete()
        deleted = True
        # The tasks take 8 s: rabbitmqctl, slow to start on a busy machine, is done before them.
        assert worker.process.poll() is None, "the worker was gone before the broker"
        assert worker.wait(grace + 10) == 0, worker.output
        assert time.monotonic() - stopped_at < grace, worker.output
    finally:
        worker.stop()
        if deleted:
            vhost.add()  # the broker back, whatever happened
    output = (tmp_path / "worker.log").read_text()
    assert "grace period over" not in output, output
    rows = Task.objects.filter(pk__in=[record.pk for record in records])
    assert not rows.filter(status=Status.RUNNING).exists()
    finished = set(rows.filter(status=Status.SUCCEEDED).values_list("pk", flat=True))
    assert running <= finished, output
    assert set(SideEffect.objects.values_list("key", flat=True)) == {
        record.args[0] for record in records if record.pk in finished
    }
    left = rows.exclude(pk__in=finished)
    assert set(left.values_list("status", "attempts")) <= {(Status.PENDING, 0)}, output

    done = runworker("--burst", env={"JOBS_TRANSPORT": vhost.url})
    assert done.returncode == 0, done.stderr
    assert set(rows.values_list("status", "attempts")) == {(Status.SUCCEEDED, 1)}
    assert SideEffect.objects.count() == len(records)
