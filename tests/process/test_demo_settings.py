"""The demo's settings, loaded in a fresh process: DEBUG only when asked, a SECRET_KEY needed."""

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

STRONG_KEY = "a-real-secret-key-from-the-environment-Wq8xZ3kP0vR7tY2m"
SHOW = "from django.conf import settings; print(settings.DEBUG, settings.SECRET_KEY[:12])"


def demo_settings(**environment):
    """Load the demo's settings in a fresh process with only ``environment`` set."""
    env = {key: value for key, value in os.environ.items() if key not in ("DEBUG", "SECRET_KEY")}
    env.update(environment, DJANGO_SETTINGS_MODULE="demo_project.settings")
    return subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {SHOW}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_demo_runs_with_debug_off_unless_asked():
    completed = demo_settings(SECRET_KEY=STRONG_KEY)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["False", "a-real-secre"]


def test_without_a_secret_key_and_debug_off_the_demo_refuses_to_start_and_says_what_to_set():
    completed = demo_settings()
    assert completed.returncode != 0
    assert "ImproperlyConfigured: Set the SECRET_KEY environment variable" in completed.stderr
    assert "DEBUG=1" in completed.stderr


@pytest.mark.parametrize("key", ["", " ", "\t \n"], ids=["empty", "space", "whitespace"])
def test_a_blank_secret_key_is_a_missing_one(key):
    completed = demo_settings(SECRET_KEY=key)
    assert completed.returncode != 0
    assert "ImproperlyConfigured: Set the SECRET_KEY environment variable" in completed.stderr


@pytest.mark.parametrize(
    "key",
    [
        "django-insecure-" + "k8#x!q2@z&w5^v" * 4,  # startproject's key, never for a deployment
        "short-but-not-blank",
        "ab" * 40,  # long, but two characters
    ],
    ids=["insecure-prefix", "short", "few-characters"],
)
def test_a_weak_secret_key_is_refused_with_debug_off(key):
    completed = demo_settings(SECRET_KEY=key)
    assert completed.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY is too weak for DEBUG off" in completed.stderr


def test_with_debug_on_a_weak_key_is_allowed():
    completed = demo_settings(DEBUG="1", SECRET_KEY="short")
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["True", "short"]


def test_debug_asked_for_runs_with_a_development_key():
    completed = demo_settings(DEBUG="1")
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["True", "demo-only-in"]
