"""Sphinx configuration of the documentation site (``make docs`` builds it into docs/_build)."""

import os
import sys
from pathlib import Path

import django

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# autodoc imports jobs' modules, and their models need Django set up; the test settings are the
# demo's plus the test app, and reading them touches no database.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
django.setup()

import jobs  # noqa: E402 - after django.setup()

project = "jobs"
author = "the jobs contributors"
copyright = "the jobs contributors"
release = jobs.__version__
version = jobs.__version__

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# Headings get anchors, so pages link to each other's sections as [text](page.md#heading).
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"undoc-members": False}

html_theme = "furo"
html_title = f"jobs {release}"
