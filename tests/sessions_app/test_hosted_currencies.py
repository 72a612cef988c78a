"""A hosted merchant never negotiates blind: a session in a currency it holds no limits for,
or for an item it does not price when it negotiates only the items it priced, is declined at
once, and its session page and agent page say why."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.test import Client

from arbiter_app import selectors as arbiter
from oanp.agents.pricelist import PriceLimits, PriceList
from oanp.wire import discovery
from sessions_app import hosted_agents, services
from sessions_app.models import HostedSession, Merchant
from tests.support.factories.accounts import (
    HostedNegotiation,
    admin,
    hosted_agent,
    now,
    price_limits,
)

pytestmark = pytest.mark.django_db

#: An agent that negotiates one route only, in dollars.
LAX_ONLY = PriceList((PriceLimits("SFO-LAX", "USD", Decimal(120), Decimal(190)),), items_only=True)


def test_the_same_limits_are_not_read_in_another_currency(client: Client, shop_a: Merchant) -> None:
    hosted_agent(shop_a, "hosted-sfo")  # floor 280, ideal 400, in USD
    usd = HostedNegotiation(client, "hosted-sfo", session_id="in-usd")
    assert usd.play(nudge=lambda: hosted_agents.answer("in-usd"))[-1]["envelope"]["type"] == (
        "session.agree"
    )
    for currency in ("JPY", "VND"):
        asked = HostedNegotiation(
            client, "hosted-sfo", session_id=f"in-{currency}", currency=currency
        )
        log = asked.play(nudge=lambda s=asked.session_id: hosted_agents.answer(s))
        # No ack, no counter, no agreement: the agent withdrew before acking.
        assert [(e["envelope"]["sender"]["role"], e["envelope"]["type"]) for e in log] == [
            ("buyer", "session.open"),
            ("merchant", "session.close"),
            ("arbiter", "session.close"),
        ]
        assert log[-1]["envelope"]["payload"]["reason"] == "withdrawn_by_merchant"
        hosted = HostedSession.objects.get(session_id=f"in-{currency}")
        assert hosted.declined == f"it holds no limits in {currency}"
        assert not bytes(hosted.sealed_limits)  # nothing was copied to negotiate on
        assert not hosted.reveal_after_end


def test_an_agent_of_listed_items_only_declines_the_others(
    client: Client, shop_a: Merchant
) -> None:
    profile = hosted_agent(shop_a, "hosted-sfo")
    price_limits(profile, LAX_ONLY)
    log = HostedNegotiation(client, "hosted-sfo").play(
        nudge=lambda: hosted_agents.answer("sess-hosted")
    )
    assert log[-1]["envelope"]["payload"]["reason"] == "withdrawn_by_merchant"
    assert HostedSession.objects.get().declined == (
        "it negotiates only the items it priced, not the item 'SFO-JFK'"
    )
    lax = HostedNegotiation(client, "hosted-sfo", session_id="to-lax", item={"route": "SFO-LAX"})
    assert lax.play(nudge=lambda: hosted_agents.answer("to-lax"))[-1]["envelope"]["type"] == (
        "session.agree"
    )


def test_the_session_page_and_the_agent_page_say_why(
    browser: Client, client: Client, shop_a: Merchant
) -> None:
    hosted_agent(shop_a, "hosted-a")
    asked = HostedNegotiation(client, "hosted-a", session_id="in-jpy", currency="JPY")
    asked.play(nudge=lambda: hosted_agents.answer("in-jpy"))
    session_page = browser.get("/sessions/in-jpy/").content.decode()
    assert "it holds no limits in JPY" in session_page.split('id="declined"', 1)[1]
    agent_page = browser.get("/agents/hosted-a/").content.decode()
    declines = agent_page.split('id="declines"', 1)[1].split("</ul>", 1)[0]
    assert "in-jpy" in declines
    assert "it holds no limits in JPY" in declines
    assert "USD, any item" in agent_page  # where it holds limits, never what they are
    assert "280" not in agent_page


def test_a_long_item_key_is_quoted_short_in_the_reason(client: Client, shop_a: Merchant) -> None:
    profile = hosted_agent(shop_a, "hosted-sfo")
    price_limits(profile, LAX_ONLY)
    asked = HostedNegotiation(client, "hosted-sfo", item={"sku": "X" * 3000})
    log = asked.play(nudge=lambda: hosted_agents.answer("sess-hosted"))
    assert log[-1]["envelope"]["payload"]["reason"] == "withdrawn_by_merchant"
    declined = HostedSession.objects.get().declined
    assert declined.startswith("it negotiates only the items it priced, not the item 'XXX")
    assert len(declined) < 120


def test_a_listed_agent_asked_in_a_currency_it_does_not_list_is_refused_by_the_arbiter(
    client: Client, shop_a: Merchant
) -> None:
    profile = hosted_agent(shop_a, "hosted-sfo")  # USD limits
    listing = discovery.parse_listing(listed=True, description="", currencies=["USD"], catalog=[])
    services.save_listing(actor=admin(), profile=profile, listing=listing)
    asked = HostedNegotiation(client, "hosted-sfo", currency="JPY")
    opening = asked.buyer.open(
        session_id=asked.session_id,
        merchant_agent_id="hosted-sfo",
        item=asked.item,
        currency="JPY",
        max_rounds=5,
        now=now(),
    )
    response = client.post(
        "/oanp/v0.1/envelopes",
        data=json.dumps(opening),
        content_type="application/json",
        headers=asked.buyer_key.headers,
    )
    assert response.status_code == 422
    assert response.json()["code"] == "currency_not_offered"
    # Nothing logged, nothing for the hosted agent to answer or decline.
    assert arbiter.session_named(asked.session_id) is None
    assert hosted_agents.answer(asked.session_id) == 0
    assert not HostedSession.objects.exists()
