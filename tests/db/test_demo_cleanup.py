"""The demo's hourly clean-up: old uploads and reports go, those of unfinished tasks stay."""

from datetime import timedelta

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.utils import timezone

from demo_project import settings as demo_settings
from demo_project.demo import tasks as demo_tasks
from demo_project.demo.cleanup import clean_up_files
from demo_project.demo.models import Report, Upload
from jobs.maintenance import periodic
from jobs.states import Status
from jobs.testing import drain
from tests.factories import MemberFactory, TaskFactory, UploadFactory

pytestmark = pytest.mark.django_db

DAY = 24 * 3600
LATER = timezone.now() + timedelta(days=3)  # everything made by a test is old by then


def import_of(upload, **traits):
    return TaskFactory(
        name=demo_tasks.import_contacts.name, payload={"args": [upload.pk]}, **traits
    )


def report_of(task, owner):
    report = Report(owner=owner, filename="r.csv", task_id=task.pk)
    report.file.save("r.csv", ContentFile(b"domain,contacts\n"), save=False)
    report.save()
    return report


def test_old_files_go_and_files_of_unfinished_tasks_stay():
    done, waiting, running = UploadFactory(), UploadFactory(), UploadFactory()
    import_of(done, succeeded=True)
    import_of(waiting, retrying=True)
    import_of(running, running=True)
    recent = UploadFactory(created_at=LATER)
    owner = MemberFactory()
    old_report = report_of(TaskFactory(succeeded=True), owner)
    building = report_of(TaskFactory(running=True), owner)

    deleted = clean_up_files(now=LATER, keep_seconds=DAY)

    assert deleted["uploads"] == 1
    assert deleted["reports"] == 1
    assert set(Upload.objects.values_list("pk", flat=True)) == {waiting.pk, running.pk, recent.pk}
    assert list(Report.objects.values_list("pk", flat=True)) == [building.pk]
    assert not default_storage.exists(done.file.name)
    assert not default_storage.exists(old_report.file.name)
    for kept in (waiting, running, recent):
        assert default_storage.exists(kept.file.name)
    assert default_storage.exists(building.file.name)


def test_files_no_row_names_go_by_age_too():
    orphan = default_storage.save("reports/orphan.csv", ContentFile(b"x"))
    assert clean_up_files(now=timezone.now(), keep_seconds=DAY)["orphans"] == 0
    assert default_storage.exists(orphan)
    assert clean_up_files(now=LATER, keep_seconds=DAY)["orphans"] >= 1
    assert not default_storage.exists(orphan)


def test_the_demo_schedules_the_clean_up_hourly_and_the_task_uses_the_setting(settings):
    settings.JOBS_SCHEDULES = demo_settings.JOBS_SCHEDULES
    settings.DEMO_FILES_KEEP_SECONDS = 0
    old = UploadFactory(created_at=timezone.now() - timedelta(hours=1))
    schedule = periodic.declared()["demo-clean-up-files"]
    assert schedule.every == 3600
    periodic.enqueue_slot(schedule, schedule.latest_slot(timezone.now()))

    (task,) = drain().tasks

    assert task.status == Status.SUCCEEDED
    assert task.result["uploads"] == 1
    assert not Upload.objects.filter(pk=old.pk).exists()
