"""The history charts in Chromium: drawn, readable in the light and the dark theme, and the page
of a task type with its figures."""

from datetime import UTC, timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from jobs.maintenance import rollups
from jobs.states import Status
from tests.factories import TaskFactory, UserFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


@pytest.fixture
def history():
    UserFactory(username="ops", password="ops-pass", is_staff=True, is_superuser=True)
    now = timezone.now().astimezone(UTC)
    for i, status in enumerate([Status.SUCCEEDED] * 6 + [Status.FAILED] * 2 + [Status.CANCELLED]):
        at = now - timedelta(minutes=5 + i)
        TaskFactory(
            status=status,
            name="app.tasks.import_contacts",
            queue="imports",
            run_after=at - timedelta(seconds=4),
            started_at=at - timedelta(seconds=3),
            finished_at=at,
        )
    rollups.catch_up(now=now)


def luminance(rgb: str) -> float:
    values = [int(v) / 255 for v in rgb[rgb.index("(") + 1 : rgb.index(")")].split(",")[:3]]
    linear = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in values]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(one: str, other: str) -> float:
    light, dark = sorted((luminance(one), luminance(other)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


# The system's scheme, and the admin's theme toggle (stored by its theme.js) over it.
THEMES = {
    "light": ("light", None, False),
    "dark": ("dark", None, True),
    "toggled dark on a light system": ("light", "dark", True),
    "toggled light on a dark system": ("dark", "light", False),
}


@pytest.mark.parametrize("theme", list(THEMES))
def test_the_charts_are_readable_in_light_and_dark(page, login, live_server, history, theme):
    scheme, toggled, dark = THEMES[theme]
    page.emulate_media(color_scheme=scheme)
    if toggled:
        page.add_init_script(f"localStorage.setItem('theme', '{toggled}')")
    login(page, "ops", "ops-pass", next_url="/admin/jobs/task/dashboard/")
    chart = page.locator("#jobs-history-chart svg.jobs-h-chart")
    expect(chart).to_be_visible()
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert (luminance(background) < 0.2) == dark, background

    def style(selector, prop):
        return chart.locator(selector).first.evaluate(f"node => getComputedStyle(node).{prop}")

    # Shapes need 3:1 against the page, text 4.5:1 (WCAG 2.1, 1.4.11 and 1.4.3).
    fills = {css: style(f"rect.{css}", "fill") for css in ("jobs-h-succeeded", "jobs-h-failed")}
    fills["jobs-h-cancelled"] = style("rect.jobs-h-cancelled", "fill")
    for css, fill in fills.items():
        assert contrast(fill, background) >= 3, (css, fill, background)
    assert fills["jobs-h-succeeded"] != fills["jobs-h-failed"]
    assert contrast(style("text.jobs-h-label", "fill"), background) >= 4.5
    assert chart.locator("rect").count() == 9  # one bar per task in its own minute
    expect(
        page.locator('#jobs-history-types tr[data-key="app.tasks.import_contacts"]')
    ).to_be_visible()


def test_the_page_of_a_task_type_shows_its_figures(page, login, live_server, history):
    page.emulate_media(color_scheme="dark")
    login(page, "ops", "ops-pass", next_url="/admin/jobs/task/dashboard/?history=day")
    page.locator("#jobs-history-types a", has_text="import_contacts").click()
    expect(page.locator("h1")).to_have_text("Task type import_contacts")
    expect(page.locator('[data-figure="finished"]')).to_have_text("9")
    expect(page.locator('[data-figure="failure_rate"]')).to_have_text("25.0%")
    expect(page.locator(".jobs-h-figure svg.jobs-h-chart")).to_have_count(4)
    # The run time's p95, one point per hour slot with runs (the nine may span two hours).
    expect(page.locator(".jobs-h-figure").nth(2).locator("circle.jobs-h-p95")).not_to_have_count(0)
    page.locator("#jobs-history-periods a", has_text="last hour").click()
    expect(page.locator(".jobs-history")).to_have_attribute("data-period", "hour")
    expect(page.locator('[data-figure="finished"]')).to_have_text("9")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    line = page.locator("polyline.jobs-h-p95").first.evaluate("n => getComputedStyle(n).stroke")
    assert contrast(line, background) >= 3
