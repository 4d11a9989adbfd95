"""Take the documentation's screenshots from the real demo, driven in Chromium as a person would.

    .venv/bin/python docs/screenshots.py            # writes docs/images/*.png
    .venv/bin/python docs/screenshots.py --out DIR  # elsewhere (the test does this)

It migrates a fresh SQLite database, creates the demo logins, starts the demo's web server and
a real ``runworker``, then uses the pages: alice imports a CSV of contacts, sends invitations,
starts a report and a prime count, and cancels the count; bob imports a file with no email
column (it fails). While the report still runs it photographs the user's task list and the
report's page, then the admin's dashboard, task list and the report's admin page, each at a
desktop width (1,280 px) and a phone width (390 px), and the user's page and the dashboard in
dark mode as well. Nothing is drawn or faked: the figures are what the worker did.
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "docs" / "images"
CHROMIUM = os.environ.get("JOBS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WIDTHS = {"desktop": (1280, 800), "phone": (390, 844)}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def contacts_csv(rows: int, broken: int) -> bytes:
    lines = ["email,name"]
    for n in range(rows):
        # Every hundredth row of the first ``broken`` hundreds has no valid address.
        bad = n % 100 == 7 and n // 100 < broken
        lines.append(f"{'not-an-address' if bad else f'person{n}@example.com'},Person {n}")
    return ("\n".join(lines) + "\n").encode()


class Demo:
    """The demo project on a database of its own: its web server and one worker."""

    def __init__(self, workdir: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "demo_project.settings",
            "DATABASE_URL": f"sqlite:///{workdir / 'screenshots.sqlite3'}",
            "DEBUG": "1",
            # Paced so the report is still running when it is photographed.
            "DEMO_IMPORT_CHUNK_SECONDS": "0.02",
            "DEMO_REPORT_SECTION_SECONDS": "2",
        }
        self.processes: list[subprocess.Popen] = []
        self.log = open(workdir / "demo.log", "w")  # noqa: SIM115 - closed in stop()

    def manage(self, *args: str) -> None:
        subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            check=True,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def start(self) -> None:
        self.manage("migrate", "--noinput")
        self.manage("seed_demo")
        for args in (["runserver", f"127.0.0.1:{self.port}", "--noreload"], ["runworker"]):
            self.processes.append(
                subprocess.Popen(
                    [sys.executable, "manage.py", *args],
                    cwd=ROOT,
                    env=self.env,
                    stdout=self.log,
                    stderr=subprocess.STDOUT,
                )
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"the demo's server did not start on port {self.port}")

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        self.log.close()


def log_in(context, url: str, username: str):
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.goto(f"{url}/accounts/login/?next=/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", username)
    page.click("button[type=submit]")
    page.wait_for_load_state()
    return page


def upload(page, url: str, name: str, content: bytes) -> str:
    """Import ``content`` as the file ``name``; return the task page's path it leads to."""
    page.goto(f"{url}/")
    page.set_input_files(
        "input[name=file]", {"name": name, "mimeType": "text/csv", "buffer": content}
    )
    page.click("form[action='/imports/'] button[type=submit]")
    page.wait_for_url("**/tasks/*/")
    return page.url.removeprefix(url)


def submit(page, url: str, action: str, fields: dict[str, str]) -> str:
    page.goto(f"{url}/")
    for name, value in fields.items():
        page.fill(f"form[action='{action}'] [name={name}]", value)
    page.click(f"form[action='{action}'] button[type=submit]")
    page.wait_for_url("**/tasks/*/")
    return page.url.removeprefix(url)


def wait_for_status(page, url: str, task_path: str, statuses: set[str], timeout: float = 60):
    """Poll the task's JSON status (as the page does) until it reaches one of ``statuses``."""
    task_id = task_path.rstrip("/").rsplit("/", 1)[-1]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = page.request.get(f"{url}/jobs/tasks/{task_id}/")
        if response.ok and response.json().get("status") in statuses:
            return response.json()
        time.sleep(0.3)
    raise RuntimeError(f"task {task_id} did not reach {sorted(statuses)} in {timeout} s")


def shoot(page, path: str, out: Path, name: str, url: str, settle: float = 0.8) -> list[Path]:
    """Photograph ``path`` at each width; return the files written."""
    written = []
    for width_name, (width, height) in WIDTHS.items():
        page.set_viewport_size({"width": width, "height": height})
        page.goto(f"{url}{path}")
        page.wait_for_load_state("networkidle")
        time.sleep(settle)  # let the polling script draw the latest progress
        target = out / f"{name}-{width_name}.png"
        page.screenshot(path=str(target), full_page=False)
        written.append(target)
    return written


def take(out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with tempfile.TemporaryDirectory() as workdir:
        demo = Demo(Path(workdir))
        demo.start()
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
                )
                try:
                    written += _walk(browser, demo.url, out)
                finally:
                    browser.close()
        finally:
            demo.stop()
    return written


def _walk(browser, url: str, out: Path) -> list[Path]:
    written = []
    alice_context = browser.new_context()
    alice = log_in(alice_context, url, "alice")
    imported = upload(alice, url, "contacts.csv", contacts_csv(1000, broken=3))
    submit(alice, url, "/invitations/", {"emails": "ann@example.com\nben@example.com"})
    primes = submit(alice, url, "/primes/", {"limit": "5000000"})
    report = submit(alice, url, "/reports/", {})
    wait_for_status(alice, url, imported, {"succeeded"})
    alice.goto(f"{url}{primes}")
    cancel = alice.locator("button", has_text="Cancel")
    if cancel.count():
        cancel.first.click()
    bob = log_in(browser.new_context(), url, "bob")
    broken = upload(bob, url, "no-email.csv", b"name,phone\nBob,123\n")
    wait_for_status(bob, url, broken, {"failed"})
    wait_for_status(alice, url, report, {"running"})

    written += shoot(alice, "/tasks/", out, "user-tasks", url)
    written += shoot(alice, report, out, "user-task", url)
    dark = browser.new_context(color_scheme="dark")
    dark_alice = log_in(dark, url, "alice")
    dark_alice.set_viewport_size({"width": 390, "height": 844})
    dark_alice.goto(f"{url}{report}")
    dark_alice.wait_for_load_state("networkidle")
    written.append(out / "user-task-dark-phone.png")
    dark_alice.screenshot(path=str(written[-1]))

    admin = log_in(browser.new_context(), url, "admin")
    report_id = report.rstrip("/").rsplit("/", 1)[-1]
    written += shoot(admin, "/admin/jobs/task/dashboard/", out, "dashboard", url)
    written += shoot(admin, "/admin/jobs/task/", out, "task-list", url)
    written += shoot(admin, f"/admin/jobs/task/{report_id}/change/", out, "task-page", url)
    dark_admin = log_in(browser.new_context(color_scheme="dark"), url, "admin")
    dark_admin.set_viewport_size({"width": 1280, "height": 800})
    dark_admin.goto(f"{url}/admin/jobs/task/dashboard/")
    dark_admin.wait_for_load_state("networkidle")
    written.append(out / "dashboard-dark-desktop.png")
    dark_admin.screenshot(path=str(written[-1]))
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder for the PNG files")
    args = parser.parse_args()
    for path in take(args.out):
        print(path)


if __name__ == "__main__":
    main()
