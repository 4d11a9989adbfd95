"""JOBS_TRANSPORT: its forms, jobs.E050 for a bad one and jobs.E051 for an unknown key of its
dict form; the message format of the brokers."""

import uuid

import pytest

from jobs import transports
from jobs.checks import check_transport
from jobs.transports import base

AMQP = "amqp://guest:guest@127.0.0.1:5672/%2F"


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        (None, ("database", None)),
        ("database", ("database", None)),
        ("redis://h:6379/0", ("redis", "redis://h:6379/0")),
        ({"BACKEND": "redis", "URL": "redis://h/1"}, ("redis", "redis://h/1")),
        ({"BACKEND": "database"}, ("database", None)),
        (AMQP, ("rabbitmq", AMQP)),
        ("amqps://u:p@h/vhost", ("rabbitmq", "amqps://u:p@h/vhost")),
        ({"BACKEND": "rabbitmq", "URL": AMQP}, ("rabbitmq", AMQP)),
    ],
)
def test_forms(setting, expected, settings):
    assert transports.parse(setting) == expected
    settings.JOBS_TRANSPORT = setting
    assert check_transport() == []


@pytest.mark.parametrize(
    "setting",
    [
        "kafka://x",
        {"BACKEND": "redis"},
        {"BACKEND": "mq", "URL": "x"},
        5,
        ["redis"],
        {"BACKEND": "rabbitmq", "URL": "redis://h/0"},
        "amqp://guest:guest@127.0.0.1:notaport/",
        "amqp://guest@[::1/",
        "amqp://h/?heartbeat=often",
        "redis://127.0.0.1:notaport/0",
        "redis://127.0.0.1:99999/0",
        {"BACKEND": "redis", "URL": "redis://h:6379/0?socket_timeout=soon"},
        "redis://h:6379/0?bogus=1",
        "rediss://h:6379/0?ssl_cert_reqs=maybe",
    ],
)
def test_bad_setting_is_E050(setting, settings):
    settings.JOBS_TRANSPORT = setting
    [error] = check_transport()
    assert error.id == "jobs.E050"


@pytest.mark.parametrize(
    "key", ["URLL", "url", "STREAM", "strem", "", "X\x00Y", "\ud800", 5, ("URL",), "K" * 10_000]
)
def test_an_unknown_key_of_the_dict_form_is_E051(key, settings):
    settings.JOBS_TRANSPORT = {"BACKEND": "redis", "URL": "redis://h:6379/0", key: "x"}
    [error] = check_transport()
    assert error.id == "jobs.E051"
    assert repr(key)[:80] in error.msg
    assert "BACKEND, URL" in error.msg
    assert len(error.msg) < 300


def test_a_misspelt_url_key_is_reported_with_what_it_breaks(settings):
    """The typo explains the E050 that follows it: both are reported, the password masked."""
    settings.JOBS_TRANSPORT = {"BACKEND": "rabbitmq", "URLL": "amqp://u:S3cret@h/"}
    errors = check_transport()
    assert [error.id for error in errors] == ["jobs.E051", "jobs.E050"]
    assert "'URLL'" in errors[0].msg
    assert "BACKEND 'rabbitmq' needs a URL" in errors[1].msg  # not "BACKEND must be ..."
    assert all("S3cret" not in error.msg for error in errors)


def test_every_unknown_key_is_named(settings):
    settings.JOBS_TRANSPORT = {"BACKEND": "database", "strem": 1, "urll": 2}
    assert [error.msg.split("'")[1] for error in check_transport()] == ["strem", "urll"]


def test_rabbitmq_timeouts_are_bounded_unless_the_url_says():
    from jobs.transports.rabbitmq import CONNECT_TIMEOUT, parameters

    bounded = parameters(AMQP, name="t")
    assert (bounded.socket_timeout, bounded.connection_attempts) == (CONNECT_TIMEOUT, 1)
    assert bounded.blocked_connection_timeout == CONNECT_TIMEOUT
    assert parameters(AMQP + "?socket_timeout=7", name="t").socket_timeout == 7


def test_chunks_cap_the_messages_of_a_commit():
    ids = [uuid.uuid4() for _ in range(10_000)]
    bodies = base.chunks(ids)
    assert len(bodies) == base.MESSAGES_PER_COMMIT
    assert all(len(base.parse_ids(body)) == base.IDS_PER_MESSAGE for body in bodies)
    assert base.chunks([]) == []
    assert base.parse_ids(base.chunks(ids[:3])[0]) == [str(i) for i in ids[:3]]


@pytest.mark.parametrize(
    "body", [b"", b"not-a-task", b"\xff\xfe", b"1,2,3", str(uuid.uuid4()).encode() * 200]
)
def test_a_message_that_is_not_ids_is_refused(body):
    assert base.parse_ids(body) is None


@pytest.mark.parametrize(
    "setting",
    [
        "amqp://jobs:S3cret@127.0.0.1:abc/%2F",
        "redis://u:S3cret@127.0.0.1:notaport/0",
        {"BACKEND": "rabbitmq", "URL": "redis://u:S3cret@h/0"},
        {"BACKEND": "redis", "URL": "redis://u:S3cret@h:99999/0"},
    ],
)
def test_E050_does_not_print_the_password(setting, settings):
    settings.JOBS_TRANSPORT = setting
    [error] = check_transport()
    assert "S3cret" not in error.msg
    assert ":***@" in error.msg


def test_passwords_stay_out_of_the_log():
    assert base.redact("amqp://guest:secret@h:5672/v") == "amqp://guest:***@h:5672/v"
    assert base.redact("redis://h:6379/0") == "redis://h:6379/0"


def test_backoff_doubles_to_its_cap_and_resets():
    backoff = base.Backoff(first=0.5, cap=5.0)
    delays = [backoff.next() for _ in range(6)]
    assert 0.4 <= delays[0] <= 0.5
    assert 4.0 <= delays[-1] <= 5.0
    assert delays == sorted(delays[:4]) + delays[4:]
    backoff.reset()
    assert backoff.next() <= 0.5
