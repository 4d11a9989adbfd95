"""Real Chromium (Debian's package) driven by Playwright, against a live test server.

A missing browser fails these tests: it never skips them, so CI cannot pass without them.
"""

import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")

# Playwright's sync API keeps an event loop running in this thread; the test's own ORM calls are
# still plain synchronous code (the documented setting for Playwright with Django's test tools).
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def chromium_path() -> str:
    path = os.environ.get("JOBS_CHROMIUM") or next(
        (p for p in CHROMIUM_CANDIDATES if shutil.which(p)), None
    )
    if not path:
        pytest.fail(
            "Chromium is not installed: browser tests need it (Debian: apt-get install chromium; "
            "or set JOBS_CHROMIUM to its path)."
        )
    return path


# Per module, not per session: while Playwright's sync API is open it keeps an asyncio loop
# running in the main thread, and every later test that runs a loop of its own there
# (asyncio.run, asgiref's async_to_sync: jobs' async tasks run alone) would fail. A module of
# browser tests ends it; pytest-randomly keeps a module's tests together.
@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_path(),
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


@pytest.fixture
def login(live_server):
    """Log ``page`` in through the real login form as ``username``/``password``."""

    def log_in(page, username, password, next_url="/"):
        page.goto(f"{live_server.url}/accounts/login/?next={next_url}")
        page.fill("input[name=username]", username)
        page.fill("input[name=password]", password)
        page.click("button[type=submit]")
        page.wait_for_load_state()
        return page

    return log_in


@pytest.fixture
def live_worker(live_server, worker_env, tmp_path):
    """Run ``manage.py runworker`` beside the live server for the whole test, then stop it.

    The demo's pauses are set so a person (and a test) can watch the bars move: imports take a
    second or two, the report about 30 seconds, which leaves time to cancel it.
    """
    env = {
        **worker_env,
        "DEMO_IMPORT_CHUNK_SECONDS": "0.2",
        "DEMO_REPORT_SECTION_SECONDS": "1.5",
    }
    log = (tmp_path / "worker.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "runworker", "--concurrency", "2"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    yield process
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    log.close()
