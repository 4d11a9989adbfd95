"""Enqueue a task in the stranger's project, and after the worker ran, check what it left.

    python smoke.py enqueue         prints the new task's id
    python smoke.py verify ID       the task succeeded; the status view and the admin answer

Runs inside the project's virtualenv, where jobs is the installed wheel and not a source tree.
"""

import json
import site
import sys
from importlib import metadata
from pathlib import Path

import django

django.setup()

from django.apps import apps  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.contrib.staticfiles import finders  # noqa: E402
from django.template import engines  # noqa: E402
from django.test import Client, RequestFactory  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402
from django.urls import resolve, reverse  # noqa: E402
from shop.tasks import add  # noqa: E402

import jobs  # noqa: E402
from jobs.models import Task  # noqa: E402

DISTRIBUTION = "django-jobs-queue"


def check_installed_from_wheel():
    location = Path(jobs.__file__).resolve()
    packages = [Path(p).resolve() for p in site.getsitepackages()]
    assert any(location.is_relative_to(p) for p in packages), f"jobs imported from {location}"
    assert metadata.version(DISTRIBUTION) == jobs.__version__, "two versions"


def enqueue():
    result = add.enqueue(2, 3)
    print(result.id)


def verify(task_id):
    check_installed_from_wheel()
    result = add.get_result(task_id)
    assert result.status == "SUCCESSFUL", f"task ended {result.status}: {result.errors}"
    assert result.return_value == {"sum": 5}, result.return_value
    task = Task.objects.get(pk=task_id)
    admin = get_user_model().objects.create_superuser("admin", "admin@example.com", "pw")

    setup_test_environment()  # "testserver" becomes an allowed host
    status_url = reverse("jobs:task-status", args=[task_id])
    request = RequestFactory().get(status_url)
    request.user = admin
    match = resolve(status_url)
    check_status(match.func(request, *match.args, **match.kwargs), task_id)

    # The template tag and its templates, as an owner's page renders them.
    template = engines["django"].from_string(
        "{% load jobs_progress %}{% task_progress task %}{% task_progress_assets %}"
    )
    page = template.render({"task": task}, request)
    assert status_url in page, page
    assert "progress.js" in page, page
    for name in ("jobs/progress.js", "jobs/progress.css", "jobs/admin/jobs.css"):
        assert finders.find(name), f"static file {name} not found"

    if apps.is_installed("django.contrib.admin"):
        client = Client()
        client.force_login(admin)
        check_status(client.get(status_url), task_id)
        pages = {
            "/admin/jobs/": "Jobs",
            "/admin/jobs/task/": "Queue dashboard",  # our change_list.html, from the wheel
            f"/admin/jobs/task/{task_id}/change/": task.name,
            "/admin/jobs/task/dashboard/": "default",
        }
        for url, text in pages.items():
            response = client.get(url)
            assert response.status_code == 200, f"{url} answered {response.status_code}"
            assert text in response.content.decode(), f"{url} does not show {text!r}"
    print(
        f"ok: task {task_id} succeeded; status view, template tag, static files and "
        f"{'admin pages' if apps.is_installed('django.contrib.admin') else 'no admin'} checked"
    )


def check_status(response, task_id):
    assert response.status_code == 200, f"status view answered {response.status_code}"
    body = json.loads(response.content)
    assert body["id"] == str(task_id), body
    assert body["status"] == "succeeded", body


if __name__ == "__main__":
    if sys.argv[1] == "enqueue":
        enqueue()
    else:
        verify(sys.argv[2])
