"""In Chromium against the real ASGI server: an admin creates an organisation, invites a
person to it, and that person opens the link, sets a password and sees the dashboard; the
pages on the way pass axe-core at a desk's width and a phone's, in both schemes. The whole
path from an empty database to a first session is test_first_merchant_browser's."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import User

from sessions_app.models import MemberRole, Membership, Merchant
from tests.conftest import LiveServer
from tests.sessions_app.browser import WIDTHS, chromium, look, sign_in

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

PASSWORD = "correct horse battery"
NEW_PASSWORD = "a long and unusual phrase 42"


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
