"""``manage.py bootstrap_admin`` makes the first admin, who then sees a working dashboard:
a new superuser, or an account made before (by ``createsuperuser``) given the role."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from sessions_app.models import AuditEvent, MemberRole, Membership
from tests.support.factories.accounts import PASSWORD, signed_in

pytestmark = pytest.mark.django_db


def test_a_new_superuser_is_an_admin_and_sees_the_dashboard(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", PASSWORD)
    out = io.StringIO()
    call_command(
        "bootstrap_admin", "--no-input", username="root", email="root@example.com", stdout=out
    )
    assert "root is an admin of the dashboard." in out.getvalue()
    root = User.objects.get(username="root")
    assert root.is_superuser
    assert Membership.objects.get(user=root).role == MemberRole.ADMIN
    browser = signed_in(root)
    overview = browser.get("/")
    assert overview.status_code == 200
    assert ">root</a> · Admin" in overview.content.decode()
    assert browser.get("/people/").status_code == 200
    assert browser.get("/organisations/").status_code == 200
    assert AuditEvent.objects.get(action="person.made_admin").actor == root


def test_an_account_made_by_createsuperuser_before_is_given_the_role() -> None:
    earlier = User.objects.create_superuser("earlier", "e@example.com", PASSWORD)
    assert signed_in(earlier).get("/").status_code == 403  # a role only an admin gives
    call_command("bootstrap_admin", existing="earlier", stdout=io.StringIO())
    assert signed_in(earlier).get("/").status_code == 200


def test_nothing_is_made_without_what_createsuperuser_needs() -> None:
    with pytest.raises(CommandError):
        call_command("bootstrap_admin", "--no-input", stdout=io.StringIO())
    with pytest.raises(CommandError, match="no account is named 'nobody'"):
        call_command("bootstrap_admin", existing="nobody", stdout=io.StringIO())
    assert not Membership.objects.exists()
