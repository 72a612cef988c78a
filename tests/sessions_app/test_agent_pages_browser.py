"""In Chromium against the real ASGI server: an agent's page lists its deliveries and leads
to all of them; a hosted merchant that reveals after the end fills the session page's zone
of agreement. Screenshots in var/screenshots."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from arbiter_app import selectors as arbiter
from arbiter_app.models import Session
from sessions_app import hosted_agents
from sessions_app.models import MemberRole
from tests.arbiter_app.test_deliveries import Receiver
from tests.conftest import LiveServer
from tests.sessions_app.browser import chromium, screenshot, sign_in
from tests.sessions_app.test_deliveries_page import (  # noqa: F401 - acp_server is the fixture
    acp_server,
    failed_handoff,
)
from tests.sessions_app.test_handoff_panel import SESSION
from tests.support.factories.accounts import (
    PASSWORD,
    HostedNegotiation,
    hosted_agent,
    member,
    merchant,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_agent_page_lists_its_deliveries(
    settings: Any,
    live_arbiter: LiveServer,
    acp_server: Receiver,  # noqa: F811
) -> None:
    settings.OANP_ALLOW_PRIVATE_TARGETS = True
    shop = merchant("sfo")
    handoff = failed_handoff(Client(), shop, f"{acp_server.url}/acp")
    member("alice", MemberRole.MERCHANT_MANAGER, shop)
    base = live_arbiter.url
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        sign_in(page, base, "alice", PASSWORD)
        page.goto(f"{base}/agents/merchant-sfo/")
        listed = page.inner_text("#agent-deliveries")
        assert SESSION in listed
        assert "failed" in listed
        assert "400 (rejected)" in listed
        page.locator("#deliveries-section").scroll_into_view_if_needed()
        screenshot(page, "agent-deliveries")
        page.click("#agent-deliveries a:has-text('Attempts')")
        page.wait_for_url(f"{base}/deliveries/handoff/{handoff.pk}/")
        page.go_back()
        page.click("#agent-deliveries-all")
        page.wait_for_url(f"{base}/deliveries/?agent=merchant-sfo")
        assert page.input_value("#id_agent") == "merchant-sfo"
        assert SESSION in page.inner_text("#deliveries")


def test_a_hosted_reveal_after_the_end_fills_the_zone_panel(live_arbiter: LiveServer) -> None:
    shop = merchant("sfo")
    hosted_agent(shop, reveal_after_end=True)
    client = Client()
    negotiation = HostedNegotiation(client, "hosted-sfo", session_id="sess-revealed")
    negotiation.play(nudge=lambda: hosted_agents.answer("sess-revealed"))
    # The end queued the reveal; a worker of the suite may have sent it already.
    hosted_agents.reveal_after_end("sess-revealed")
    session = Session.objects.get(session_id="sess-revealed")
    assert "merchant" in arbiter.revealed_constraints(session)
    buyer = client.post(
        "/oanp/v0.1/sessions/sess-revealed/reveal",
        data=json.dumps(negotiation.buyer.reveal()),
        content_type="application/json",
        headers=negotiation.buyer_key.headers,
    )
    assert buyer.status_code == 200, buyer.content
    member("alice", MemberRole.MERCHANT_MANAGER, shop)
    base = live_arbiter.url
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        sign_in(page, base, "alice", PASSWORD)
        page.goto(f"{base}/sessions/sess-revealed/")
        assert page.inner_text("#zone") == "[280, 420], 140 wide"
        assert page.locator("figure.zone").is_visible()
        screenshot(page, "hosted-reveal-zone")
