"""Who may see and do what: every view and action, for every kind of user.

Each cell asserts the exact status code and whether the task (or queue, or schedule) changed.
The rules: a task is the owner's, or visible with ``view_task``; acting on it needs the action's
permission (``retry_task``, ``cancel_task``) and seeing it; ``is_staff`` alone opens the admin's
door and nothing behind it; the health probe is open (its reasons and the metrics need
``view_task`` or the metrics token).
"""

import pytest
from django.test import Client

from jobs.models import QueuePause, Schedule, Task
from jobs.states import Status
from tests.factories import ScheduleFactory, TaskFactory, UserFactory, WorkerFactory
from tests.helpers import staff

pytestmark = pytest.mark.django_db

KINDS = [
    "anonymous",
    "owner",
    "other",
    "staff",
    "viewer",
    "retry_only",
    "cancel_only",
    "viewer_retry",
    "viewer_cancel",
    "superuser",
]
PERMISSIONS = {
    "staff": (),
    "viewer": ("view_task",),
    "retry_only": ("retry_task",),
    "cancel_only": ("cancel_task",),
    "viewer_retry": ("view_task", "retry_task"),
    "viewer_cancel": ("view_task", "cancel_task"),
}


def log_in(kind, owner) -> Client:
    client = Client()
    if kind == "owner":
        client.force_login(owner)
    elif kind == "other":
        client.force_login(UserFactory(username="other"))
    elif kind == "superuser":
        client.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    elif kind in PERMISSIONS:
        client.force_login(staff(*PERMISSIONS[kind], username=kind))
    return client


def expect(default, **cells):
    """The expected (status code, changed) of each kind: ``default`` unless named."""
    return {kind: cells.get(kind, default) for kind in KINDS}


NOT_FOUND = (404, False)
TO_LOGIN = (302, False)  # the admin's login page
DENIED = (403, False)
# A viewer is offered no action at all: the post only shows the list again.
NO_ACTIONS = (200, False)
LOGIN_OR_DENIED = {"anonymous": TO_LOGIN, "owner": TO_LOGIN, "other": TO_LOGIN}

# endpoint -> (the task's starting trait, expected cells)
MATRIX = {
    "status": (
        "failed",
        expect(
            NOT_FOUND,
            owner=(200, False),
            viewer=(200, False),
            viewer_retry=(200, False),
            viewer_cancel=(200, False),
            superuser=(200, False),
        ),
    ),
    "json_retry": (
        "failed",
        expect(
            NOT_FOUND,
            owner=(200, True),
            viewer=DENIED,
            viewer_retry=(200, True),
            viewer_cancel=DENIED,
            superuser=(200, True),
        ),
    ),
    "json_cancel": (
        "pending",
        expect(
            NOT_FOUND,
            owner=(200, True),
            viewer=DENIED,
            viewer_retry=DENIED,
            viewer_cancel=(200, True),
            superuser=(200, True),
        ),
    ),
    "changelist": (
        "failed",
        expect(
            DENIED,
            **LOGIN_OR_DENIED,
            viewer=(200, False),
            viewer_retry=(200, False),
            viewer_cancel=(200, False),
            superuser=(200, False),
        ),
    ),
    "change_page": (
        "failed",
        expect(
            DENIED,
            **LOGIN_OR_DENIED,
            viewer=(200, False),
            viewer_retry=(200, False),
            viewer_cancel=(200, False),
            superuser=(200, False),
        ),
    ),
    # An action the user may not run is not offered: "No action selected", back to the list.
    "admin_retry_action": (
        "failed",
        expect(
            DENIED,
            **LOGIN_OR_DENIED,
            viewer=NO_ACTIONS,
            viewer_retry=(302, True),
            viewer_cancel=(302, False),
            superuser=(302, True),
        ),
    ),
    "admin_cancel_action": (
        "pending",
        expect(
            DENIED,
            **LOGIN_OR_DENIED,
            viewer=NO_ACTIONS,
            viewer_retry=(302, False),
            viewer_cancel=(302, True),
            superuser=(302, True),
        ),
    ),
    "retry_button": (
        "failed",
        expect(DENIED, **LOGIN_OR_DENIED, viewer_retry=(302, True), superuser=(302, True)),
    ),
    "cancel_button": (
        "pending",
        expect(DENIED, **LOGIN_OR_DENIED, viewer_cancel=(302, True), superuser=(302, True)),
    ),
    "dashboard": (
        "failed",
        expect(
            DENIED,
            **LOGIN_OR_DENIED,
            viewer=(200, False),
            viewer_retry=(200, False),
            viewer_cancel=(200, False),
            superuser=(200, False),
        ),
    ),
    # The JSON the admin's pages poll (jobs.admin.live): the pages' own door.
    **{
        live: (
            "failed",
            expect(
                DENIED,
                **LOGIN_OR_DENIED,
                viewer=(200, False),
                viewer_retry=(200, False),
                viewer_cancel=(200, False),
                superuser=(200, False),
            ),
        )
        for live in ("live_dashboard", "live_rows", "live_task")
    },
    "pause_form": ("failed", expect(DENIED, **LOGIN_OR_DENIED, superuser=(302, True))),
    "schedules": ("failed", expect(DENIED, **LOGIN_OR_DENIED, superuser=(200, False))),
    "schedule_toggle": ("failed", expect(DENIED, **LOGIN_OR_DENIED, superuser=(302, True))),
    "health": ("failed", expect((200, False))),
    "metrics": (
        "failed",
        # Read with jobs.view_task (or the token); no login at all is 401, a login without the
        # permission 403 (logging in again would not help): is_staff alone grants nothing.
        expect(
            (403, False),
            anonymous=(401, False),
            viewer=(200, False),
            viewer_retry=(200, False),
            viewer_cancel=(200, False),
            superuser=(200, False),
        ),
    ),
}


def request(endpoint, client, task, schedule):
    """Send the request of ``endpoint``; return (status code, whether anything changed)."""
    admin = "/admin/jobs/task/"
    before = (task.status, task.cancel_requested_at)
    if endpoint == "status":
        response = client.get(f"/jobs/tasks/{task.pk}/")
    elif endpoint in ("json_retry", "json_cancel"):
        action = endpoint.removeprefix("json_")
        response = client.post(f"/jobs/tasks/{task.pk}/action/", {"action": action})
    elif endpoint == "changelist":
        response = client.get(admin)
    elif endpoint == "change_page":
        response = client.get(f"{admin}{task.pk}/change/")
    elif endpoint in ("admin_retry_action", "admin_cancel_action"):
        action = f"{endpoint.split('_')[1]}_tasks"
        data = {"action": action, "_selected_action": [str(task.pk)], "index": "0"}
        response = client.post(admin, data)
    elif endpoint in ("retry_button", "cancel_button"):
        response = client.post(f"{admin}{task.pk}/{endpoint.split('_')[0]}/")
    elif endpoint == "dashboard":
        response = client.get(f"{admin}dashboard/")
    elif endpoint == "live_dashboard":
        response = client.get(f"{admin}dashboard/live/")
    elif endpoint == "live_rows":
        response = client.get(f"{admin}live/?id={task.pk}")
    elif endpoint == "live_task":
        response = client.get(f"{admin}{task.pk}/live/")
    elif endpoint == "pause_form":
        response = client.post(f"{admin}dashboard/pause/", {"queue": "default"})
        return response.status_code, QueuePause.objects.filter(queue="default").exists()
    elif endpoint == "schedules":
        response = client.get("/admin/jobs/schedule/")
    elif endpoint == "schedule_toggle":
        data = {
            "form-TOTAL_FORMS": "1",
            "form-INITIAL_FORMS": "1",
            f"form-0-{Schedule._meta.pk.name}": str(schedule.pk),
            "_save": "Save",
        }  # "enabled" left out: unticked
        response = client.post("/admin/jobs/schedule/", data)
        return response.status_code, not Schedule.objects.get(pk=schedule.pk).enabled
    elif endpoint == "health":
        response = client.get("/jobs/ops/health")
    elif endpoint == "metrics":
        response = client.get("/jobs/ops/metrics")
    task.refresh_from_db()
    return response.status_code, (task.status, task.cancel_requested_at) != before


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("endpoint", list(MATRIX))
def test_permission_matrix(endpoint, kind):
    trait, cells = MATRIX[endpoint]
    owner = UserFactory(username="owner")
    task = TaskFactory(owner=owner, **({trait: True} if trait != "pending" else {}))
    assert task.status == (Status.PENDING if trait == "pending" else trait)
    schedule = ScheduleFactory(enabled=True)
    WorkerFactory()  # a live worker: the probe judges the queue healthy
    client = log_in(kind, owner)

    assert request(endpoint, client, task, schedule) == cells[kind]


# Who gets the health probe's reasons (queue names, ages) besides its status.
HEALTH_REASONS = {"viewer", "viewer_retry", "viewer_cancel", "superuser"}


@pytest.mark.parametrize("kind", KINDS)
def test_the_health_reasons_are_shown_only_to_holders_of_view_task(kind):
    owner = UserFactory(username="owner")
    client = log_in(kind, owner)  # no worker: the probe is unhealthy and has a reason
    response = client.get("/jobs/ops/health")
    assert response.status_code == 503
    assert ("reason" in response.json()) == (kind in HEALTH_REASONS)


def test_the_matrix_covers_every_kind_of_user():
    assert all(set(cells) == set(KINDS) for _, cells in MATRIX.values())
    assert Task.objects.count() == 0
