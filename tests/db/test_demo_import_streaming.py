"""The demo import reads its file row by row: memory stays flat, repeats are still found."""

import gc
import tracemalloc

import pytest
from django.core.files.base import ContentFile

from demo_project.demo import tasks as demo_tasks
from demo_project.demo.models import Contact
from jobs.states import Status
from jobs.testing import drain
from tests.factories import UploadFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_pauses(settings):
    settings.DEMO_IMPORT_CHUNK_SECONDS = 0


def upload_of(lines, **options):
    data = ("email,name\n" + "".join(f"{line}\n" for line in lines)).encode()
    upload = UploadFactory(**options)
    upload.file.save("contacts.csv", ContentFile(data))
    return upload


def test_a_row_repeating_an_earlier_line_is_reported_even_chunks_apart():
    people = [f"person{i}@example.com,Person {i}" for i in range(300)]
    upload = upload_of(["ada@example.com,Ada", *people, "ADA@example.com,Ada again"])
    demo_tasks.import_contacts.enqueue(upload.pk)
    (task,) = drain().tasks

    assert task.status == Status.SUCCEEDED
    assert task.result["errors"] == [{"line": 303, "reason": "duplicate of line 2"}]
    assert (task.result["imported"], task.result["created"], task.result["error_count"]) == (
        301,
        301,
        1,
    )
    assert task.progress_message == "Imported 301 of 302 rows; 1 broken row skipped"
    assert Contact.objects.count() == 301


def test_contacts_of_an_earlier_import_are_already_present_not_duplicates():
    first = upload_of(["ada@example.com,Ada"])
    demo_tasks.import_contacts.enqueue(first.pk)
    drain()
    again = upload_of(["ada@example.com,Ada", "bob@example.com,Bob"], owner=first.owner)
    demo_tasks.import_contacts.enqueue(again.pk)
    (task,) = drain().tasks

    assert task.result["error_count"] == 0
    assert (task.result["created"], task.result["already_present"]) == (1, 1)


def peak_memory_of_import(rows: int) -> int:
    upload = upload_of(f"person{i}@example.com,Person number {i}" for i in range(rows))
    demo_tasks.import_contacts.enqueue(upload.pk)
    gc.collect()
    tracemalloc.start()
    try:
        (task,) = drain().tasks
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert task.status == Status.SUCCEEDED
    assert task.result["created"] == rows
    return peak


def test_the_import_of_a_large_file_needs_no_more_memory_than_a_small_one():
    small = peak_memory_of_import(500)  # 20 KB of CSV
    large = peak_memory_of_import(8_000)  # 350 KB of CSV, 16 times as many rows
    # Reading the whole file and keeping its rows (as the import did) costs about 3 MB more
    # here; streaming, only the task's record of its steps grows (one entry per 100 rows).
    assert large - small < 500_000, (small, large)
