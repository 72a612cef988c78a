"""In Chromium against the real ASGI server and Celery worker: a merchant signs in, creates a
hosted agent with its limits and an API key, and a buyer agent negotiates with it over HTTP."""

from __future__ import annotations

import time
from decimal import Decimal
from itertools import count

import pytest

from oanp.agents.parties import Agreed, BuyerAgent
from oanp.agents.strategies import ReferenceBuyer
from oanp.agents.vaults import BuyerVault
from oanp.wire.commitments import encode_salt
from sessions_app.models import MemberRole
from tests.conftest import LiveServer, Worker
from tests.sessions_app.browser import chromium, screenshot, sign_in
from tests.support.factories.accounts import PASSWORD, SFO_JFK_ITEM, member, merchant, now
from tests.support.factories.agents import make_agent

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_merchant_creates_a_hosted_agent_that_a_buyer_negotiates_with(
    live_arbiter: LiveServer, celery_worker_process: Worker
) -> None:
    member("mia", MemberRole.MERCHANT_MANAGER, merchant("skyways"))
    base = live_arbiter.url
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        sign_in(page, base, "mia", PASSWORD)
        page.click("nav >> text=Agents")
        assert "No agents yet" in page.inner_text("main")
        screenshot(page, "agents-empty")

        page.click("text=New agent")
        page.fill("#id_agent_id", "skyways-sfo")
        page.fill("#id_limits-0-currency", "JPY")
        page.fill("#id_limits-0-floor_price", "280.5")
        page.click("button:has-text('Create agent')")
        summary = page.locator("[data-error-summary]")
        assert "Limits row 1: Enter both the floor and the ideal price" in summary.inner_text()
        assert page.evaluate("document.activeElement.hasAttribute('data-error-summary')")
        assert page.input_value("#id_agent_id") == "skyways-sfo"  # kept, and the limits too
        assert page.input_value("#id_limits-0-floor_price") == "280.5"
        page.fill("#id_limits-0-ideal_price", "400")
        page.click("button:has-text('Create agent')")
        assert "JPY takes no decimals" in page.locator("[data-error-summary]").inner_text()
        screenshot(page, "agents-form-errors")
        page.fill("#id_limits-0-currency", "USD")
        page.fill("#id_limits-0-floor_price", "280")
        page.fill("#id_limits-1-item", "LAX-SFO")
        page.fill("#id_limits-1-currency", "USD")
        page.fill("#id_limits-1-floor_price", "250")
        page.fill("#id_limits-1-ideal_price", "390")
        page.select_option("#id_strategy", "reference")
        page.click("button:has-text('Create agent')")
        page.wait_for_url(f"{base}/agents/skyways-sfo/")

        page.fill("#id_label", "backup process")
        page.click("button:has-text('Issue key')")
        api_key = page.input_value("#issued-key")
        assert api_key.startswith("oanp_")
        screenshot(page, "agents-key-issued")
        page.reload()
        assert page.locator("#issued-key").count() == 0
        assert api_key not in page.content()

        page.click("text=Edit")
        rows = page.inner_text("#price-rows")
        assert "LAX-SFO" in rows
        assert "any item" in rows
        assert "280" not in page.content()
        screenshot(page, "agents-edit")

        page.goto(f"{base}/agents/")
        screenshot(page, "agents-list")

    # A buyer agent negotiates over HTTP with the hosted agent the merchant just made.
    buyer_key = make_agent("buyer-001", "buyer")
    numbers = count(1)
    buyer = BuyerAgent(
        agent_id="buyer-001",
        vault=BuyerVault(true_ceiling=Decimal(420), budget_cap=Decimal(400)),
        strategy=ReferenceBuyer(),
        salt=encode_salt(b"\x03" * 32),
        new_message_id=lambda: f"b-{next(numbers)}",
    )
    with live_arbiter.client(headers=buyer_key.headers) as http:
        opening = buyer.open(
            session_id="sess-browser",
            merchant_agent_id="skyways-sfo",
            item=SFO_JFK_ITEM,
            currency="USD",
            now=now(),
        )
        outbox, seen = [opening], 0
        deadline = time.monotonic() + 30
        while not buyer.finished:
            for envelope in outbox:
                assert http.post("/oanp/v0.1/envelopes", json=envelope).status_code == 201
            outbox = []
            entries = http.get("/oanp/v0.1/sessions/sess-browser/log").json()["entries"]
            for entry in entries[seen:]:
                outbox += buyer.receive(entry["envelope"], now())
            seen = len(entries)
            assert time.monotonic() < deadline, "the hosted agent stopped answering"
            if not outbox:
                time.sleep(0.02)
    assert buyer.outcome == Agreed(Decimal(340))
