"""The documentation's examples run, page by page, as a reader would run them.

Every ```python block of docs/ runs, in the order of its page and in one namespace per page,
unless an HTML comment just before it says why not: ``<!-- example: skip, <why> -->``.
``<!-- example: module <path> -->`` writes the block to that module instead, under a folder on
``sys.path`` here and on the ``PYTHONPATH`` of the workers; ``<!-- example: run -->`` before a
```sh block runs its commands in the project (``python`` is this interpreter, ``manage.py``
reads the test settings), so ``runworker --burst`` is a real worker process on the test
database.
"""

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT

DOCS = ROOT / "docs"
MARK = re.compile(r"<!-- example: (\w+)(?:,? (.*?))? -->")


@dataclass
class Example:
    page: str
    line: int
    language: str
    code: str
    mark: str = ""  # "", "skip", "module" or "run"
    argument: str = ""

    @property
    def where(self) -> str:
        return f"docs/{self.page}:{self.line}"


def examples(page: Path) -> list[Example]:
    """The fenced blocks of ``page``, each with the mark of the comment just before it."""
    found, block, previous = [], None, ""
    for number, line in enumerate(page.read_text().splitlines(), start=1):
        fence = line.strip().startswith("```")
        if block is None and fence:
            mark = MARK.fullmatch(previous.strip())
            block = Example(
                page=str(page.relative_to(DOCS)),
                line=number,
                language=line.strip()[3:].strip(),
                code="",
                mark=mark.group(1) if mark else "",
                argument=(mark.group(2) or "").strip() if mark else "",
            )
        elif block is not None and fence:
            found.append(block)
            block = None
        elif block is not None:
            block.code += line + "\n"
        previous = line
    return found


def pages() -> list[Path]:
    return sorted(path for path in DOCS.rglob("*.md") if "_build" not in path.parts)


def runnable(example: Example) -> bool:
    python = example.language == "python" and example.mark in ("", "module")
    return python or (example.language == "sh" and example.mark == "run")


PAGES_WITH_EXAMPLES = [
    str(page.relative_to(DOCS)) for page in pages() if any(map(runnable, examples(page)))
]


def test_every_mark_is_understood():
    for page in pages():
        for example in examples(page):
            if example.mark == "skip":
                assert example.argument, f"{example.where}: say why the example is skipped"
                assert example.language == "python", f"{example.where}: only python runs anyway"
            elif example.mark == "module":
                assert example.language == "python", example.where
                assert re.fullmatch(r"[a-z_]+(/[a-z_]+)*\.py", example.argument), example.where
            elif example.mark == "run":
                assert example.language == "sh", f"{example.where}: run marks sh blocks"
            else:
                assert example.mark == "", f"{example.where}: unknown mark {example.mark!r}"


def test_the_central_examples_run():
    """Define a task, enqueue it, run it with a worker, read its status: in the tutorial."""
    tutorial = examples(DOCS / "tutorial.md")
    assert any(example.mark == "module" for example in tutorial)
    assert any(example.mark == "run" for example in tutorial)
    run_here = [e for e in tutorial if e.language == "python" and e.mark == ""]
    assert len(run_here) >= 4
    for page in (
        "tutorial.md",
        "howto/tasks.md",
        "howto/retries.md",
        "howto/idempotency.md",
        "howto/progress.md",
    ):
        assert page in PAGES_WITH_EXAMPLES


@pytest.fixture
def example_modules(tmp_path, monkeypatch):
    """A folder for the pages' modules, importable here and by the workers they start."""
    folder = tmp_path / "examples"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    before = set(sys.modules)
    yield folder
    for name in set(sys.modules) - before:
        module_file = getattr(sys.modules[name], "__file__", None) or ""
        if module_file.startswith(str(folder)):
            del sys.modules[name]


def write_module(folder: Path, example: Example):
    path = folder / example.argument
    for package in path.relative_to(folder).parents:
        if package != Path("."):
            (folder / package).mkdir(exist_ok=True)
            (folder / package / "__init__.py").touch()
    path.write_text(example.code)


def run_commands(example: Example, env: dict):
    for line in example.code.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        command = shlex.split(line)
        if command[0] == "python":
            command[0] = sys.executable
        done = subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"{example.where}: {line}\n{done.stdout}\n{done.stderr}"


@pytest.mark.process
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("page", PAGES_WITH_EXAMPLES)
def test_page_examples_run(page, example_modules, worker_env):
    env = {
        **worker_env,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(example_modules), str(ROOT)])),
    }
    namespace = {"__name__": "docs_example_" + re.sub(r"\W", "_", page)}
    for example in examples(DOCS / page):
        if not runnable(example):
            continue
        if example.mark == "module":
            write_module(example_modules, example)
        elif example.mark == "run":
            run_commands(example, env)
        else:
            exec(compile(example.code, example.where, "exec"), namespace)
