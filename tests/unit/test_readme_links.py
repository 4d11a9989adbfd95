"""The README is the front page: every relative link in it leads to a file of the repository."""

import re

from tests.conftest import ROOT

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def relative_links(text: str) -> list[str]:
    targets = [match.group(1) for match in LINK.finditer(text)]
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:|#", t)]


def test_every_relative_link_of_the_readme_names_a_file():
    links = relative_links((ROOT / "README.md").read_text())
    assert links, "the README links into the documentation"
    missing = [link for link in links if not (ROOT / link.split("#", 1)[0]).exists()]
    assert missing == []


def test_the_readme_is_a_front_page():
    # STYLE.md 20: guides, reference, design notes and dated results live in docs/.
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


def test_links_are_found_whatever_their_kind():
    text = "[a](docs/a.md) [b](https://x.org) [c](#top) [d](docs/b.md#part) [e](mailto:x@y)"
    assert relative_links(text) == ["docs/a.md", "docs/b.md#part"]
