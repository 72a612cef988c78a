"""Admins list the signing keys and rotate one now; the JWKS then publishes both; the
rotation is in the audit log; nobody else sees the page or rotates."""

from __future__ import annotations

from datetime import datetime

import pytest
from django.contrib.auth.models import User
from django.test import Client

from sessions_app.models import AuditEvent, MemberRole, Membership, Merchant
from sessions_app.templatetags.ago import when
from tests.sessions_app.pages import error_summary_in, messages_in

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery"


def member(username: str, role: str, merchant: Merchant | None = None) -> Client:
    user = User.objects.create_user(username, password=PASSWORD)
    Membership.objects.create(user=user, role=role, merchant=merchant)
    browser = Client(HTTP_HOST="localhost")
    assert browser.login(username=username, password=PASSWORD)
    return browser


def test_an_admin_rotates_now_and_the_jwks_publishes_both_keys() -> None:
    admin = member("admin", MemberRole.ADMIN)
    before = admin.get("/.well-known/jwks.json").json()["keys"]
    assert len(before) == 1
    page = admin.get("/keys/").content.decode()
    assert before[0]["kid"] in page
    assert 'href="/.well-known/jwks.json"' in page
    assert 'href="/oanp/v0.1/keys"' in page

    answer = admin.post("/keys/rotate/", {"alg": "ES256", "confirmed": "yes"}, follow=True)
    assert answer.redirect_chain == [("/keys/", 302)]

    jwks = admin.get("/.well-known/jwks.json").json()["keys"]
    assert len(jwks) == 2
    fresh = next(k for k in jwks if k["kid"] != before[0]["kid"])
    assert fresh["alg"] == "ES256"
    history = {k["kid"]: k["state"] for k in admin.get("/oanp/v0.1/keys").json()["keys"]}
    assert history == {before[0]["kid"]: "retiring", fresh["kid"]: "active"}

    page = answer.content.decode()
    assert messages_in(page) == [f"Signing key rotated; the new ES256 key id is {fresh['kid']}."]
    for key in admin.get("/oanp/v0.1/keys").json()["keys"]:
        assert when(datetime.fromisoformat(key["activated_at"])) in page
    assert fresh["kid"] in page
    assert "retiring" in page

    event = AuditEvent.objects.get()
    assert (event.action, event.target) == ("key.rotate", fresh["kid"])
    assert event.actor.get_username() == "admin"
    assert event.detail == {"alg": "ES256", "replaced": [before[0]["kid"]]}
    assert fresh["kid"] in admin.get("/audit/").content.decode()


def test_rotating_asks_first_and_a_get_or_an_unconfirmed_post_changes_nothing() -> None:
    admin = member("admin", MemberRole.ADMIN)
    kids = [k["kid"] for k in admin.get("/.well-known/jwks.json").json()["keys"]]
    page = admin.get("/keys/").content.decode()
    assert 'method="get" action="/keys/rotate/"' in page
    for answer in (
        admin.get("/keys/rotate/", {"alg": "ES256"}),
        admin.post("/keys/rotate/", {"alg": "ES256"}),
        admin.post("/keys/rotate/", {"alg": "ES256", "confirmed": "no"}),
    ):
        assert answer.status_code == 200
        confirm = answer.content.decode()
        assert "Are you sure?" in confirm
        assert kids[0] in confirm  # the key that would start retiring
        assert '<input type="hidden" name="confirmed" value="yes">' in confirm
        assert '<input type="hidden" name="alg" value="ES256">' in confirm
    assert [k["kid"] for k in admin.get("/.well-known/jwks.json").json()["keys"]] == kids
    assert not AuditEvent.objects.exists()


def test_an_unknown_algorithm_is_refused_and_changes_nothing() -> None:
    admin = member("admin", MemberRole.ADMIN)
    kids = [k["kid"] for k in admin.get("/.well-known/jwks.json").json()["keys"]]
    for answer in (
        admin.post("/keys/rotate/", {"alg": "HS256", "confirmed": "yes"}),
        admin.get("/keys/rotate/", {"alg": "HS256"}),
    ):
        # Back on the keys page, whose form chose it, with the error linked to its field.
        assert answer.status_code == 400
        page = answer.content.decode()
        summary = error_summary_in(page)
        assert "No key was rotated:" in summary
        assert (
            '<a href="#alg">Algorithm: Select a valid choice. HS256 is not one of the available'
            in summary
        )
        assert 'aria-describedby="alg_error"' in page
        assert 'id="alg_error"' in page
    assert "This field is required." in error_summary_in(
        admin.get("/keys/rotate/").content.decode()
    )
    assert [k["kid"] for k in admin.get("/.well-known/jwks.json").json()["keys"]] == kids
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize("role", [MemberRole.OPERATOR, MemberRole.MERCHANT_MANAGER])
def test_only_admins_see_keys_and_rotate(role: str) -> None:
    merchant = Merchant.objects.create(name="Skyways", slug="skyways")
    browser = member("someone", role, merchant if role == MemberRole.MERCHANT_MANAGER else None)
    kids = [k["kid"] for k in browser.get("/.well-known/jwks.json").json()["keys"]]
    assert browser.get("/keys/").status_code == 403
    assert browser.get("/keys/rotate/", {"alg": "Ed25519"}).status_code == 403
    assert browser.post("/keys/rotate/", {"alg": "Ed25519", "confirmed": "yes"}).status_code == 403
    assert browser.get("/audit/").status_code == 403
    assert [k["kid"] for k in browser.get("/.well-known/jwks.json").json()["keys"]] == kids
    assert not AuditEvent.objects.exists()
    nav = browser.get("/").content.decode()
    assert 'href="/keys/"' not in nav
    assert 'href="/audit/"' not in nav


def test_rotating_requires_csrf() -> None:
    User.objects.create_user("admin", password=PASSWORD)
    Membership.objects.create(user=User.objects.get(username="admin"), role=MemberRole.ADMIN)
    strict = Client(HTTP_HOST="localhost", enforce_csrf_checks=True)
    assert strict.login(username="admin", password=PASSWORD)
    assert strict.post("/keys/rotate/", {"alg": "Ed25519", "confirmed": "yes"}).status_code == 403
    assert not AuditEvent.objects.exists()
