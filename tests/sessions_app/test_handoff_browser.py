"""In Chromium against the real ASGI server: the agent page's ACP section, and a session page
with its handoff attempts and the analytics of both reveals. Screenshots in var/screenshots."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from sessions_app import services
from sessions_app.models import AgentProfile, MemberRole
from tests.arbiter_app.test_deliveries import Receiver, Reply, Request
from tests.conftest import LiveServer
from tests.sessions_app.browser import chromium, screenshot, sign_in
from tests.sessions_app.test_handoff_panel import SESSION, agree_and_hand_off
from tests.support.factories.accounts import PASSWORD, admin, hosted_agent, member, merchant
from tests.support.factories.agents import post

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def acp_server() -> Iterator[Receiver]:
    """A 503 first; then the checkout, made at a higher price than it was sent."""
    replies = [503]

    def answer(request: Request) -> Reply:
        if replies:
            return replies.pop(0), {}, b'{"type": "processing_error"}'
        sent = json.loads(request.body)
        dearer = [{**i, "unit_amount": i["unit_amount"] + 1000} for i in sent["line_items"]]
        checkout = {"id": "cs_1", "currency": sent["currency"], "line_items": dearer}
        return 201, {}, json.dumps(checkout).encode()

    server = Receiver(answer).start()
    yield server
    server.stop()


def test_the_agent_page_acp_section(
    settings: Any, live_arbiter: LiveServer, acp_server: Receiver
) -> None:
    shop = merchant("skyways")
    member("mia", MemberRole.MERCHANT_MANAGER, shop)
    profile: AgentProfile = hosted_agent(shop, "skyways-sfo")
    # Configured and tested in this process, where loopback targets are allowed; the server
    # under test keeps the production rule, so the browser sees its refusal of one.
    settings.OANP_ALLOW_PRIVATE_TARGETS = True
    services.configure_acp(
        actor=admin(), profile=profile, endpoint=f"{acp_server.url}/acp", api_key="acp_live_1"
    )
    services.send_acp_test(actor=admin(), profile=profile)  # answered 503
    services.send_acp_test(actor=admin(), profile=profile)  # answered 201
    base = live_arbiter.url
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        sign_in(page, base, "mia", PASSWORD)
        page.goto(f"{base}/agents/skyways-sfo/")
        section = page.inner_text("section:has(#acp-h)")
        assert "key set" in section
        assert "acp_live_1" not in page.content()
        last = page.inner_text("#acp-test")
        assert "201" in last
        assert "accepted" in last
        # The target's settings are folded once set: open them to change it.
        page.click("#acp-settings summary")
        page.fill("#id_endpoint", "http://10.0.0.8/acp")
        page.fill("#id_api_key", "acp_live_2")
        page.click("button:has-text('Save target')")
        errors = page.inner_text("#acp-form")
        assert "The arbiter refused this target" in errors
        assert "not a public address" in errors
        assert page.input_value("#id_api_key") == ""
        page.locator("#acp-h").scroll_into_view_if_needed()
        screenshot(page, "agent-acp")


def test_the_session_page_handoff_and_analytics(
    settings: Any, live_arbiter: LiveServer, acp_server: Receiver
) -> None:
    settings.OANP_ALLOW_PRIVATE_TARGETS = True
    settings.OANP_DELIVERY_RETRY_BASE_SECONDS = 0
    client = Client()
    _, run = agree_and_hand_off(client, merchant("sfo"), f"{acp_server.url}/acp")
    for key, agent in ((run.buyer_key, run.buyer), (run.merchant_key, run.merchant)):
        path = f"/oanp/v0.1/sessions/{SESSION}/reveal"
        assert post(client, key, agent.reveal(), path=path).status_code == 200
    member("olga", MemberRole.OPERATOR)
    base = live_arbiter.url
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        sign_in(page, base, "olga", PASSWORD)
        page.goto(f"{base}/sessions/{SESSION}/")
        assert page.inner_text("#zone") == "[280, 420], 140 wide"
        assert page.inner_text("#buyer-surplus") == "80 (57.1 %)"
        attempts = page.inner_text("#handoff-attempts")
        assert "503" in attempts
        assert "201" in attempts
        assert page.locator("#redeliver").is_visible()
        screenshot(page, "session-analytics-handoff")
        # The flagged handoff is redelivered through the deliveries' confirmation page.
        page.click("#redeliver")
        page.wait_for_selector("#confirm-resend")
        assert "price mismatch flagged" in page.inner_text("#confirm-list")
        page.click("#confirm-resend")
        page.wait_for_url(f"{base}/deliveries/handoff/*/")
        assert page.inner_text(".messages") == "Resending 1 delivery now."
