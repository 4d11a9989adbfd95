"""The health and metrics endpoints while the database is down: 503 with JSON, never a 500 page.

"Down" is the default connection pointed at a closed port (PostgreSQL) or at a file in a
directory that does not exist (SQLite); the shared server is never touched. Each request carries
what a real probe or scraper sends: a session cookie from a real login, or the metrics token.
"""

import socket
from contextlib import contextmanager

import pytest
from django.db import connection
from django.urls import reverse

from jobs.web.ops_views import DATABASE_DOWN
from tests.factories import TaskFactory, UserFactory
from tests.helpers import staff

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "a-long-enough-secret-token-for-tests"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again once the socket is


@contextmanager
def database_down(tmp_path):
    saved = dict(connection.settings_dict)
    connection.close()
    if connection.vendor == "postgresql":
        connection.settings_dict.update(HOST="127.0.0.1", PORT=closed_port())
    else:
        connection.settings_dict["NAME"] = str(tmp_path / "no-such-dir" / "db.sqlite3")
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)


@pytest.fixture
def staff_client(client):
    client.force_login(UserFactory(username="operator", is_staff=True, is_superuser=True))
    return client


@pytest.mark.parametrize("endpoint", ["/jobs/ops/health", "/jobs/ops/metrics"])
@pytest.mark.parametrize("credential", ["session", "viewer_session", "token", "none"])
def test_the_ops_endpoints_answer_503_json_while_the_database_is_down(
    client, settings, tmp_path, endpoint, credential
):
    settings.JOBS_METRICS_TOKEN = TOKEN
    if credential == "session":
        client.force_login(UserFactory(username="operator", is_staff=True, is_superuser=True))
    elif credential == "viewer_session":
        client.force_login(staff("view_task", username="viewer"))
    headers = {"Authorization": f"Bearer {TOKEN}"} if credential == "token" else {}
    with database_down(tmp_path):
        response = client.get(endpoint, headers=headers)
    if endpoint.endswith("metrics") and credential == "none":
        # No credential needs no database to refuse.
        assert response.status_code == 401
        return
    assert response.status_code == 503, response.content[:300]
    assert response["Content-Type"] == "application/json"
    assert response.json()["status"] == "unknown"


def test_the_endpoints_answer_again_once_the_database_is_back(staff_client, tmp_path):
    with database_down(tmp_path):
        assert staff_client.get("/jobs/ops/metrics").status_code == 503
    assert staff_client.get("/jobs/ops/metrics").status_code == 200


@pytest.mark.parametrize("endpoint", ["dashboard", "rows", "one"])
def test_the_admins_live_endpoints_answer_503_json_while_the_database_is_down(
    staff_client, tmp_path, endpoint
):
    # What the admin's pages poll: the page keeps its last figures and says the link is lost.
    task = TaskFactory()
    url = {
        "dashboard": reverse("admin:jobs_task_live_dashboard"),
        "rows": f"{reverse('admin:jobs_task_live')}?id={task.pk}",
        "one": reverse("admin:jobs_task_live_one", args=[task.pk]),
    }[endpoint]
    with database_down(tmp_path):
        response = staff_client.get(url, headers={"Accept": "application/json"})  # as live.js
    assert response.status_code == 503, response.content[:300]
    assert response["Content-Type"] == "application/json"
    assert response.json() == DATABASE_DOWN
    assert "no-store" in response["Cache-Control"]
    assert staff_client.get(url).status_code == 200  # and again once it is back
