"""Build the sdist and the wheel, check them, and run the wheel in a stranger's project.

    python tests/packaging/check_package.py [--python PATH]...

1. ``python -m build`` (the sdist, then the wheel built from it) into ``dist/``, and
   ``twine check --strict``.
2. The wheel holds ``jobs/`` exactly as the repository has it (code, migrations, templates,
   static files) and its ``.dist-info``; nothing else (no tests, demo or benchmarks). Its
   metadata names the distribution, the version of ``jobs.__version__``, the licence and the URLs.
3. For each ``--python``: a fresh virtualenv, ``pip install dist/*.whl`` (dependencies from the
   index), then per variant a project made on the spot with ``django-admin startproject``:
   migrate on SQLite, enqueue a function declared with Django's ``@task``, ``runworker --burst``,
   and ``smoke.py verify``: the task succeeded, the status view and (variant ``admin``) the admin
   pages answer. On the newest Python also with Django 6.0 and with Django 5.2 plus the backport,
   so that every Django version the classifiers name is run.

Environment:
    PACKAGE_TEST_VARIANTS      variants to run, default ``admin,noadmin``. ``noadmin`` leaves
                               out django.contrib.admin, sessions and messages.

Any other failure stops the run with the command's output.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from email.parser import HeaderParser
from pathlib import Path

import trove_classifiers

ROOT = Path(__file__).resolve().parents[2]
STRANGER = Path(__file__).resolve().parent / "stranger"
DIST = ROOT / "dist"
DISTRIBUTION = "django-jobs-queue"
URL_LABELS = ("Documentation", "Changelog", "Issues")
VARIANTS = ("admin", "noadmin")


class Failure(Exception):
    pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", action="append", default=[], help="a Python to run it on")
    options = parser.parse_args()
    variants = _names("PACKAGE_TEST_VARIANTS", ",".join(VARIANTS))
    started = time.monotonic()
    try:
        wheel = build()
        classifiers = check_wheel(wheel)
        exercised = set()
        pythons = options.python or [sys.executable]
        with tempfile.TemporaryDirectory(prefix="jobs-package-") as scratch:
            for index, python in enumerate(pythons):
                newest = index == len(pythons) - 1
                exercised |= run_on(index, python, wheel, Path(scratch), variants, newest)
        if unclaimed := exercised - classifiers:
            raise Failure(f"ran {sorted(unclaimed)}, which pyproject.toml's classifiers omit")
        for version in sorted(classifiers - exercised):
            print(f"== note: {version}, named by a classifier, was not run on this machine")
    except Failure as exc:
        print(f"\nPACKAGE TEST FAILED: {exc}", file=sys.stderr)
        sys.exit(1)
    print(f"== package test passed in {time.monotonic() - started:.0f}s")


def _names(variable, default):
    names = [name for name in os.environ.get(variable, default).split(",") if name]
    unknown = set(names) - set(VARIANTS)
    if unknown:
        raise SystemExit(f"{variable}: unknown variant(s) {sorted(unknown)}; known: {VARIANTS}")
    return names


def run(command, *, cwd=ROOT, env=None, timeout=600):
    """Run ``command``; return its output, or raise Failure with it."""
    shown = " ".join(str(part) for part in command)
    try:
        done = subprocess.run(
            [str(part) for part in command],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        raise Failure(f"`{shown}` still running after {timeout}s:\n{exc.output}") from None
    if done.returncode != 0:
        raise Failure(f"`{shown}` exited {done.returncode}:\n{done.stdout}")
    return done.stdout


def build() -> Path:
    print("== build: sdist and wheel (python -m build), twine check")
    shutil.rmtree(DIST, ignore_errors=True)
    run([sys.executable, "-m", "build", "--outdir", DIST, ROOT])
    built = sorted(DIST.iterdir())
    wheels = [path for path in built if path.suffix == ".whl"]
    sdists = [path for path in built if path.name.endswith(".tar.gz")]
    if len(wheels) != 1 or len(sdists) != 1:
        raise Failure(f"expected one wheel and one sdist in dist/, found {built}")
    run([sys.executable, "-m", "twine", "check", "--strict", *built])
    return wheels[0]


def check_wheel(wheel: Path) -> set[str]:
    """Check the wheel's files and metadata; return the versions its classifiers name."""
    version = _source_version()
    dist_info = f"{DISTRIBUTION.replace('-', '_')}-{version}.dist-info"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = HeaderParser().parsestr(archive.read(f"{dist_info}/METADATA").decode())
    stray = sorted(n for n in names if not n.startswith(("jobs/", f"{dist_info}/")))
    if stray:
        raise Failure(f"the wheel carries files outside jobs/: {stray}")
    shipped = {n for n in names if n.startswith("jobs/")}
    source = _package_files()
    if shipped != source:
        raise Failure(
            f"the wheel's jobs/ differs from the repository's: missing {sorted(source - shipped)},"
            f" extra {sorted(shipped - source)}"
        )
    for kind in ("migrations/0001_initial.py", "templates/", "static/", "py.typed"):
        if not any(n.startswith(f"jobs/{kind}") for n in shipped):
            raise Failure(f"the wheel has no jobs/{kind}")
    if f"{dist_info}/licenses/LICENSE" not in names:
        raise Failure("the wheel carries no LICENSE")
    expected = {
        "Name": DISTRIBUTION,
        "Version": version,
        "License-Expression": "MIT",
        "Requires-Python": ">=3.11",
    }
    for field, value in expected.items():
        if metadata[field] != value:
            raise Failure(f"METADATA {field} is {metadata[field]!r}, expected {value!r}")
    urls = {url.split(",")[0] for url in metadata.get_all("Project-URL") or []}
    if missing := set(URL_LABELS) - urls:
        raise Failure(f"METADATA has no Project-URL for {sorted(missing)}")
    versions = set()
    classifiers = metadata.get_all("Classifier") or []
    if unknown := [name for name in classifiers if name not in trove_classifiers.classifiers]:
        raise Failure(f"classifiers the package index would refuse: {unknown}")
    for classifier in classifiers:
        found = re.fullmatch(
            r"(?:Framework :: (Django)|Programming Language :: (Python)) :: "
            r"(\d+\.\d+)",
            classifier,
        )
        if found:
            versions.add(f"{found[1] or found[2]} {found[3]}")
    print(f"== wheel {wheel.name}: {len(shipped)} files of jobs/, metadata checked")
    return versions


def _source_version() -> str:
    text = (ROOT / "jobs" / "__init__.py").read_text()
    return re.search(r'^__version__ = "([^"]+)"$', text, re.MULTILINE)[1]


def _package_files() -> set[str]:
    """Return the files of jobs/ that the repository tracks (all of them belong in the wheel)."""
    if (ROOT / ".git").exists():
        listed = run(["git", "ls-files", "jobs"]).split()
        return {name for name in listed if (ROOT / name).exists()}
    return {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "jobs").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


def run_on(index, python, wheel, scratch, variants, newest) -> set[str]:
    """Install ``wheel`` in a fresh virtualenv of ``python`` and run each variant."""
    venv = scratch / f"venv-{index}"
    # This pip installs into the new virtualenv (--python), which so needs no pip of its own
    # (ensurepip costs seconds); --no-compile: byte-compiling Django is not worth one run.
    run([python, "-m", "venv", "--without-pip", venv])
    pip = [sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "--quiet"]
    pip.append("--no-compile")
    run([*pip, wheel])
    installs = [None]
    if newest and _versions(venv, scratch)[0] >= (3, 12):
        # Django 6.0, and 5.2 with the backport (as the README says for Python >= 3.12) too:
        # every Django version the classifiers name is run.
        installs += [["Django~=6.0.0"], [f"{wheel}[backport]", "Django~=5.2.0"]]
    exercised = set()
    for extra in installs:
        if extra:
            run([*pip, *extra])
        (major, minor), django_version = _versions(venv, scratch)
        exercised |= {f"Python {major}.{minor}", f"Django {_minor(django_version)}"}
        for variant in variants if not extra else ["admin"]:
            label = f"Python {major}.{minor}, Django {django_version}, {variant}"
            run_variant(venv, scratch, variant, label)
    return exercised


def _versions(venv, scratch) -> tuple[tuple[int, int], str]:
    """Return the virtualenv's Python (major, minor) and its Django version."""
    code = "import sys, django; print(*sys.version_info[:2], django.get_version())"
    major, minor, django_version = run([venv / "bin" / "python", "-c", code], cwd=scratch).split()
    return (int(major), int(minor)), django_version


def _minor(version):
    return ".".join(version.split(".")[:2])


def run_variant(venv, scratch, variant, label):
    started = time.monotonic()
    project = Path(tempfile.mkdtemp(prefix=f"{variant}-", dir=scratch))
    try:
        make_project(venv, project)
        output = run_project(venv, project, variant)
    except Failure as exc:
        raise Failure(f"{label}: {exc}") from None
    print(f"== {label}: {output.strip()} ({time.monotonic() - started:.0f}s)")


def make_project(venv, project):
    """Make a project as a newcomer would: startproject, startapp, and the README's settings."""
    bin_dir = venv / "bin"
    run([bin_dir / "django-admin", "startproject", "mysite", project], cwd=project)
    run([bin_dir / "python", "manage.py", "startapp", "shop"], cwd=project)
    shutil.copy(STRANGER / "smoke_settings.py", project / "mysite" / "smoke_settings.py")
    shutil.copy(STRANGER / "urls.py", project / "mysite" / "urls.py")
    shutil.copy(STRANGER / "shop_tasks.py", project / "shop" / "tasks.py")
    shutil.copy(STRANGER / "smoke.py", project / "smoke.py")


def run_project(venv, project, variant) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE")}
    env.update(DJANGO_SETTINGS_MODULE="mysite.smoke_settings", JOBS_SMOKE_VARIANT=variant)
    python = venv / "bin" / "python"

    def manage(*arguments, timeout=300):
        return run([python, "manage.py", *arguments], cwd=project, env=env, timeout=timeout)

    manage("check", "--fail-level", "WARNING")
    manage("migrate", "--noinput")
    task_id = run([python, "smoke.py", "enqueue"], cwd=project, env=env).strip()
    manage("runworker", "--burst", "--concurrency", "1", timeout=120)
    return run([python, "smoke.py", "verify", task_id], cwd=project, env=env)


if __name__ == "__main__":
    main()
