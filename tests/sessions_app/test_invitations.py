"""An admin invites a person by email with a role; the mailed link, also shown once to copy,
opens a page where the person sets a password the validators accept, once, before it expires,
and lands on the dashboard. A link that opens nothing says why on a plain page."""

from __future__ import annotations

import importlib
import re
from datetime import timedelta

import pytest
from django.apps import apps as django_apps
from django.contrib.auth.models import User
from django.core import mail
from django.db import connection
from django.test import Client
from django.utils import timezone

from sessions_app import invitations
from sessions_app.models import AuditEvent, Invitation, MemberRole, Membership, Merchant
from tests.sessions_app.pages import error_summary_in, messages_in
from tests.support.factories.accounts import member, merchant, signed_in

pytestmark = pytest.mark.django_db

GOOD_PASSWORD = "a long and unusual phrase 42"
LINK = re.compile(r"https?://[^/\s]+(/invitations/[^\s/]+/)")


@pytest.fixture
def admin_browser() -> Client:
    return signed_in(member("boss", MemberRole.ADMIN))


def invite(admin_browser: Client, email: str, role: str, organisation: Merchant | None) -> str:
    """The path of the link the invitation was mailed with, after checking the page showed it."""
    answer = admin_browser.post(
        "/people/invite/",
        {"email": email, "role": role, "organisation": organisation.pk if organisation else ""},
        follow=True,
    )
    page = answer.content.decode()
    assert messages_in(page) == [f"Invitation to {email.lower()} created."]
    found = LINK.search(mail.outbox[-1].body)
    assert found, mail.outbox[-1].body
    assert mail.outbox[-1].to == [email.lower()]
    assert f'value="http://127.0.0.1:8000{found.group(1)}"' in page
    # Shown once: the next page has it no more.
    assert found.group(1) not in admin_browser.get("/people/").content.decode()
    return found.group(1)


def test_an_invited_person_sets_a_password_and_sees_the_dashboard(admin_browser: Client) -> None:
    shop = merchant("a")
    path = invite(admin_browser, "Carol@Example.com", "merchant_member", shop)
    event = AuditEvent.objects.get(action="invitation.sent")
    assert (event.target, event.detail) == (
        "carol@example.com",
        {"role": "merchant_member", "organisation": "a"},
    )
    assert "carol@example.com" in admin_browser.get(f"/organisations/{shop.pk}/").content.decode()

    visitor = Client()
    page = visitor.get(path)
    assert page.status_code == 200
    assert "merchant member at Merchant a" in page.content.decode()
    weak = visitor.post(path, {"new_password1": "password1", "new_password2": "password1"})
    assert weak.status_code == 400
    assert "This password is too common." in error_summary_in(weak.content.decode())
    assert not User.objects.filter(username="carol@example.com").exists()

    done = visitor.post(
        path, {"new_password1": GOOD_PASSWORD, "new_password2": GOOD_PASSWORD}, follow=True
    )
    assert done.redirect_chain == [("/", 302)]
    assert ">carol@example.com</a> · Merchant member" in done.content.decode()
    carol = User.objects.get(username="carol@example.com")
    assert Membership.objects.get(user=carol).merchant == shop
    assert Client().login(username="carol@example.com", password=GOOD_PASSWORD)
    assert AuditEvent.objects.filter(action="invitation.accepted", actor=carol).exists()

    reused = Client().get(path)
    assert reused.status_code == 410
    assert "This invitation was used already" in reused.content.decode()
    again = Client().post(path, {"new_password1": "x" * 20, "new_password2": "x" * 20})
    assert again.status_code == 410
    assert carol.password == User.objects.get(pk=carol.pk).password


def test_an_address_with_an_account_is_not_invited(admin_browser: Client) -> None:
    User.objects.create_user("dave", "dave@example.com")
    answer = admin_browser.post("/people/invite/", {"email": "DAVE@example.com", "role": "admin"})
    assert answer.status_code == 400
    assert "An account already uses dave@example.com: change its role instead." in (
        error_summary_in(answer.content.decode())
    )
    assert not Invitation.objects.exists()
    assert not mail.outbox


def test_a_second_invitation_to_a_pending_address_is_refused(admin_browser: Client) -> None:
    invite(admin_browser, "erin@example.com", "operator", None)
    answer = admin_browser.post("/people/invite/", {"email": "erin@example.com", "role": "admin"})
    assert answer.status_code == 400
    assert (
        "An invitation to erin@example.com is pending: send it again or revoke it"
        in error_summary_in(answer.content.decode())
    )


def test_a_role_that_needs_an_organisation_is_not_invited_without_one(
    admin_browser: Client,
) -> None:
    answer = admin_browser.post(
        "/people/invite/", {"email": "f@example.com", "role": "merchant_manager"}
    )
    assert answer.status_code == 400
    assert "A merchant manager belongs to an organisation: choose one." in error_summary_in(
        answer.content.decode()
    )
    assert not Invitation.objects.exists()


def test_an_expired_link_says_so_and_sending_again_makes_a_new_one(
    admin_browser: Client,
) -> None:
    old = invite(admin_browser, "gil@example.com", "operator", None)
    invitation = Invitation.objects.get()
    assert invitation.expires_at - invitation.sent_at == timedelta(hours=72)
    Invitation.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    expired = Client().get(old)
    assert expired.status_code == 410
    assert "This invitation has expired" in expired.content.decode()

    answer = admin_browser.post(f"/invitations/{invitation.pk}/send-again/", follow=True)
    assert messages_in(answer.content.decode()) == [
        "Invitation to gil@example.com sent again; the old link no longer works."
    ]
    fresh = LINK.search(mail.outbox[-1].body).group(1)  # type: ignore[union-attr]
    assert fresh != old
    assert Client().get(fresh).status_code == 200
    replaced = Client().get(old)
    assert replaced.status_code == 410
    assert "replaced by a newer one" in replaced.content.decode()
    assert AuditEvent.objects.filter(action="invitation.resent").count() == 1


def test_a_revoked_link_opens_nothing(admin_browser: Client) -> None:
    path = invite(admin_browser, "hal@example.com", "admin", None)
    invitation = Invitation.objects.get()
    admin_browser.post(f"/invitations/{invitation.pk}/revoke/")
    revoked = Client().post(path, {"new_password1": GOOD_PASSWORD, "new_password2": GOOD_PASSWORD})
    assert revoked.status_code == 410
    assert "This invitation was revoked" in revoked.content.decode()
    assert not User.objects.filter(username="hal@example.com").exists()
    assert AuditEvent.objects.filter(action="invitation.revoked", target="hal@example.com")
    # Spent: neither sent again nor revoked twice.
    assert admin_browser.post(f"/invitations/{invitation.pk}/send-again/").status_code == 404


@pytest.mark.parametrize(
    "tampered",
    [
        lambda path: path[:-3] + ("A" if path[-3] != "A" else "B") + path[-2:],
        lambda path: path.replace("/invitations/", "/invitations/9"),
        lambda path: "/invitations/not-a-token/",
        lambda path: "/invitations/" + "%00" * 3 + "/",
    ],
)
def test_a_tampered_link_gets_a_plain_page(admin_browser: Client, tampered: object) -> None:
    path = invite(admin_browser, "ivy@example.com", "operator", None)
    answer = Client().get(tampered(path))  # type: ignore[operator]
    assert answer.status_code in (404, 410)
    assert answer.status_code != 500


def test_a_tampered_signature_is_not_valid(admin_browser: Client) -> None:
    path = invite(admin_browser, "jo@example.com", "operator", None)
    token = path.split("/")[2]
    forged = f"/invitations/{token.rsplit(':', 1)[0]}:forged/"
    answer = Client().get(forged)
    assert answer.status_code == 404
    assert "This invitation link is not valid" in answer.content.decode()


def test_other_roles_cannot_send_again_or_revoke(admin_browser: Client) -> None:
    invite(admin_browser, "kim@example.com", "operator", None)
    invitation = Invitation.objects.get()
    for role, tied in (
        (MemberRole.MERCHANT_MANAGER, merchant("a")),
        (MemberRole.OPERATOR, None),
    ):
        probe = signed_in(member(f"probe-{role}", role, tied))
        for action in ("send-again", "revoke"):
            assert probe.post(f"/invitations/{invitation.pk}/{action}/").status_code == 403
    invitation.refresh_from_db()
    assert invitation.revoked_at is None
    assert AuditEvent.objects.filter(action__startswith="invitation.").count() == 1


def test_an_invitation_made_meanwhile_by_another_admin_is_the_only_one(
    admin_browser: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two admins inviting one address at once: the second's check ran before the first's
    invitation was committed, so it is the database that refuses the second."""
    invite(admin_browser, "hal@example.com", "operator", None)
    monkeypatch.setattr(invitations, "_pending", Invitation.objects.none)
    answer = admin_browser.post("/people/invite/", {"email": "hal@example.com", "role": "admin"})
    assert answer.status_code == 400
    assert (
        "An invitation to hal@example.com is pending: send it again or revoke it"
        in error_summary_in(answer.content.decode())
    )
    assert Invitation.objects.get().role == "operator"
    assert AuditEvent.objects.filter(action="invitation.sent").count() == 1


def test_inviting_an_address_again_once_its_invitation_expired_replaces_it(
    admin_browser: Client,
) -> None:
    old = invite(admin_browser, "ivy@example.com", "operator", None)
    Invitation.objects.update(expires_at=timezone.now() - timedelta(minutes=1))
    new = invite(admin_browser, "ivy@example.com", "admin", None)
    expired, fresh = Invitation.objects.order_by("pk")
    assert expired.revoked_at is not None
    assert (fresh.role, fresh.revoked_at) == ("admin", None)
    assert Client().get(old).status_code == 410
    assert Client().get(new).status_code == 200


def test_an_account_made_while_the_link_is_used_refuses_the_link_plainly(
    admin_browser: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The account appeared (by a shell, say) after the page checked for one: the form says
    so instead of failing, and the invitation stays unused."""
    path = invite(admin_browser, "jo@example.com", "operator", None)
    User.objects.create_user("jo@example.com")
    monkeypatch.setattr(invitations, "_has_account", lambda email: False)
    answer = Client().post(path, {"new_password1": GOOD_PASSWORD, "new_password2": GOOD_PASSWORD})
    assert answer.status_code == 410
    assert "jo@example.com has an account already: sign in instead." in answer.content.decode()
    assert Invitation.objects.get().accepted_at is None
    assert not Membership.objects.filter(user__username="jo@example.com").exists()


def test_the_migration_closes_all_but_the_newest_open_invitation_of_an_address() -> None:
    """Doubles made before the constraint (two admins at once): the older are revoked, and
    the constraint then holds. The DDL rolls back with the test's transaction."""
    migration = importlib.import_module("sessions_app.migrations.0009_open_invitations")
    (constraint,) = Invitation._meta.constraints
    boss = member("boss-2", MemberRole.ADMIN)
    now = timezone.now()

    def made(email: str) -> Invitation:
        return Invitation.objects.create(
            email=email, role="operator", invited_by=boss, nonce="n", sent_at=now, expires_at=now
        )

    with connection.schema_editor() as editor:
        editor.remove_constraint(Invitation, constraint)
        older, newer, other = made("kim@example.com"), made("Kim@example.com"), made("lu@e.com")
        migration.close_doubles(django_apps, editor)
        # The rows' foreign keys are checked now, as the migration's own rows would have been
        # long before: PostgreSQL makes no index on a table with checks pending.
        editor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        editor.add_constraint(Invitation, constraint)
    open_ones = Invitation.objects.filter(revoked_at__isnull=True)
    assert sorted(open_ones.values_list("pk", flat=True)) == [newer.pk, other.pk]
    assert Invitation.objects.get(pk=older.pk).revoked_at is not None
