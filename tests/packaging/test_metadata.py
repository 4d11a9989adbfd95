"""The package's facts have one source each, and the README tells the name that installs it."""

import re
import tomllib
from importlib import metadata
from pathlib import Path

import jobs

ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTION = "django-jobs-queue"


def pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def readme():
    return (ROOT / "README.md").read_text()


def test_readme_installs_this_distribution():
    assert pyproject()["project"]["name"] == DISTRIBUTION
    installs = re.findall(r"pip install \"?([\w.-]+)", readme())
    assert f"pip install {DISTRIBUTION}\n" in readme()
    # "django-jobs" on the package index is an unrelated job board: never tell users to install it.
    assert set(installs) == {DISTRIBUTION}, installs


def test_the_documentation_installs_this_distribution_only():
    for page in sorted((ROOT / "docs").rglob("*.md")):
        installs = set(re.findall(r"pip install (?:--upgrade )?\"?([\w.-]+)", page.read_text()))
        assert installs <= {DISTRIBUTION}, (page, installs)


def test_the_version_has_one_source():
    assert pyproject()["project"]["dynamic"] == ["version"]
    assert "version" not in pyproject()["project"]
    assert metadata.version(DISTRIBUTION) == jobs.__version__


def test_changelog_has_this_version_and_unreleased_each_with_an_upgrade_note():
    changelog = (ROOT / "CHANGELOG.md").read_text()
    releases = re.split(r"^## ", changelog, flags=re.MULTILINE)[1:]
    titles = [release.splitlines()[0] for release in releases]
    assert titles[0] == "Unreleased"
    assert any(title.split()[0] == jobs.__version__ for title in titles[1:]), titles
    for release in releases:
        assert "### Upgrading" in release, release.splitlines()[0]


def test_license_is_an_spdx_expression_with_its_file():
    project = pyproject()["project"]
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]
    assert "MIT License" in (ROOT / "LICENSE").read_text()


def test_readme_supported_versions_are_the_classifiers():
    table = readme().split("| Python | Django |\n| --- | --- |\n", 1)[1].split("\n\n", 1)[0]
    pythons, djangos = set(), set()
    for row in table.splitlines():
        python_cell, django_cell = row.strip("|").split("|")
        pythons |= set(re.findall(r"\b3\.\d+\b", python_cell))
        djangos |= set(re.findall(r"\b\d\.\d\b", django_cell))
    classifiers = pyproject()["project"]["classifiers"]
    claimed = {c.rsplit(" :: ", 1)[1] for c in classifiers if re.search(r"Python :: 3\.\d+$", c)}
    assert pythons == claimed
    claimed = {c.rsplit(" :: ", 1)[1] for c in classifiers if re.search(r"Django :: \d\.\d$", c)}
    assert djangos == claimed
