"""In Chromium against the real ASGI server: an admin creates an organisation, invites a
person to it, and that person opens the link, sets a password and sees the dashboard; the
pages on the way pass axe-core at a desk's width and a phone's."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page

from sessions_app.models import MemberRole, Membership, Merchant, OrganisationKind
from tests.conftest import LiveServer
from tests.sessions_app.browser import axe_violations, chromium, sign_in

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

PASSWORD = "correct horse battery"
NEW_PASSWORD = "a long and unusual phrase 42"
#: Where the screenshots of this journey go, to look at.
SHOTS = Path(os.environ.get("OANP_PEOPLE_SHOTS", "/tmp/shots28"))
WIDTHS = {"1440": {"width": 1440, "height": 900}, "390": {"width": 390, "height": 844}}


def look(page: Page, name: str) -> None:
    """Screenshot the page at each width, and judge it with axe-core at each."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width, viewport in WIDTHS.items():
        page.set_viewport_size(viewport)
        page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)
        assert axe_violations(page) == [], (name, width)
    page.set_viewport_size(WIDTHS["1440"])


def test_an_admin_invites_a_person_who_sets_a_password_and_signs_in(
    live_arbiter: LiveServer,
) -> None:
    boss = User.objects.create_user("boss", password=PASSWORD)
    Membership.objects.create(user=boss, role=MemberRole.ADMIN)
    base = live_arbiter.url
    with chromium() as browser:
        admin = browser.new_page(viewport=WIDTHS["1440"])
        sign_in(admin, base, "boss", PASSWORD)
        admin.click("nav >> text=Organisations")
        admin.fill("#id_name", "Jet Fares")
        admin.select_option("#id_kind", "merchant")
        admin.click("#new-organisation button[type=submit]")
        admin.wait_for_selector("h1:has-text('Jet Fares')")
        created_at = admin.url

        admin.fill("#id_email", "carol@example.com")
        assert admin.input_value("#id_role") == "merchant_member"
        admin.click("#invite button[type=submit]")
        admin.wait_for_selector("#invited-link")
        # No mail server on the live server: the page says so, and shows the link to copy.
        assert "Mail is not set up here" in admin.inner_text("#invited-title + p")
        assert admin.locator("#invitations tbody tr").count() == 1
        look(admin, "organisation-invited")
        link = urlsplit(admin.input_value("#invited-link"))
        admin.goto(f"{base}/organisations/")
        look(admin, "organisations")

        person = browser.new_context(viewport=WIDTHS["1440"]).new_page()
        person.goto(f"{base}{link.path}")
        assert "You will sign in as carol@example.com" in person.inner_text("main")
        person.fill("#id_new_password1", "carol")
        person.fill("#id_new_password2", "carol")
        person.click("button[type=submit]")
        person.wait_for_selector(".error-summary")
        look(person, "invitation-refused-password")
        person.fill("#id_new_password1", NEW_PASSWORD)
        person.fill("#id_new_password2", NEW_PASSWORD)
        person.click("button[type=submit]")
        person.wait_for_url(f"{base}/")
        assert "carol@example.com · Merchant member" in person.inner_text("header")
        look(person, "invited-dashboard")

        person.goto(f"{base}{link.path}")
        assert "This invitation was used already" in person.inner_text("#reason")
        look(person, "invitation-used")

        admin.goto(f"{base}/people/")
        assert admin.locator("#people tbody tr").count() == 2
        assert admin.locator("#invitations").count() == 0
        look(admin, "people")
    # Read after the browser is gone: Playwright's loop makes the ORM refuse inside it.
    organisation = Merchant.objects.get(name="Jet Fares")
    assert created_at == f"{base}/organisations/{organisation.pk}/"
    carol = Membership.objects.get(user__username="carol@example.com")
    assert (carol.role, carol.merchant) == (MemberRole.MERCHANT_MEMBER, organisation)


def test_a_platform_member_adds_an_agent_and_copies_its_key(live_arbiter: LiveServer) -> None:
    platform = Merchant.objects.create(
        name="Fly Buyers", slug="fly-buyers", kind=OrganisationKind.BUYER_PLATFORM
    )
    bea = User.objects.create_user("bea", password=PASSWORD)
    Membership.objects.create(user=bea, role=MemberRole.BUYER_MEMBER, merchant=platform)
    base = live_arbiter.url
    with chromium() as browser:
        page = browser.new_page(viewport=WIDTHS["1440"])
        sign_in(page, base, "bea", PASSWORD)
        page.click("nav >> text=Agents")
        page.wait_for_url(f"{base}/buyer-agents/")
        look(page, "buyer-agents-empty")
        page.fill("#id_agent_id", "fly-buyer-1")
        page.click("#new-agent button[type=submit]")
        page.wait_for_url(f"{base}/buyer-agents/fly-buyer-1/")
        page.fill("#id_label", "production")
        page.click("#issue-key button[type=submit]")
        page.wait_for_selector("#issued-key")
        assert page.input_value("#issued-key").startswith("oanp_")
        assert page.locator("#keys tbody tr").count() == 1
        look(page, "buyer-agent-key-issued")
