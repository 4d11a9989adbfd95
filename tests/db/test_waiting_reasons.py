"""Why a task waits (jobs.metrics.waiting): the admin's lines, the dashboard, the owner's words."""

import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs.maintenance import pausing
from jobs.metrics import waiting
from jobs.states import Status
from tests.factories import TaskFactory, UserFactory
from tests.helpers import staff

pytestmark = pytest.mark.django_db

KEY = "account:42"


def held_task(key=KEY, limit=1, **fields):
    TaskFactory(running=True, concurrency_key=key, concurrency_limit=limit)
    return TaskFactory(concurrency_key=key, concurrency_limit=limit, **fields)


def status_of(client, task):
    return json.loads(client.get(reverse("jobs:task-status", args=[task.pk])).content)


@pytest.fixture
def operator(client):
    client.force_login(staff("view_task", username="operator"))
    return client


def test_due_later_snoozed_and_retry():
    now = timezone.now()
    snoozed = TaskFactory(run_after=now + timedelta(seconds=4))
    reason = waiting.why_waiting(snoozed, now=now)
    assert reason.reasons == [waiting.DUE_LATER]
    assert waiting.operator_lines(reason)[0].endswith("(in 4 s)")
    retry = TaskFactory(status=Status.RETRYING, run_after=now + timedelta(minutes=2))
    assert waiting.operator_lines(waiting.why_waiting(retry, now=now))[0].startswith("Retry due")


def test_held_by_its_key_only_at_the_limit(django_assert_max_num_queries):
    task = held_task()
    with django_assert_max_num_queries(2):
        reason = waiting.why_waiting(task)
    assert reason.reasons == [waiting.CONCURRENCY]
    assert f"Held by concurrency key {KEY}: 1 running of 1" in waiting.operator_lines(reason)
    roomy = held_task(key="account:7", limit=2)
    assert waiting.why_waiting(roomy).reasons == []


def test_paused_queue_and_expiry():
    task = TaskFactory(queue="imports", expires_at=timezone.now() + timedelta(minutes=4, seconds=1))
    now = timezone.now()
    pausing.pause("imports")
    reason = waiting.why_waiting(task, now=now)
    assert reason.reasons == [waiting.QUEUE_PAUSED]
    lines = waiting.operator_lines(reason)
    assert "Queue imports paused" in lines
    assert any(line.startswith("Expires in 4 min") for line in lines)


def test_not_waiting_tasks_have_no_reason(django_assert_num_queries):
    task = TaskFactory(running=True, concurrency_key=KEY, concurrency_limit=1)
    with django_assert_num_queries(0):
        assert waiting.why_waiting(task) is None


def test_admin_task_page_says_why_and_escapes_the_key(operator):
    hostile = "<script>alert(1)</script>"
    task = held_task(key=hostile)
    page = operator.get(reverse("admin:jobs_task_change", args=[task.pk])).content.decode()
    assert "Held by concurrency key &lt;script&gt;alert(1)&lt;/script&gt;: 1 running of 1" in page
    assert hostile not in page


def test_changelist_reason_column_reads_the_page_at_once(operator, django_assert_max_num_queries):
    for number in range(3):
        held_task(key=f"account:{number}")
    TaskFactory(concurrency_key="<b>x</b>", concurrency_limit=1)
    TaskFactory(concurrency_key="<b>x</b>", concurrency_limit=1, running=True)
    url = reverse("admin:jobs_task_changelist")
    operator.get(url)  # warm the session and content types
    with django_assert_max_num_queries(12) as few:
        page = operator.get(url).content.decode()
    for number in range(20):
        held_task(key=f"more:{number}")
    with django_assert_max_num_queries(len(few.captured_queries)):
        operator.get(url)
    assert "held by account:0 (1/1)" in page
    assert "held by &lt;b&gt;x&lt;/b&gt; (1/1)" in page


def test_dashboard_counts_held_tasks_and_their_keys(operator):
    held_task()
    TaskFactory(concurrency_key=KEY, concurrency_limit=1)
    held_task(key="account:7", limit=2)  # room left: not held
    TaskFactory(run_after=timezone.now() + timedelta(hours=1), concurrency_key=KEY)  # not due
    counts = waiting.held_by_keys()
    assert counts.held == 2
    assert [(key.key, key.waiting, key.running, key.limit) for key in counts.keys] == [
        (KEY, 2, 1, 1)
    ]
    page = operator.get(reverse("admin:jobs_task_dashboard")).content.decode()
    assert "2 due tasks held by 1 key" in page
    assert KEY in page


def test_owner_reads_plain_words_never_the_key(client):
    owner = UserFactory(username="owner")
    secret = "account:other-customer-99"
    task = held_task(key=secret, owner=owner, expires_at=timezone.now() + timedelta(minutes=10))
    client.force_login(owner)
    body = status_of(client, task)
    assert body["waiting"]["reasons"] == ["concurrency"]
    assert "concurrency" not in body["waiting"] or "key" not in body["waiting"]["concurrency"]
    assert body["message"].startswith("Waiting: another task of the same kind is running")
    assert "Will be cancelled if not started by" in body["message"]
    assert secret not in json.dumps(body)
    assert body["waiting"]["expires_at"]


def test_viewer_sees_the_key(operator):
    task = held_task()
    body = status_of(operator, task)
    assert body["waiting"]["concurrency"] == {"key": KEY, "running": 1, "limit": 1}


def test_others_still_get_404(client):
    task = held_task(owner=UserFactory(username="owner"))
    assert client.get(reverse("jobs:task-status", args=[task.pk])).status_code == 404
    client.force_login(UserFactory(username="someone"))
    assert client.get(reverse("jobs:task-status", args=[task.pk])).status_code == 404


def test_snoozed_owner_message_keeps_its_words(client):
    owner = UserFactory(username="owner")
    task = TaskFactory(owner=owner, run_after=timezone.now() + timedelta(minutes=1))
    client.force_login(owner)
    body = status_of(client, task)
    assert body["message"].startswith("Waiting until ")
    assert body["waiting"]["reasons"] == ["due_later"]
    assert body["waiting"]["until"] == body["waiting_until"]


def test_unprintable_characters_of_a_key_are_shown_escaped():
    # PostgreSQL cannot store a NUL: the words are checked on a reason built in memory.
    reason = waiting.Waiting(now=timezone.now(), key="a\x00b\n<i>", running=1, limit=1)
    line = waiting.operator_lines(reason)[0]
    assert line == "Held by concurrency key a\\x00b\\n<i>: 1 running of 1"
    assert "\x00" not in waiting.compact_text(reason)
    assert waiting.HeldKey(key="x\x00", waiting=1, running=1, limit=1).shown == "x\\x00"


def test_admin_page_says_due_and_expiry_and_the_list_says_paused(operator):
    soon = timezone.now() + timedelta(minutes=5)
    task = TaskFactory(queue="imports", run_after=soon, expires_at=soon + timedelta(minutes=10))
    page = operator.get(reverse("admin:jobs_task_change", args=[task.pk])).content.decode()
    assert "Due at " in page
    assert "Expires in " in page
    pausing.pause("imports")
    listing = operator.get(reverse("admin:jobs_task_changelist")).content.decode()
    assert "Pending (queue paused)" in listing
    finished = TaskFactory(succeeded=True)
    page = operator.get(reverse("admin:jobs_task_change", args=[finished.pk])).content.decode()
    assert "Held by" not in page
    assert "Due at" not in page
