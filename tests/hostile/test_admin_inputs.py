"""Hostile values in every admin GET parameter and form field: never a 500, on either database.

The values are what a fuzzer or a careless link sends: NUL bytes, a lone surrogate (as its UTF-8
encoding in the query string: Django decodes it to U+FFFD), 10,000-character strings, ids that
are not UUIDs, negative and huge numbers, SQL-ish text.
"""

from urllib.parse import quote

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.models import QueuePause, Schedule, Task
from jobs.states import Status
from tests.factories import ScheduleFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.django_db

HOSTILE = [
    "\x00",
    "a\x00b",
    "x" * 10_000,
    "not-a-uuid",
    "-1",
    "-99999999999999999999999",
    "99999999999999999999999",
    "1e309",
    "NaN",
    "' OR 1=1 --",
    '"; DROP TABLE jobs_task; --',
    "%",
    "_",
    "\\",
    "\u202e\ufeff",
    "\U0001d54f" * 300,  # outside the BMP: 4 bytes each,
]
# Encoded by hand: a lone surrogate cannot be percent-encoded from a Python str.
RAW_QUERY_VALUES = ["%ED%A0%80", "%ff%fe", "%00", "%C0%80"]

TASK_PARAMETERS = [
    "q",
    "status__exact",
    "queue",
    "name",
    "created_at__gte",
    "created_at__lt",
    "created_at__isnull",
    "o",
    "p",
    "all",
    "e",
    "_to_field",
    "_popup",
    "_changelist_filters",
    "owner__id__exact",
]
SCHEDULE_PARAMETERS = ["q", "enabled__exact", "o", "p", "_to_field"]


@pytest.fixture
def admin_client():
    client = Client()
    client.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    return client


def assert_no_server_error(response):
    assert response.status_code < 500, response.content[:500]


def encoded(value: str) -> str:
    return quote(value, safe="")


@pytest.mark.parametrize("parameter", TASK_PARAMETERS)
@pytest.mark.parametrize("value", [*map(encoded, HOSTILE), *RAW_QUERY_VALUES])
def test_the_task_changelist_survives_any_parameter(admin_client, parameter, value):
    TaskFactory(queue="default")
    response = admin_client.get(f"/admin/jobs/task/?{parameter}={value}")
    assert_no_server_error(response)


@pytest.mark.parametrize("parameter", SCHEDULE_PARAMETERS)
@pytest.mark.parametrize("value", [*map(encoded, HOSTILE), *RAW_QUERY_VALUES])
def test_the_schedule_changelist_survives_any_parameter(admin_client, parameter, value):
    ScheduleFactory()
    response = admin_client.get(f"/admin/jobs/schedule/?{parameter}={value}")
    assert_no_server_error(response)


@pytest.mark.parametrize("value", [*map(encoded, HOSTILE), *RAW_QUERY_VALUES])
def test_the_dashboard_and_detail_pages_survive_any_parameter(admin_client, value):
    task = TaskFactory()
    for url in (
        f"/admin/jobs/task/dashboard/?queue={value}&window={value}",
        f"/admin/jobs/task/{task.pk}/change/?_changelist_filters={value}",
        f"/admin/jobs/task/{value}/change/",
        f"/admin/jobs/schedule/{value}/change/",
    ):
        assert_no_server_error(admin_client.get(url))


@pytest.mark.parametrize("value", HOSTILE)
def test_the_one_task_buttons_survive_any_id(admin_client, value):
    for action in ("retry", "cancel"):
        response = admin_client.post(f"/admin/jobs/task/{encoded(value)}/{action}/")
        assert_no_server_error(response)


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("action", ["pause", "resume", "", None])
def test_the_pause_form_refuses_hostile_queue_names_without_a_500(admin_client, value, action):
    data = {"queue": value} if action is None else {"queue": value, "action": action}
    response = admin_client.post("/admin/jobs/task/dashboard/pause/", data)
    assert_no_server_error(response)
    if "\x00" in value or len(value) > Task._meta.get_field("queue").max_length:
        assert not QueuePause.objects.exists()


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("field", ["action", "_selected_action", "select_across", "index", "queue"])
def test_the_action_form_survives_any_field(admin_client, field, value):
    task = TaskFactory(failed=True)
    data = {
        "action": "retry_tasks",
        "_selected_action": [str(task.pk)],
        "select_across": "0",
        "index": "0",
        field: value,
    }
    response = admin_client.post(f"/admin/jobs/task/?queue={encoded(value)}", data)
    assert_no_server_error(response)


@pytest.mark.parametrize("value", HOSTILE)
def test_the_schedule_list_editable_form_survives_any_field(admin_client, value):
    schedule = ScheduleFactory()
    data = {
        "form-TOTAL_FORMS": value,
        "form-INITIAL_FORMS": value,
        "form-0-id": value,
        f"form-0-{Schedule._meta.pk.name}": value,
        "form-0-enabled": value,
        "_save": "Save",
    }
    assert_no_server_error(admin_client.post("/admin/jobs/schedule/", data))
    data = {**data, "form-TOTAL_FORMS": "1", "form-INITIAL_FORMS": "1"}
    assert_no_server_error(admin_client.post("/admin/jobs/schedule/", data))
    data[f"form-0-{Schedule._meta.pk.name}"] = str(schedule.pk)
    assert_no_server_error(admin_client.post("/admin/jobs/schedule/", data))
    assert Schedule.objects.filter(pk=schedule.pk).exists()


def test_a_nul_in_the_filter_is_reported_as_an_invalid_filter_not_a_crash(admin_client):
    TaskFactory(queue="default", status=Status.PENDING)
    response = admin_client.get("/admin/jobs/task/?queue=a%00b")
    assert response.status_code in (200, 302)


# Any text a browser can send (surrogates excepted: they cannot be percent-encoded from a str,
# RAW_QUERY_VALUES covers their bytes), in any parameter of the list or the pause form.
SENDABLE = st.text(st.characters(exclude_categories=("Cs",)), max_size=300)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(parameter=st.sampled_from(TASK_PARAMETERS), value=SENDABLE, queue=SENDABLE)
def test_any_text_in_any_parameter_or_the_pause_form_is_no_500(
    admin_client, parameter, value, queue
):
    response = admin_client.get(f"/admin/jobs/task/?{parameter}={encoded(value)}")
    assert_no_server_error(response)
    response = admin_client.post("/admin/jobs/task/dashboard/pause/", {"queue": queue})
    assert_no_server_error(response)


LONG_SEARCHES = {
    "100,000 characters": "x" * 100_000,
    "20,000 words": " ".join(["x"] * 20_000),
    "20,000 quoted words": " ".join(['"x y"'] * 20_000),
}


@pytest.mark.parametrize("url", ["/admin/jobs/task/", "/admin/jobs/schedule/"])
@pytest.mark.parametrize("search", LONG_SEARCHES.values(), ids=LONG_SEARCHES.keys())
def test_an_overlong_search_is_cut_with_a_notice_not_a_500(admin_client, url, search):
    """SQLite answered 500: "LIKE or GLOB pattern too complex"."""
    TaskFactory(name="x" * 10)
    ScheduleFactory()
    response = admin_client.get(url, {"q": search})
    assert response.status_code == 200
    assert "The search was cut to its first 200 characters and 10 words" in response.text


def test_a_cut_search_still_finds_by_its_first_words(admin_client):
    wanted = ScheduleFactory(name="nightly-report")
    ScheduleFactory(name="hourly-report")
    response = admin_client.get("/admin/jobs/schedule/", {"q": "nightly " + "report " * 20_000})
    assert response.status_code == 200
    assert [schedule.pk for schedule in response.context["cl"].result_list] == [wanted.pk]


def test_a_search_within_the_limits_has_no_notice(admin_client):
    ScheduleFactory(name="nightly-report")
    response = admin_client.get("/admin/jobs/schedule/", {"q": "nightly report"})
    assert response.status_code == 200
    assert "The search was cut" not in response.text
