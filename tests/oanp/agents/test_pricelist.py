"""Price lists: limits per currency and item, and the merchant agent that declines a session
it holds no limits for instead of negotiating it on numbers meant for another currency."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from oanp.agents.parties import MerchantAgent
from oanp.agents.pricelist import (
    PriceLimits,
    PriceList,
    Unpriced,
    from_single_limits,
    item_key,
    read_price_list,
)
from oanp.agents.strategies import ReferenceMerchant
from oanp.agents.tradeoffs import IssueLimits, TermsVault
from tests.oanp.agents.test_parties import (
    ITEM,
    MERCHANT_ID,
    MERCHANT_SALT,
    buyer,
    merchant,
    message_ids,
    moves,
    open_session,
    run_session,
)

D = Decimal
USD_ANY = PriceLimits(None, "USD", D(280), D(400))
USD_LAX = PriceLimits("SFO-LAX", "USD", D(120), D("190.5"))
JPY_ANY = PriceLimits(None, "JPY", D(42000), D(60000))
PRICES = PriceList((USD_ANY, USD_LAX, JPY_ANY))


def merchant_on(prices: PriceList) -> MerchantAgent:
    return MerchantAgent(
        agent_id=MERCHANT_ID,
        vault=prices,
        strategy=ReferenceMerchant(),
        salt=MERCHANT_SALT,
        new_message_id=message_ids("m"),
    )


def test_an_item_is_priced_on_its_own_row_in_the_sessions_currency() -> None:
    assert PRICES.limits_for("USD", {"route": "SFO-LAX"}) is USD_LAX
    assert PRICES.limits_for("USD", {"route": "SFO-JFK"}) is USD_ANY
    assert PRICES.limits_for("JPY", {"route": "SFO-LAX"}) is JPY_ANY
    assert PRICES.currencies == ("USD", "JPY")


@pytest.mark.parametrize(
    ("prices", "currency", "item", "reason", "message"),
    [
        (PRICES, "VND", ITEM, "currency", "it holds no limits in VND"),
        (
            PriceList((USD_LAX,)),
            "USD",
            {"route": "SFO-JFK"},
            "item",
            "it holds no USD limits for the item 'SFO-JFK'",
        ),
        (
            PriceList((USD_ANY, USD_LAX), items_only=True),
            "USD",
            {"route": "SFO-JFK"},
            "item",
            "it negotiates only the items it priced, not the item 'SFO-JFK'",
        ),
        (
            PriceList((USD_LAX,), items_only=True),
            "USD",
            {"cabin": "economy"},
            "item",
            "not an item without a sku, id or route",
        ),
    ],
)
def test_what_the_list_does_not_price_is_refused_by_name(
    prices: PriceList, currency: str, item: dict[str, Any], reason: str, message: str
) -> None:
    with pytest.raises(Unpriced) as unpriced:
        prices.limits_for(currency, item)
    assert unpriced.value.reason == reason
    assert message in str(unpriced.value)


def test_the_item_key_is_the_sku_then_the_id_then_the_route() -> None:
    assert item_key({"sku": "A1", "id": "x", "route": "SFO-JFK"}) == "A1"
    assert item_key({"id": 7, "route": "SFO-JFK"}) == "7"
    assert item_key({"route": "SFO-JFK"}) == "SFO-JFK"
    assert item_key({"cabin": "economy"}) == ""


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"currency": "JPY", "floor_price": "280.5", "ideal_price": 400}, "JPY takes no decimals"),
        ({"currency": "USD", "floor_price": 280, "ideal_price": "1.001"}, "at most 2 decimals"),
        ({"currency": "KWD", "floor_price": "1.0001", "ideal_price": 2}, "at most 3 decimals"),
        ({"currency": "XYZ", "floor_price": 1, "ideal_price": 2}, "ISO 4217"),
        ({"currency": "USD", "floor_price": 500, "ideal_price": 400}, "floor cannot be above"),
        ({"currency": "USD", "floor_price": 0, "ideal_price": 400}, "more than 0"),
        ({"currency": "USD", "floor_price": 10**13, "ideal_price": 400}, "and less than 10"),
        ({"currency": "USD", "floor_price": "NaN", "ideal_price": 400}, "as 280 or 279.99"),
        ({"currency": "USD", "floor_price": "1e2", "ideal_price": 400}, "as 280 or 279.99"),
        ({"currency": "USD", "floor_price": "1_000", "ideal_price": 400}, "as 280 or 279.99"),
        ({"currency": "USD", "floor_price": float("inf"), "ideal_price": 400}, "more than 0"),
        ({"currency": "USD", "floor_price": True, "ideal_price": 400}, "must be a number"),
        ({"currency": "USD", "floor_price": 1, "ideal_price": 4, "cap": 9}, "unknown member"),
    ],
)
def test_a_bad_row_is_refused_without_quoting_its_amounts(
    row: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message) as refused:
        read_price_list({"limits": [{"item": None} | row]})
    assert str(refused.value).startswith("limits row 1: ")
    assert "280.5" not in str(refused.value)
    assert "1.001" not in str(refused.value)


def test_one_row_per_item_and_currency() -> None:
    with pytest.raises(ValueError, match="any item in USD has a row already"):
        PriceList((USD_ANY, PriceLimits(None, "USD", D(1), D(2))))


def test_the_document_round_trips_with_terms_and_reprs_stay_sealed() -> None:
    terms = TermsVault(D(1), (IssueLimits("checked_bags", D("0.5"), D(0), D(2)),))
    prices = PriceList((USD_ANY, USD_LAX), items_only=True, terms=terms)
    assert read_price_list(prices.document()) == prices
    assert "280" not in repr(prices)
    assert "280" not in repr(USD_ANY)


def test_an_old_vault_is_read_in_the_currency_it_is_given() -> None:
    old = {"floor_price": "280", "ideal_price": "400", "per_item": {"SFO-LAX": ["120", "190"]}}
    prices = from_single_limits(old, "EUR")
    assert prices.currencies == ("EUR",)
    assert prices.limits_for("EUR", {"route": "SFO-LAX"}).floor_price == 120
    with pytest.raises(ValueError, match="no decimals"):
        from_single_limits({"floor_price": "280.5", "ideal_price": "400"}, "JPY")


def test_the_same_limits_agree_in_their_currency_and_decline_in_another() -> None:
    agreed = run_session(b := buyer(), m := merchant_on(PRICES), open_session(b))
    assert agreed[-1]["type"] == "session.agree"
    assert m.declined is None
    # The buyer asks in VND, where the merchant holds nothing: no counter, no agreement; it
    # withdraws at once, before any ack, committed to nothing.
    log = run_session(b := buyer(), m := merchant_on(PRICES), open_session(b, currency="VND"))
    assert [(e["sender"]["role"], e["type"]) for e in log] == [
        ("buyer", "session.open"),
        ("merchant", "session.close"),
        ("arbiter", "session.close"),
    ]
    assert log[-1]["payload"]["reason"] == "withdrawn_by_merchant"
    assert m.declined == "it holds no limits in VND"
    assert moves(log) == []


def test_each_currency_is_negotiated_on_its_own_limits() -> None:
    log = run_session(b := buyer(), merchant_on(PRICES), open_session(b, currency="JPY"))
    counters = [price for role, kind, price in moves(log) if role == "merchant"]
    # The buyer's dollar-sized offers meet a yen floor of 42,000: no counter ever under it.
    assert counters
    assert min(counters) >= 42000
    assert log[-1]["type"] == "session.close"


def test_a_merchant_given_one_vault_still_takes_any_session() -> None:
    # The sans-IO agent keeps its contract: one vault, with no currency, prices every session;
    # the hosted agents and the command line give it a price list.
    log = run_session(b := buyer(), m := merchant(), open_session(b, currency="EUR"))
    assert log[-1]["type"] == "session.agree"
    assert m.declined is None
