"""The demo's invitations, report, "my tasks" page and logins."""

from datetime import timedelta

import pytest
from django.core import mail
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from demo_project.demo import tasks as demo_tasks
from demo_project.demo.models import Contact, Invitation, Membership, Report
from jobs.execution import executor
from jobs.execution.effects import is_done
from jobs.models import Task
from jobs.states import Status
from jobs.testing import assert_enqueued, drain
from tests import helpers
from tests.factories import MemberFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_pauses(settings):
    settings.DEMO_IMPORT_CHUNK_SECONDS = 0
    settings.DEMO_REPORT_SECTION_SECONDS = 0


@pytest.fixture
def member(client):
    user = MemberFactory(username="alice")
    client.force_login(user)
    return user


# Invitations ----------------------------------------------------------------------------------


def test_invitations_are_sent_once_per_organisation_and_address(client, member):
    client.post(reverse("start-invites"), {"emails": "Ann@example.com, ben@example.com"})
    organisation = member.membership.organisation
    assert_enqueued(
        demo_tasks.send_invites,
        args=[organisation.pk, ["ann@example.com", "ben@example.com"], member.pk],
        owner=member,
        count=1,
    )
    (first,) = drain().tasks
    client.post(reverse("start-invites"), {"emails": "ann@example.com\ncid@example.com"})
    (second,) = drain().tasks

    assert first.result == {"sent": 2, "already_invited": 0}
    assert second.result == {"sent": 1, "already_invited": 1}
    assert first.progress_message == "Sent 2 of 2 invitations"
    assert second.progress_message == "Sent 1 of 2 invitations: 1 already invited"
    client.post(reverse("start-invites"), {"emails": "ann@example.com\ncid@example.com"})
    (third,) = drain().tasks
    # Not "Sent 0 of 2 invitations", which reads like a failure.
    assert third.progress_message == "Sent 0 of 2 invitations: 2 already invited"
    assert sorted(m.to[0] for m in mail.outbox) == [
        "ann@example.com",
        "ben@example.com",
        "cid@example.com",
    ]
    assert Invitation.objects.filter(organisation=organisation).count() == 3
    assert is_done(f"invite:{organisation.pk}:ann@example.com")


def test_the_same_address_may_be_invited_by_another_organisation(member):
    other = MemberFactory(username="bob")
    for user in (member, other):
        organisation = user.membership.organisation
        demo_tasks.send_invites.enqueue(organisation.pk, ["ann@example.com"], user.pk)
        assert drain().succeeded == 1
    assert len(mail.outbox) == 2


def test_an_invitation_task_that_runs_twice_sends_once(member, monkeypatch):
    """The mail server fails on the second address; the retry does not resend the first."""
    real_send = demo_tasks.send_mail
    attempts = []

    def flaky_send(**kwargs):
        attempts.append(kwargs["recipient_list"][0])
        if attempts.count("ben@example.com") == 1 and attempts[-1] == "ben@example.com":
            raise ConnectionRefusedError("mail server refused the connection")
        return real_send(**kwargs)

    monkeypatch.setattr(demo_tasks, "send_mail", flaky_send)
    organisation = member.membership.organisation
    demo_tasks.send_invites.enqueue(organisation.pk, ["ann@example.com", "ben@example.com"])
    # As at a fixed time: the suite's backoff (0.2 s) may end while a slow round runs.
    (task,) = drain(now=timezone.now()).tasks
    assert task.status == Status.RETRYING
    assert [m.to for m in mail.outbox] == [["ann@example.com"]]
    # The failed send rolled its invitation record and marker back.
    assert not Invitation.objects.filter(email="ben@example.com").exists()
    # The retry is due later: drain(with_scheduled=True) runs it now.
    (task,) = drain(with_scheduled=True).tasks
    assert task.status == Status.SUCCEEDED
    assert [m.to for m in mail.outbox] == [["ann@example.com"], ["ben@example.com"]]
    assert task.result == {"sent": 1, "already_invited": 1}


def test_bad_addresses_are_refused_before_anything_is_queued(client, member):
    response = client.post(reverse("start-invites"), {"emails": "ann@example.com, nope"})
    assert response.status_code == 302
    assert not Task.objects.exists()
    assert "“nope” is not an e-mail address." in client.get(reverse("home")).content.decode()


# Report -----------------------------------------------------------------------------------------


def test_the_report_builds_a_downloadable_file_with_progress(client, member):
    organisation = member.membership.organisation
    for email in ("a@acme.test", "b@acme.test", "c@globex.test"):
        Contact.objects.create(organisation=organisation, email=email)
    client.post(reverse("start-report"), {"sections": 5})
    (task,) = drain().tasks

    assert task.status == Status.SUCCEEDED
    assert task.progress_message == "Report ready"
    report = Report.objects.get()
    body = client.get(reverse("jobs:task-status", args=[task.pk])).json()
    url = reverse("report-download", args=[report.pk])
    assert body["result"] == {"url": url, "label": "Download the report (CSV)", "domains": 2}
    response = client.get(url)
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response.content.decode().splitlines() == [
        "domain,contacts",
        "acme.test,2",
        "globex.test,1",
        "total,3",
        "invitations sent,0",
    ]
    # The detail page shows the download link without JavaScript too.
    assert f'href="{url}"' in client.get(reverse("task-detail", args=[task.pk])).content.decode()


def test_nobody_else_downloads_the_report(client, member):
    report = Report.objects.create(owner=member, filename="r.csv", file="reports/r.csv")
    client.force_login(UserFactory(username="mallory"))
    assert client.get(reverse("report-download", args=[report.pk])).status_code == 404


def test_a_report_cancelled_while_running_stops_and_makes_no_file(client, member):
    client.post(reverse("start-report"), {"sections": 5})
    (task,) = helpers.claim("test-worker", 1, lease_seconds=30)
    client.post(reverse("jobs:task-action", args=[task.pk]), {"action": "cancel"})
    executor.run(task)
    task.refresh_from_db()
    assert task.status == Status.CANCELLED
    assert not Report.objects.exists()
    assert client.get(reverse("jobs:task-status", args=[task.pk])).json()["message"] == (
        "Cancelled."
    )


# Pages ------------------------------------------------------------------------------------------


def test_my_tasks_lists_only_my_tasks_each_with_a_live_bar(client, member):
    mine = TaskFactory(owner=member, summary="Import of mine.csv", running=True)
    TaskFactory(owner=UserFactory(username="bob"), summary="Import of bobs.csv")
    page = client.get(reverse("task-list")).content.decode()
    assert "Import of mine.csv" in page
    assert "bobs.csv" not in page
    assert page.count('role="progressbar"') == 1
    assert reverse("jobs:task-status", args=[mine.pk]) in page
    assert "/static/jobs/progress.js" in page


def test_my_tasks_says_when_each_was_queued_not_that_a_waiting_one_started(client, member):
    # It said "started 0 minutes ago" over "Pending · Waiting to start…".
    now = timezone.now()
    TaskFactory(owner=member, summary="Fresh", created_at=now - timedelta(seconds=20))
    TaskFactory(owner=member, summary="Older", created_at=now - timedelta(minutes=3))
    page = client.get(reverse("task-list")).content.decode()
    assert "started" not in page
    assert "0 minutes" not in page
    assert "queued just now" in page
    assert "queued 3\xa0minutes ago" in page


def test_another_users_task_page_is_404(client, member):
    task = TaskFactory(owner=UserFactory(username="bob"))
    assert client.get(reverse("task-detail", args=[task.pk])).status_code == 404
    assert client.get(reverse("task-detail", args=["not-a-uuid"])).status_code == 404


def test_the_prime_count_runs_from_the_home_page(client, member):
    response = client.post(reverse("start-primes"), {"limit": 100})
    (task,) = assert_enqueued(demo_tasks.count_primes, args=[100], owner=member, count=1)
    drain()
    task.refresh_from_db()
    assert response["Location"] == reverse("task-detail", args=[task.pk])
    assert task.result == {"limit": 100, "primes": 25}
    assert "25 primes below 100" in client.get(response["Location"]).content.decode()


def test_seed_demo_creates_two_users_in_two_organisations_and_a_staff_login(client):
    call_command("seed_demo", stdout=None)
    call_command("seed_demo", stdout=None)  # idempotent
    alice, bob = (Membership.objects.get(user__username=n) for n in ("alice", "bob"))
    assert alice.organisation != bob.organisation
    assert client.login(username="alice", password="alice")
    assert client.login(username="bob", password="bob")
    assert client.login(username="admin", password="admin")
