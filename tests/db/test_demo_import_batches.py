"""The demo's multi-file import: one batch, one bar, one e-mail listing what each file did."""

import re

import pytest
from django.contrib.auth.models import Permission
from django.core import mail
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils.datastructures import MultiValueDict

import jobs
from demo_project.demo import batches
from demo_project.demo import tasks as demo_tasks
from demo_project.demo.forms import MAX_FILES, UploadForm
from demo_project.demo.models import Contact, Notification, Upload
from jobs import transitions
from jobs.models import Task, Workflow
from jobs.states import Status
from jobs.testing import drain
from tests.factories import MemberFactory, UserFactory

pytestmark = pytest.mark.django_db

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64)


def csv_file(name, rows=3, broken=()):
    prefix = re.sub(r"\W", "", name.split(".")[0])[:20] or "person"
    lines = ["email,name", *broken]
    lines += [f"{prefix}{i}@example.com,Person {i}" for i in range(rows)]
    return SimpleUploadedFile(name, ("\n".join(lines) + "\n").encode(), content_type="text/csv")


@pytest.fixture(autouse=True)
def _no_pauses(settings):
    settings.DEMO_IMPORT_CHUNK_SECONDS = 0


@pytest.fixture
def member(client):
    user = MemberFactory(username="alice")
    client.force_login(user)
    return user


def upload(client, *files):
    return client.post(reverse("start-import"), {"file": list(files)})


def messages_of(client, response):
    return client.get(response["Location"]).content.decode() if response.status_code == 302 else ""


# The batch ------------------------------------------------------------------------------------


def test_three_files_make_one_batch_and_one_email_listing_each_file(client, member):
    response = upload(
        client,
        csv_file("north.csv", rows=5),
        csv_file("south.csv", rows=2, broken=["nobody,No One", "x@y.com,a,b"]),
        csv_file("west.csv", rows=1),
    )
    workflow = Workflow.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("import-batch", args=[workflow.pk])
    assert (workflow.kind, workflow.owner) == ("batch", member)
    assert workflow.summary == "Import of 3 files"
    members = Task.objects.filter(workflow=workflow, workflow_role="member")
    assert members.count() == 3
    assert set(members.values_list("owner", flat=True)) == {member.pk}  # each file's page is hers
    assert set(members.values_list("name", flat=True)) == {demo_tasks.import_contacts.module_path}
    assert sorted(members.values_list("summary", flat=True)) == [
        "Import of north.csv",
        "Import of south.csv",
        "Import of west.csv",
    ]
    (callback,) = Task.objects.filter(workflow=workflow, workflow_role="on_finish")
    assert callback.name == demo_tasks.report_import_batch.module_path
    assert callback.status == Status.BLOCKED
    assert callback.summary == "E-mail about the import of 3 files"

    drain()

    workflow.refresh_from_db()
    assert workflow.status == Workflow.State.SUCCEEDED
    callback.refresh_from_db()
    assert callback.status == Status.SUCCEEDED
    assert Contact.objects.filter(organisation=member.membership.organisation).count() == 8
    (email,) = mail.outbox  # one for the batch; none per file
    assert email.to == ["alice@example.com"]
    assert email.subject == "Import of 3 files is done"
    assert "Import of 3 files is done: 8 contacts added, 2 rows skipped." in email.body
    assert "north.csv: 5 contacts added; no rows skipped." in email.body
    assert "south.csv: 2 contacts added; 2 rows skipped:" in email.body
    assert "  line 2: “nobody” is not an e-mail address" in email.body
    assert "  line 3: expected 2 columns, found 3" in email.body
    assert "west.csv: 1 contact added; no rows skipped." in email.body
    # In upload order, whatever order the members ran in.
    assert email.body.index("north.csv") < email.body.index("south.csv") < email.body.index("west")
    (note,) = Notification.objects.all()
    assert (note.user, note.succeeded) == (member, True)
    assert note.text == "Import of 3 files is done: 8 contacts added, 2 rows skipped."


def test_the_batch_page_shows_one_bar_and_each_file(client, member):
    response = upload(client, csv_file("a.csv"), csv_file("b.csv"))
    page = client.get(response["Location"]).content.decode()
    assert page.count('role="progressbar"') == 1
    assert 'aria-label="Progress of Import of 2 files"' in page
    assert "0 of 2 files imported" in page
    assert "Import of a.csv" in page
    assert "Import of b.csv" in page

    drain()
    page = client.get(response["Location"]).content.decode()
    assert "All 2 files imported." in page
    assert "Import of 2 files is done: 6 contacts added, 0 rows skipped." in page  # the banner
    assert page.count("Succeeded") >= 2


def test_a_file_that_fails_is_listed_as_failed_and_the_others_are_imported(client, member):
    broken = SimpleUploadedFile("latin1.csv", "email,name\nzoë@example.com,Zoë\n".encode("latin-1"))
    upload(client, csv_file("good.csv", rows=2), broken)
    drain(with_scheduled=True)

    workflow = Workflow.objects.get()
    assert workflow.status == Workflow.State.FAILED
    (email,) = mail.outbox
    assert email.subject == "Import of 2 files finished, 1 of 2 files failed"
    assert "good.csv: 2 contacts added; no rows skipped." in email.body
    assert "latin1.csv: failed: This CSV is not UTF-8 text" in email.body
    (note,) = Notification.objects.all()
    assert note.succeeded is False
    assert note.text == (
        "Import of 2 files finished, 1 of 2 files failed: 2 contacts added, 0 rows skipped."
    )


def test_a_huge_list_of_skipped_rows_is_cut_with_a_count(client, member):
    broken = [f"bad{i},Bad" for i in range(250)]
    upload(client, csv_file("many.csv", rows=1, broken=broken), csv_file("ok.csv"))
    drain()
    (email,) = mail.outbox
    assert "many.csv: 1 contact added; 250 rows skipped:" in email.body
    listed = [line for line in email.body.splitlines() if line.startswith("  line ")]
    assert len(listed) == batches.SKIPPED_SHOWN
    assert f"  and {250 - batches.SKIPPED_SHOWN:,} more" in email.body


def test_the_report_runs_once_per_completion_even_if_its_task_runs_again(client, member):
    upload(client, csv_file("a.csv"), csv_file("b.csv"))
    drain()
    workflow = Workflow.objects.get()
    # A second run of the callback (a worker lost after sending): nothing is sent twice.
    demo_tasks.report_import_batch.enqueue(str(workflow.pk))
    drain()
    assert len(mail.outbox) == 1
    assert Notification.objects.count() == 1


def test_one_file_is_still_one_task_with_its_own_notification(client, member):
    response = upload(client, csv_file("solo.csv", rows=4))
    task = Task.objects.get()
    assert response["Location"] == reverse("task-detail", args=[task.pk])
    assert task.workflow_id is None
    drain()
    (email,) = mail.outbox
    assert email.subject == "Import of solo.csv is done"
    assert Notification.objects.get().text == "Import of solo.csv is done: Imported 4 of 4 rows"


# Who may see it -------------------------------------------------------------------------------


def test_another_users_batch_page_is_not_found_and_anonymous_goes_to_login(client, member):
    response = upload(client, csv_file("a.csv"), csv_file("b.csv"))
    url = response["Location"]
    client.force_login(MemberFactory(username="mallory"))
    assert client.get(url).status_code == 404
    assert client.get(reverse("import-batch", args=["not-a-uuid"])).status_code == 404
    client.logout()
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


# Refused at the upload ------------------------------------------------------------------------


def test_more_files_than_the_cap_are_refused(client, member):
    files = [csv_file(f"f{i}.csv") for i in range(MAX_FILES + 1)]
    response = upload(client, *files)
    assert response["Location"] == reverse("home")
    page = messages_of(client, response)
    assert f"Up to {MAX_FILES} files at a time, please ({MAX_FILES + 1} chosen)." in page
    assert not Task.objects.exists()
    assert not Upload.objects.exists()


def test_a_file_that_is_no_csv_among_them_is_refused_by_name(client, member):
    photo = SimpleUploadedFile("holiday.png", PNG, content_type="image/png")
    response = upload(client, csv_file("a.csv"), photo, csv_file("b.csv"))
    page = messages_of(client, response)
    assert "“holiday.png”: Unsupported file format: please upload a CSV." in page
    assert not Task.objects.exists()
    assert not Upload.objects.exists()


def test_an_empty_file_among_them_is_refused_by_name(client, member):
    empty = SimpleUploadedFile("blank.csv", b"", content_type="text/csv")
    page = messages_of(client, upload(client, csv_file("a.csv"), empty))
    assert "“blank.csv”: The submitted file is empty." in page
    assert not Task.objects.exists()


def test_no_file_at_all_is_refused(client, member):
    page = messages_of(client, client.post(reverse("start-import"), {}))
    assert "This field is required." in page


@pytest.mark.parametrize(
    "name",
    ["nul\x00here.csv", "x" * 300 + ".csv", "ünïcødé 👋.csv"],
    ids=["nul", "very-long", "unicode"],
)
def test_hostile_file_names_are_stored_and_shown_mended(client, member, name):
    upload(client, csv_file(name), csv_file("plain.csv"))
    drain()
    names = list(Upload.objects.values_list("filename", flat=True))
    assert len(names) == 2
    assert all("\x00" not in n and len(n) <= 255 for n in names)
    assert Workflow.objects.get().status == Workflow.State.SUCCEEDED
    (email,) = mail.outbox
    assert "plain.csv: 3 contacts added" in email.body


def test_a_lone_surrogate_in_a_name_is_mended_in_the_error(member):
    """A browser cannot send one, but a hand-made request can: the message must be storable."""
    photo = SimpleUploadedFile("bad\ud800.png", PNG)
    form = UploadForm(files=MultiValueDict({"file": [photo, csv_file("a.csv")]}))
    assert not form.is_valid()
    (error,) = form.errors["file"]
    assert error == "“bad\ufffd.png”: Unsupported file format: please upload a CSV."


def test_nul_in_a_cell_is_a_skipped_row_or_a_mended_name_not_a_failed_file(client, member):
    rows = ["nul\x00@example.com,Nul", "ok@example.com,Na\x00me"]
    upload(client, csv_file("cells.csv", rows=0, broken=rows), csv_file("b.csv"))
    drain()
    assert Workflow.objects.get().status == Workflow.State.SUCCEEDED
    (email,) = mail.outbox
    assert "cells.csv: 1 contact added; 1 row skipped:" in email.body
    assert "  line 2: “nul\ufffd@example.com” is not an e-mail address" in email.body
    assert Contact.objects.get(email="ok@example.com").name == "Na\ufffdme"


def test_a_file_cancelled_by_its_owner_is_listed_as_cancelled(client, member):
    upload(client, csv_file("keep.csv"), csv_file("drop.csv"))
    dropped = Task.objects.get(summary="Import of drop.csv")
    assert transitions.cancel(dropped, by=member) == transitions.CancelOutcome.CANCELLED
    drain()
    (email,) = mail.outbox
    assert email.subject == "Import of 2 files finished, 1 of 2 files cancelled"
    assert "keep.csv: 3 contacts added; no rows skipped." in email.body
    assert "drop.csv: cancelled." in email.body
    assert Notification.objects.count() == 1


def test_a_retried_batch_reports_its_new_outcome_in_a_new_email(client, member):
    broken = SimpleUploadedFile("latin1.csv", "email\nzoë@example.com\n".encode("latin-1"))
    upload(client, csv_file("good.csv"), broken)
    drain(with_scheduled=True)
    workflow = Workflow.objects.get()
    assert jobs.retry_workflow(workflow) == 1
    drain(with_scheduled=True)
    assert [m.subject for m in mail.outbox] == [
        "Import of 2 files finished, 1 of 2 files failed",
        "Import of 2 files finished, 1 of 2 files failed",
    ]
    assert Notification.objects.count() == 2


def test_staff_without_the_view_permission_get_404_and_a_viewer_sees_it(client, member):
    response = upload(client, csv_file("a.csv"), csv_file("b.csv"))
    url = response["Location"]
    client.force_login(UserFactory(username="staff", is_staff=True))
    assert client.get(url).status_code == 404
    viewer = UserFactory(username="viewer")
    viewer.user_permissions.add(Permission.objects.get(codename="view_task"))
    client.force_login(viewer)
    assert client.get(url).status_code == 200
