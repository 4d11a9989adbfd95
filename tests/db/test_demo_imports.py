"""The demo's contacts import: validation, recorded steps, no duplicates, the wrong file type."""

import pytest
from django.core import mail
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone

from demo_project.demo import tasks as demo_tasks
from demo_project.demo.models import Contact, Notification, Upload
from jobs.execution.context import TaskContext
from jobs.models import Task
from jobs.states import Status
from jobs.testing import assert_enqueued, drain
from tests.factories import MemberFactory, UploadFactory

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64)


def contacts_csv(rows=1000, broken=()):
    """Return a CSV of ``rows`` good contacts, with ``broken`` extra lines after the header."""
    lines = ["email,name", *broken]
    lines += [f"person{i}@example.com,Person {i}" for i in range(rows)]
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture(autouse=True)
def _no_pauses(settings):
    settings.DEMO_IMPORT_CHUNK_SECONDS = 0
    settings.DEMO_REPORT_SECTION_SECONDS = 0


@pytest.fixture
def progress_messages(monkeypatch):
    """Every progress message a task reports, throttled or not."""
    seen = []
    report = TaskContext.progress

    def spy(self, current, total=None, message="", **kwargs):
        seen.append(message)
        return report(self, current, total, message, **kwargs)

    monkeypatch.setattr(TaskContext, "progress", spy)
    return seen


# The import task ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_uploading_a_csv_imports_every_row_and_reports_progress(client, progress_messages):
    user = MemberFactory(username="alice")
    client.force_login(user)
    upload = SimpleUploadedFile("contacts.csv", contacts_csv(1000), content_type="text/csv")
    response = client.post(reverse("start-import"), {"file": upload})
    (task,) = assert_enqueued(demo_tasks.import_contacts, owner=user, count=1)
    assert response.status_code == 302
    assert response["Location"] == reverse("task-detail", args=[task.pk])
    assert task.summary == "Import of contacts.csv"

    (task,) = drain().tasks

    assert task.status == Status.SUCCEEDED
    assert Contact.objects.filter(organisation=user.membership.organisation).count() == 1000
    assert "Imported 600 of 1,000 rows" in progress_messages
    assert task.progress_message == "Imported 1,000 of 1,000 rows"
    assert task.progress_percent == 100
    assert set(task.steps) == {"validate", *(f"import:{n}" for n in range(0, 1000, 100))}
    assert task.result_public
    assert task.result["created"] == 1000
    # Step results stay small: counts, never the rows themselves.
    assert all(
        task.steps[f"import:{n}"] == {"created": 100, "duplicates": []} for n in range(0, 1000, 100)
    )
    body = client.get(reverse("jobs:task-status", args=[task.pk])).json()
    assert body["result"]["imported"] == 1000


@pytest.mark.django_db
def test_broken_rows_do_not_stop_the_import_and_are_shown_by_line(client):
    upload = UploadFactory(file__data=contacts_csv(10, broken=["nobody,No One", "x@y,"]))
    client.force_login(upload.owner)
    task = demo_tasks.import_contacts.using(owner=upload.owner).enqueue(upload.pk).record
    (task,) = drain().tasks

    assert task.status == Status.SUCCEEDED
    assert task.progress_message == "Imported 10 of 12 rows; 2 broken rows skipped"
    assert task.result["error_count"] == 2
    page = client.get(reverse("task-detail", args=[task.pk])).content.decode()
    assert "Rows skipped (2)" in page
    assert "<td>2</td><td>“nobody” is not an e-mail address</td>" in page
    assert "<td>3</td>" in page


@pytest.mark.django_db
def test_importing_the_same_file_again_duplicates_nobody():
    upload = UploadFactory(file__data=contacts_csv(250))
    demo_tasks.import_contacts.enqueue(upload.pk)
    drain()
    again = UploadFactory(owner=upload.owner, file__data=contacts_csv(300))
    demo_tasks.import_contacts.enqueue(again.pk)
    (task,) = drain().tasks

    assert Contact.objects.count() == 300
    assert (task.result["created"], task.result["already_present"]) == (50, 250)
    # The person waiting reads what the re-import added, not only how many rows it read.
    assert task.progress_message == "Imported 300 of 300 rows: 50 new, 250 already present"


@pytest.mark.django_db
def test_a_reimport_that_adds_nobody_says_so():
    upload = UploadFactory(file__data=contacts_csv(40))
    demo_tasks.import_contacts.enqueue(upload.pk)
    (first,) = drain().tasks
    demo_tasks.import_contacts.enqueue(
        UploadFactory(owner=upload.owner, file__data=contacts_csv(40)).pk
    )
    (second,) = drain().tasks
    assert first.progress_message == "Imported 40 of 40 rows"
    assert second.progress_message == "Imported 40 of 40 rows: 0 new, 40 already present"


@pytest.mark.django_db
def test_a_retry_resumes_after_the_chunks_already_imported(monkeypatch):
    upload = UploadFactory(file__data=contacts_csv(1000))
    real_chunk, real_validate = demo_tasks._import_chunk, demo_tasks._validate
    calls = {"chunks": [], "reports": 0}

    def flaky_chunk(organisation_id, upload_id, chunk):
        calls["chunks"].append(chunk[0][0])
        if len(calls["chunks"]) == 6:  # the database drops during the sixth chunk, once
            raise ConnectionResetError("server closed the connection")
        return real_chunk(organisation_id, upload_id, chunk)

    def counted_report(upload):
        calls["reports"] += 1
        return real_validate(upload)

    monkeypatch.setattr(demo_tasks, "_import_chunk", flaky_chunk)
    monkeypatch.setattr(demo_tasks, "_validate", counted_report)
    task = demo_tasks.import_contacts.enqueue(upload.pk).record
    # As at a fixed time: the suite's backoff (0.2 s) may end while a slow round runs.
    (task,) = drain(now=timezone.now()).tasks
    assert task.status == Status.RETRYING
    assert Contact.objects.count() == 500
    # The retry is due later: drain(with_scheduled=True) runs it now.
    (task,) = drain(with_scheduled=True).tasks
    assert task.status == Status.SUCCEEDED
    assert calls["reports"] == 1  # the validation step was recorded, not redone
    # The five finished chunks were skipped: the retry started at the sixth (line 502).
    assert calls["chunks"][6] == 502
    assert len(calls["chunks"]) == 11
    assert Contact.objects.count() == 1000
    assert task.result["created"] == 1000


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "data"),
    [("photo.png", PNG), ("photo.csv", PNG), ("contacts.xlsx", b"PK\x03\x04" + bytes(40))],
    ids=["png", "png-named-csv", "xlsx"],
)
def test_a_file_that_is_no_csv_is_refused_at_upload_before_a_task_is_made(client, name, data):
    client.force_login(MemberFactory())
    upload = SimpleUploadedFile(name, data, content_type="application/octet-stream")
    response = client.post(reverse("start-import"), {"file": upload}, follow=True)
    assert "Unsupported file format: please upload a CSV." in response.content.decode()
    assert not Task.objects.exists()
    assert not Upload.objects.exists()


@pytest.mark.django_db
def test_the_import_refuses_a_png_stored_by_other_means_with_the_clear_message(client):
    """The task checks again: a file may reach it without the upload form."""
    upload = UploadFactory(filename="photo.png", file__data=PNG, file__filename="photo.png")
    client.force_login(upload.owner)
    demo_tasks.import_contacts.using(owner=upload.owner).enqueue(upload.pk)
    (task,) = drain().tasks

    assert task.status == Status.FAILED
    assert task.attempts == 1
    body = client.get(reverse("jobs:task-status", args=[task.pk])).json()
    assert body["error"] == "Unsupported file format: please upload a CSV"
    assert body["can_retry"] is False
    assert Contact.objects.count() == 0


@pytest.mark.django_db
def test_the_owner_is_told_on_their_next_page_and_by_email_when_an_import_ends(client):
    upload = UploadFactory(file__data=contacts_csv(20), owner__username="erin")
    demo_tasks.import_contacts.using(owner=upload.owner, summary="Import of contacts.csv").enqueue(
        upload.pk
    )
    drain()  # runs the task_finished receivers as a worker's commit would

    (note,) = Notification.objects.all()
    assert note.user == upload.owner
    assert note.text == "Import of contacts.csv is done: Imported 20 of 20 rows"
    (email,) = mail.outbox
    assert email.to == ["erin@example.com"]
    assert "Imported 20 of 20 rows" in email.body

    client.force_login(upload.owner)
    task = Task.objects.get()
    client.get(reverse("jobs:task-status", args=[task.pk]))  # polling does not use it up
    page = client.get(reverse("task-list")).content.decode()
    assert "Import of contacts.csv is done: Imported 20 of 20 rows" in page
    assert "is done" not in client.get(reverse("task-list")).content.decode()  # shown once
