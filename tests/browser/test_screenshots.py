"""The documentation's screenshots: docs/screenshots.py still walks the demo and photographs it.

The script drives the real demo (its web server, a real worker, Chromium) on a SQLite database
of its own, whatever database the suite runs on, so the SQLite run alone covers it.
"""

import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.browser.conftest import chromium_path
from tests.conftest import ROOT

DOCS = ROOT / "docs"
IMAGES = DOCS / "images"
PHONE, DESKTOP = 390, 1280


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    return struct.unpack(">II", data[16:24])


def referenced_images() -> set[str]:
    names = set()
    for page in DOCS.rglob("*.md"):
        names |= set(re.findall(r"\]\((?:\.\./)*images/([\w.-]+\.png)\)", page.read_text()))
    return names


@pytest.mark.browser
def test_the_script_photographs_every_page_the_docs_show(tmp_path):
    if not os.environ.get("DATABASE_URL", "sqlite").startswith("sqlite"):
        pytest.skip("the script runs the demo on SQLite whatever the suite's database")
    result = subprocess.run(
        [sys.executable, "docs/screenshots.py", "--out", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "JOBS_CHROMIUM": chromium_path()},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    taken = {path.name for path in tmp_path.glob("*.png")}
    # The docs show what the script takes, and the repository keeps nothing it no longer takes.
    assert taken == {path.name for path in IMAGES.glob("*.png")}
    assert referenced_images() == taken
    for name in taken:
        width, height = png_size(tmp_path / name)
        assert width == (PHONE if "phone" in name else DESKTOP), name
        assert height > 300, name
    # A page photographed mid-error would be small and plain; these carry the demo's content.
    assert all((tmp_path / name).stat().st_size > 10_000 for name in taken)
