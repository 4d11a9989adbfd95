"""System checks that may read the database: those runworker runs."""

import pytest
from django.core import checks


@pytest.mark.django_db  # Django 6's checks of these tags may query the database
def test_runworker_runs_the_jobs_settings_check_and_no_web_check(settings):
    from django.core.management import load_command_class

    settings.JOBS_CONCURRENCY = 0
    command = load_command_class("jobs", "runworker")
    selected = checks.run_checks(tags=command.requires_system_checks)
    assert "jobs.E001" in [error.id for error in selected]
    assert not {"urls", "templates", "admin"} & set(command.requires_system_checks)
