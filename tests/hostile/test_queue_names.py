"""One rule for a queue name, wherever a name enters: enqueue, the commands, the admin, settings.

A name enqueue accepts must be one ``runworker --queues`` can select (a comma-separated list,
each name stripped, with an optional cap after a colon), and one ``jobs_health --queue`` and
the pause form take as it is.
"""

import pytest
from django.core.management import CommandError, load_command_class
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from jobs.checks import check_default_queue
from jobs.exceptions import PayloadError
from jobs.models import QueuePause, Task
from jobs.tasks import registry
from jobs.tasks.payload import MAX_QUEUE_LENGTH
from tests.hostile.values import hostile_text

ADD = "tests.testapp.tasks.add"
queue_names = st.one_of(
    hostile_text,
    st.sampled_from(["a,b", " lead", "trail ", "tab\there", "a\nb", "my queue", ",", "q" * 100]),
)


def parsed(command, option, value):
    parser = load_command_class("jobs", command).create_parser("manage.py", command)
    try:
        return parser.parse_args([option, value])
    except CommandError:
        return None


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(name=queue_names)
@example(name="a,b")
@example(name=" lead")
@example(name="tab\there")
@example(name="a\nb")
@example(name="-:")
@pytest.mark.django_db
def test_a_queue_enqueue_accepts_is_one_every_command_selects(name):
    try:
        registry.get_task(ADD).using(queue=name).enqueue(1, 2)
    except PayloadError:
        accepted = False
    else:
        accepted = True
        Task.objects.all().delete()
    worker = parsed("runworker", "--queues", name)
    health = parsed("jobs_health", "--queue", name)
    assert (health is not None) == accepted
    assert health is None or health.queue == [name]
    if accepted:
        # A name ending in a colon, or in a colon and a number, reads as a cap: such a queue is
        # selected with its cap written after it; any queue can be.
        _, colon, tail = name.rpartition(":")
        if not colon or not (tail.strip() == "" or _reads_as_number(tail)):
            assert worker.queues == [(name, None)]
        assert parsed("runworker", "--queues", f"{name}:1").queues == [(name, 1)]


def _reads_as_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("value", ["a,b", "tab\there", "a\nb", "x" * 101, "a\x00"])
@pytest.mark.django_db
def test_the_pause_form_refuses_what_is_no_queue_name(admin_client, value):
    admin_client.post("/admin/jobs/task/dashboard/pause/", {"queue": value, "action": "pause"})
    assert not QueuePause.objects.exists()


@pytest.mark.django_db
def test_the_pause_form_pauses_a_name_with_inner_spaces(admin_client):
    admin_client.post("/admin/jobs/task/dashboard/pause/", {"queue": "my queue"})
    assert list(QueuePause.objects.values_list("queue", flat=True)) == ["my queue"]


@pytest.mark.parametrize("value", ["", " ", "a,b", " default", "tab\there", "q" * 101, 5, None])
def test_a_default_queue_no_task_could_use_is_reported(settings, value):
    settings.JOBS_DEFAULT_QUEUE = value
    (error,) = check_default_queue(None)
    assert error.id == "jobs.E030"
    assert error.msg.startswith(f"JOBS_DEFAULT_QUEUE {value!r} is no queue name")


def test_a_good_default_queue_passes(settings):
    settings.JOBS_DEFAULT_QUEUE = "my queue"
    assert check_default_queue(None) == []


def test_the_rule_s_length_is_the_columns():
    assert Task._meta.get_field("queue").max_length == MAX_QUEUE_LENGTH
    assert QueuePause._meta.get_field("queue").max_length == MAX_QUEUE_LENGTH
