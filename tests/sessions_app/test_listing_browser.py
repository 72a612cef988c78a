"""In Chromium against the real ASGI server: a merchant lists its hosted agent from the agent
page, is told what to fix, and buyers' agents then find it in the arbiter's directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sessions_app.models import MemberRole
from tests.conftest import LiveServer
from tests.sessions_app.browser import chromium, sign_in
from tests.support.factories.accounts import PASSWORD, hosted_agent, member, merchant
from tests.support.factories.agents import make_agent

pytestmark = pytest.mark.django_db(transaction=True)

CATALOG = [{"route": "SFO-JFK", "cabin": "economy"}, {"route": "SFO-LAX", "cabin": "business"}]


def test_a_merchant_lists_its_agent_from_the_agent_page(
    live_arbiter: LiveServer, tmp_path: Path
) -> None:
    shop = merchant("skyways")
    hosted_agent(shop, "skyways-sfo")
    member("mia", MemberRole.MERCHANT_MANAGER, shop)
    buyer = make_agent("buyer-001", "buyer")
    base = live_arbiter.url
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        sign_in(page, base, "mia", PASSWORD)
        page.goto(f"{base}/agents/skyways-sfo/")
        section = page.locator("section[aria-labelledby=listing-h]")
        assert "Not listed" in section.inner_text()

        page.check("#id_listed")
        page.fill("#id_description", "Nonstop flights out of SFO.")
        page.fill("#id_currencies", "usd, XYZ")
        page.fill("#id_catalog", '[{"route": "SFO-JFK"}, "SFO-LAX"]')
        page.click("button:has-text('Save listing')")
        form = page.locator("#listing-form")
        errors = form.locator(".error").all_inner_texts()
        assert errors == ["'XYZ' is not an ISO 4217 code.", "Item 2: must be a JSON object."]
        # What was typed stays, to be corrected rather than typed again.
        assert page.input_value("#id_description") == "Nonstop flights out of SFO."
        form.screenshot(path=str(tmp_path / "listing-errors.png"))

        page.fill("#id_currencies", "usd, EUR")
        page.fill("#id_catalog", json.dumps(CATALOG, indent=2))
        page.click("button:has-text('Save listing')")
        page.wait_for_url(f"{base}/agents/skyways-sfo/#listing-h")
        assert "the agent is listed in the arbiter's directory." in page.inner_text(".messages")
        assert "listed" in page.inner_text("#listing-state")
        # Of USD and EUR, the one its limits are in: a buyer's agent picks one it negotiates in.
        assert "USD" in page.inner_text("#listing-state")
        assert "EUR" not in page.inner_text("#listing-state")
        assert page.is_checked("#id_listed")
        assert json.loads(page.input_value("#id_catalog")) == CATALOG
        page.screenshot(path=str(tmp_path / "listing-saved.png"), full_page=True)

    with live_arbiter.client(headers=buyer.headers) as http:
        [entry] = http.get("/oanp/v0.1/merchants", params={"q": "nonstop"}).json()
    assert entry["agent_id"] == "skyways-sfo"
    assert entry["merchant"] == "Merchant skyways"
    assert entry["currencies"] == ["USD"]
    assert entry["catalog"] == CATALOG
