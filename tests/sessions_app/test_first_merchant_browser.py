"""The README's first run, in Chromium against the real ASGI server and Celery worker, on an
empty database, with a second factor required of operators and admins as in production:

``bootstrap_admin`` makes the first admin, who sets up an authenticator app, creates a merchant
and a buyer platform and invites a person to each; the merchant's manager chooses a password,
sets up two-step sign-in and adds a hosted agent with its limits; the platform's member adds a
buyer agent and issues its key; ``oanp negotiate``, given that key, agrees with the hosted
agent; and each organisation sees the session on its own dashboard.

Every page on the way is screenshotted at 1440 and 390 px in the light and the dark scheme
(var/screenshots/first-run-*) and judged by axe-core in each."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.core.management import call_command
from playwright.sync_api import Browser, Page

from arbiter_app.models import Session
from sessions_app.models import AgentProfile, MemberRole, Membership, PlatformAgent
from tests.conftest import HEARTBEATS, LiveServer, Worker, serve, suite_database_url
from tests.sessions_app.browser import WIDTHS, app_code, chromium, look

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

ADMIN_PASSWORD = "first light over the bay"
MANAGER_PASSWORD = "seven quiet harbours"
BUYER_PASSWORD = "a kettle of red kites"
#: The oanp command installed beside this Python, as a buyer's machine runs it.
OANP = Path(sys.executable).with_name("oanp")


@pytest.fixture
def production_arbiter(celery_worker_process: Worker) -> Iterator[LiveServer]:
    """A server of its own that requires a second factor of operators and admins, as a
    production start does (the suite's shared one does not)."""
    with serve(
        {"DATABASE_URL": suite_database_url(), "OANP_REQUIRE_2FA": "1", **HEARTBEATS}
    ) as server:
        yield server


def set_up_an_app(page: Page) -> None:
    """On the set-up page: type the secret into the "app", confirm with its code, keep the
    recovery codes shown once."""
    secret = page.inner_text("#secret")
    page.fill("#id_code", app_code(secret))
    page.click("button:has-text('Turn on')")
    assert page.locator("#recovery-codes li").count() == 10
    page.click("text=I have kept them: go on")


def password_step(page: Page, base: str, username: str, password: str) -> None:
    page.goto(f"{base}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")


def create_and_invite(
    page: Page, base: str, name: str, kind: str, email: str, role: MemberRole
) -> str:
    """Create an organisation of ``kind`` and invite ``email`` to it as ``role``; the link,
    copied from the page (mail here is only printed)."""
    page.goto(f"{base}/organisations/")
    page.fill("#id_name", name)
    page.select_option("#id_kind", kind)
    page.click("#new-organisation button[type=submit]")
    page.wait_for_selector(f"h1:has-text('{name}')")
    page.fill("#id_email", email)
    page.select_option("#id_role", role)
    page.click("#invite button[type=submit]")
    page.wait_for_selector("#invited-link")
    return urlsplit(page.input_value("#invited-link")).path


def accept(browser: Browser, base: str, link: str, password: str) -> Page:
    """The invitee, in a browser of their own: opens the link, chooses a password, lands on
    the dashboard."""
    page = browser.new_context(viewport=WIDTHS["1440"]).new_page()
    page.goto(f"{base}{link}")
    page.fill("#id_new_password1", password)
    page.fill("#id_new_password2", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")
    return page


def test_from_an_empty_database_to_a_merchant_s_first_session(
    production_arbiter: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not Membership.objects.exists()
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", ADMIN_PASSWORD)
    call_command(
        "bootstrap_admin", username="root", email="root@arbiter.example", interactive=False
    )
    base = production_arbiter.url
    outcome: dict[str, Any] = {}
    with chromium() as browser:
        admin = browser.new_page(viewport=WIDTHS["1440"])
        password_step(admin, base, "root", ADMIN_PASSWORD)
        # Required of an admin: the app first, before any page.
        admin.wait_for_url(f"{base}/account/two-factor/?next=%2F")
        look(admin, "first-run-admin-two-factor")
        set_up_an_app(admin)
        admin.wait_for_url(f"{base}/")
        assert "root · Admin" in admin.inner_text("header")

        to_manager = create_and_invite(
            admin, base, "SkyFare", "merchant", "mia@skyfare.example", MemberRole.MERCHANT_MANAGER
        )
        look(admin, "first-run-merchant-invited")
        to_buyer = create_and_invite(
            admin,
            base,
            "Tripwise",
            "buyer_platform",
            "bea@tripwise.example",
            MemberRole.BUYER_MEMBER,
        )
        assert "Buyer-platform member" in admin.inner_text("#invitations")
        admin.goto(f"{base}/organisations/")
        assert admin.locator("#organisations tbody tr").count() == 2
        look(admin, "first-run-organisations")

        manager = accept(browser, base, to_manager, MANAGER_PASSWORD)
        assert "mia@skyfare.example · Merchant manager" in manager.inner_text("header")
        manager.click("header >> text=mia@skyfare.example")
        manager.click("text=Set up two-step sign-in")
        set_up_an_app(manager)
        manager.goto(f"{base}/account/")
        assert manager.inner_text("#two-step-state").startswith("On:")
        look(manager, "first-run-manager-account")
        manager.click("nav >> text=Agents")
        manager.click("text=New agent")
        manager.fill("#id_agent_id", "skyfare-sfo")
        manager.fill("#id_limits-0-item", "SFO-JFK")
        manager.fill("#id_limits-0-currency", "USD")
        manager.fill("#id_limits-0-floor_price", "280")
        manager.fill("#id_limits-0-ideal_price", "400")
        manager.select_option("#id_strategy", "reference")
        look(manager, "first-run-agent-new")
        manager.click("button:has-text('Create agent')")
        manager.wait_for_url(f"{base}/agents/skyfare-sfo/")
        look(manager, "first-run-agent")

        buyer = accept(browser, base, to_buyer, BUYER_PASSWORD)
        assert "bea@tripwise.example · Buyer-platform member" in buyer.inner_text("header")
        buyer.click("nav >> text=Agents")
        buyer.wait_for_url(f"{base}/buyer-agents/")
        buyer.fill("#id_agent_id", "tripwise-1")
        buyer.click("#new-agent button[type=submit]")
        buyer.wait_for_url(f"{base}/buyer-agents/tripwise-1/")
        buyer.fill("#id_label", "production")
        buyer.click("#issue-key button[type=submit]")
        api_key = buyer.input_value("#issued-key")
        look(buyer, "first-run-buyer-key-issued")

        # The buyer's side, from its own machine: the command as the README types it.
        run = subprocess.run(
            [
                OANP,
                "negotiate",
                "--server",
                base,
                "--api-key",
                api_key,
                "--agent-id",
                "tripwise-1",
                "--merchant",
                "skyfare-sfo",
                "--item",
                "route=SFO-JFK",
                "--currency",
                "USD",
                "--ceiling",
                "420",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert run.returncode == 0, (run.stdout, run.stderr)
        session_id = run.stdout.split("session ", 1)[1].split()[0]

        for page, name in ((manager, "manager"), (buyer, "buyer")):
            page.goto(f"{base}/sessions/")
            page.click(f"a:has-text('{session_id}')")
            page.wait_for_url(f"{base}/sessions/{session_id}/")
            assert "AGREED" in page.inner_text("main").upper()
            look(page, f"first-run-session-{name}")
        outcome["stdout"] = run.stdout
    # Read after the browser is gone: Playwright's loop makes the ORM refuse inside it.
    assert "AGREED at" in outcome["stdout"]
    assert "VERIFIED against the arbiter's JWKS" in outcome["stdout"]
    session = Session.objects.get(session_id=session_id)
    assert (session.buyer_agent_id, session.merchant_agent_id) == ("tripwise-1", "skyfare-sfo")
    assert AgentProfile.objects.get(agent_id="skyfare-sfo").merchant.name == "SkyFare"
    assert PlatformAgent.objects.get(agent_id="tripwise-1").organisation.name == "Tripwise"
