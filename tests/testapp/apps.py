import logging
import os

from django.apps import AppConfig

logger = logging.getLogger("jobs.tests")


def report_finished(sender, task_result, **kwargs):
    """Log what a Django ``task_finished`` receiver sees: the result's status and the row's."""
    from jobs.models import Task

    row = Task.objects.get(pk=task_result.id)
    seen = (task_result.id, task_result.status, row.status)
    logger.warning("django task_finished id=%s status=%s row=%s", *seen)


def hang_on_finish(sender, task_result, **kwargs):
    """A Django ``task_finished`` receiver that hangs on ``finish_slowly(0)``'s end."""
    import time

    if task_result.task.func.__name__ == "finish_slowly" and list(task_result.args) == [0]:
        logger.warning("django task_finished hangs id=%s", task_result.id)
        time.sleep(300)


class TestAppConfig(AppConfig):
    name = "tests.testapp"
    label = "testapp"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # A receiver that reads the row, for the workers of tests that ask for it
        # (tests/process/test_django_task_signals.py).
        if os.environ.get("JOBS_TEST_DJANGO_FINISHED_RECEIVER"):
            from jobs.backends import task_finished

            task_finished.connect(report_finished, dispatch_uid="tests-report-finished")
        # A worker "on another host": it records this boot id, so no peer of this machine can
        # judge it by its pid, and only its session proves it dead
        # (tests/process/test_session_rescue.py).
        boot_id = os.environ.get("JOBS_TEST_BOOT_ID")
        if boot_id:
            from jobs.worker import liveness

            liveness.read_boot_id = lambda proc=liveness.PROC: boot_id
        if os.environ.get("JOBS_TEST_DJANGO_FINISHED_HANG"):
            from jobs.backends import task_finished

            task_finished.connect(hang_on_finish, dispatch_uid="tests-hang-on-finish")
