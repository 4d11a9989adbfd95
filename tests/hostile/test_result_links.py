"""Hostile result URLs: the owner's page and the JSON never offer them as a link."""

import re

import pytest
from django.template import Context, Template
from django.test import RequestFactory
from hypothesis import given
from hypothesis import strategies as st

from jobs.web.views import describe, safe_link
from tests.factories import TaskFactory, UserFactory

HOSTILE = [
    "javascript:alert(1)",
    "JAVASCRIPT:alert(1)",
    "JavaScript:alert(1)",
    " javascript:alert(1)",
    "\u00a0javascript:alert(1)",
    "java\tscript:alert(1)",
    "java\nscript:alert(1)",
    "java\rscript:alert(1)",
    "\x01javascript:alert(1)",
    "javascript\x00:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "DATA:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
    "vbscript:msgbox(1)",
    "file:///etc/passwd",
]
SAFE = [
    "/reports/1/download/",
    "reports/1/",
    "?page=2",
    "#result",
    "http://example.com/a",
    "HTTPS://example.com/a",
    "//cdn.example.com/file.csv",
]


@pytest.mark.parametrize("url", HOSTILE)
def test_hostile_schemes_are_refused(url):
    assert safe_link(url) is None


def test_an_entity_encoded_scheme_is_only_a_relative_path():
    # No HTML decoding happens in a URL: "jav&#x61;script:" has no scheme at all (the "&"
    # ends it), and the template escapes it, so the browser reads a harmless relative path.
    assert safe_link("jav&#x61;script:alert(1)") == "jav&#x61;script:alert(1)"


@pytest.mark.parametrize("url", SAFE)
def test_http_and_relative_urls_are_kept(url):
    assert safe_link(url) == url


@pytest.mark.parametrize("url", [None, 42, ["/a"], {"url": "/a"}, ""])
def test_what_is_not_a_string_url_is_no_link(url):
    assert safe_link(url) is None


@pytest.mark.django_db
@pytest.mark.parametrize("url", HOSTILE)
def test_the_json_and_the_rendered_bar_offer_no_link(url):
    owner = UserFactory()
    # Built, not saved: PostgreSQL refuses a NUL in JSON, and the page never reads it back.
    task = TaskFactory.build(succeeded=True, owner=owner, result_public=True, result={"url": url})
    assert describe(task, owner)["result_url"] is None

    request = RequestFactory().get("/tasks/")
    request.user = owner
    html = Template("{% load jobs_progress %}{% task_progress task %}").render(
        Context({"task": task, "request": request})
    )
    link = html[html.index("<a data-jobs-result-link") :].split(">", 1)[0]
    assert "href" not in link
    assert "hidden" in link


@pytest.mark.django_db
def test_a_safe_url_is_rendered_as_a_link():
    owner = UserFactory()
    task = TaskFactory(
        succeeded=True, owner=owner, result_public=True, result={"url": "/r/1", "label": "Get it"}
    )
    request = RequestFactory().get("/tasks/")
    request.user = owner
    html = Template("{% load jobs_progress %}{% task_progress task %}").render(
        Context({"task": task, "request": request})
    )
    assert '<a data-jobs-result-link href="/r/1">Get it</a>' in html


@given(st.text(max_size=60) | st.from_regex(r"\A\s*[a-zA-Z\t\n]{1,12}:.{0,20}\Z"))
def test_whatever_text_a_link_is_http_or_relative_and_has_no_control_character(url):
    link = safe_link(url)
    if link is not None:
        assert not re.search(r"[\x00-\x1f\x7f]", link)
        scheme = re.match(r"([a-zA-Z][a-zA-Z0-9+.-]*):", link)
        assert scheme is None or scheme.group(1).lower() in ("http", "https")
