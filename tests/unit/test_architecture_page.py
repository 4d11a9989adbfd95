"""The architecture page names every module of the package, so the map stays the territory."""

import re
from pathlib import Path

import jobs

PACKAGE = Path(jobs.__file__).parent
PAGE = PACKAGE.parent / "docs" / "design" / "architecture.md"


def modules_of_the_package() -> set[str]:
    names = set()
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if "migrations" in parts or parts[-1] == "__init__":
            continue
        names.add(parts[-1])
    return names


def named_on_the_page(text: str) -> set[str]:
    """Every dotted or bare name the page writes in backticks, split into its parts."""
    names = set()
    for quoted in re.findall(r"`([^`]+)`", text):
        names.update(re.split(r"[.\s,()/]+", quoted))
    return names


def test_every_module_is_on_the_architecture_page():
    missing = modules_of_the_package() - named_on_the_page(PAGE.read_text())
    assert not missing, f"docs/design/architecture.md does not name: {sorted(missing)}"


def test_the_check_sees_a_missing_module():
    assert "claiming" not in named_on_the_page("`jobs.worker.claimer` and `jobs.sql`")
    assert "claimer" in named_on_the_page("`jobs.worker.claimer` and `jobs.sql`")
