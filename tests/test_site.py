from django.apps import apps
from django.core.management import call_command


def test_system_checks_pass() -> None:
    call_command("check", fail_level="WARNING")


def test_project_apps_are_installed() -> None:
    assert apps.is_installed("arbiter_app")
    assert apps.is_installed("sessions_app")
