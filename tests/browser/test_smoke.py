import pytest

from tests.factories import UserFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_a_person_logs_in_and_sees_the_demo_home(page, login, live_server):
    UserFactory(username="carol", password="carol-pass")
    login(page, "carol", "carol-pass")
    assert page.url == f"{live_server.url}/"
    assert page.get_by_text("carol").first.is_visible()
