"""The guardrails of a model-driven party (``oanp.agents.guardrails``): the range it may send next,
the moves refused and why, read from the session's log; a move the guard lets through is
never one the arbiter closes the session over, nor one a reveal shows past the limit."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oanp.agents.guardrails import Allowed, Position, Standing, needs_approval, read_position
from oanp.wire.commitments import limit_breaches
from oanp.wire.terms import read_issues
from tests.support.factories.sessions import (
    BUYER_COMMIT,
    MERCHANT_COMMIT,
    Session,
    counter,
    envelope,
    negotiating,
    propose,
)
from tests.support.factories.terms import ISSUES

D = Decimal
ISSUES_DECLARED = read_issues(ISSUES)
FAST, SLOW = (D(3), 0), (D(9), 2)  # delivery_days, support's option index


def buyer(**fields: Any) -> Position:
    return Position("buyer", "USD", **fields)


def merchant(**fields: Any) -> Position:
    return Position("merchant", "USD", **fields)


def test_a_buyer_may_offer_from_its_standing_price_to_its_ceiling() -> None:
    position = buyer(own=Standing(D(340)), other=Standing(D(390)), limit=D(420))
    assert position.allowed() == Allowed(D(340), D(420), D(390), trade_offs=False)
    assert position.allowed().as_json() == {
        "min_price": 340,
        "max_price": 420,
        "accept_price": 390,
        "trade_offs": False,
    }


def test_a_merchant_may_offer_from_its_floor_to_its_standing_price() -> None:
    position = merchant(own=Standing(D(390)), other=Standing(D(340)), limit=D(280))
    assert position.allowed() == Allowed(D(280), D(390), D(340), trade_offs=False)


def test_without_a_limit_only_the_standing_price_bounds_the_next_offer() -> None:
    assert buyer(own=Standing(D(340))).allowed() == Allowed(D(340), None, None, False)
    assert merchant(own=Standing(D(390))).allowed() == Allowed(None, D(390), None, False)
    assert buyer().allowed() == Allowed(None, None, None, False)


@pytest.mark.parametrize(
    ("role", "currency", "limit", "bound"),
    [
        ("buyer", "USD", "420.005", "420.00"),
        ("merchant", "USD", "280.001", "280.01"),
        ("buyer", "JPY", "42000.5", "42000"),
        ("merchant", "JPY", "28000.5", "28001"),
        ("buyer", "KWD", "420.0009", "420.000"),
    ],
)
def test_the_limit_is_shown_rounded_to_the_currency_towards_the_party(
    role: Any, currency: str, limit: str, bound: str
) -> None:
    allowed = Position(role, currency, limit=D(limit)).allowed()
    shown = allowed.highest if role == "buyer" else allowed.lowest
    assert shown == D(bound)
    assert str(shown) == bound


def test_an_offer_past_the_limit_is_refused_with_the_range() -> None:
    position = buyer(own=Standing(D(340)), other=Standing(D(390)), limit=D(420))
    refusal = position.check_offer(Standing(D("420.01")))
    assert refusal is not None
    assert refusal.code == "beyond_limit"
    assert refusal.detail == "420.01 USD is above your limit of 420 USD"
    assert refusal.allowed == position.allowed()
    floor = merchant(own=Standing(D(390)), limit=D(280)).check_offer(Standing(D("279.99")))
    assert floor is not None
    assert floor.code == "beyond_limit"
    assert floor.detail == "279.99 USD is below your limit of 280 USD"


@pytest.mark.parametrize(
    ("position", "price", "detail"),
    [
        (buyer(own=Standing(D(340))), "339.99", "you may not lower your standing price of 340"),
        (merchant(own=Standing(D(390))), "390.01", "you may not raise your standing price of 390"),
    ],
)
def test_a_retraction_is_refused_even_without_limits(
    position: Position, price: str, detail: str
) -> None:
    refusal = position.check_offer(Standing(D(price)))
    assert refusal is not None
    assert refusal.code == "retraction"
    assert refusal.detail.startswith(detail)


def test_offers_within_the_range_pass() -> None:
    position = buyer(own=Standing(D(340)), limit=D(420))
    assert position.check_offer(Standing(D(340))) is None
    assert position.check_offer(Standing(D(420))) is None
    assert merchant(own=Standing(D(390)), limit=D(280)).check_offer(Standing(D(280))) is None
    assert buyer().check_offer(Standing(D(1))) is None


def test_an_accept_names_the_other_side_s_standing_price_within_the_limit() -> None:
    position = buyer(own=Standing(D(340)), other=Standing(D(390)), limit=D(420))
    assert position.check_accept(D(390)) is None
    wrong = position.check_accept(D(380))
    assert wrong is not None
    assert (wrong.code, wrong.detail) == (
        "not_standing",
        "the other side's standing price is 390, not 380",
    )
    nothing = buyer().check_accept(D(390))
    assert nothing is not None
    assert nothing.code == "not_standing"


def test_an_accept_past_the_limit_is_refused_and_not_offered() -> None:
    position = buyer(own=Standing(D(340)), other=Standing(D(390)), limit=D(380))
    assert position.allowed().accept_price is None
    refusal = position.check_accept(D(390))
    assert refusal is not None
    assert refusal.code == "beyond_limit"
    assert refusal.detail == "their standing price, 390 USD is above your limit of 380 USD"


def test_with_issues_a_trade_off_passes_and_a_pure_retraction_is_refused() -> None:
    position = buyer(own=Standing(D(340), FAST), issues=ISSUES_DECLARED, limit=D(420))
    assert position.allowed().trade_offs is True
    # A lower price for slower delivery and no support: better for the merchant on terms.
    assert position.check_offer(Standing(D(330), SLOW)) is None
    # The same price, terms worse for the merchant and better on nothing.
    refusal = position.check_offer(Standing(D(340), (D(2), 0)))
    assert refusal is not None
    assert refusal.code == "retraction"
    assert "no pure retraction" in refusal.detail
    # The limit does not give way to terms.
    beyond = position.check_offer(Standing(D(421), SLOW))
    assert beyond is not None
    assert beyond.code == "beyond_limit"


@pytest.mark.parametrize(
    ("role", "threshold", "price", "asks"),
    [
        ("buyer", "380", "380.01", True),
        ("buyer", "380", "380", False),
        ("merchant", "300", "299.99", True),
        ("merchant", "300", "300", False),
        ("buyer", None, "100000", False),
    ],
)
def test_an_accept_past_the_threshold_needs_approval(
    role: Any, threshold: str | None, price: str, asks: bool
) -> None:
    assert needs_approval(role, None if threshold is None else D(threshold), D(price)) is asks


def test_the_position_is_read_from_the_log() -> None:
    session = negotiating()
    session.feed(propose(1, 320))
    session.feed(counter(1, 390))
    session.feed(propose(2, D("339.5")))
    log = session.log()
    assert read_position(log, "buyer", D(420)) == Position(
        "buyer", "USD", Standing(D("339.5")), Standing(D(390)), D(420)
    )
    assert read_position(log, "merchant") == Position(
        "merchant", "USD", Standing(D(390)), Standing(D("339.5"))
    )


def test_the_position_of_a_terms_session_holds_each_side_s_values() -> None:
    session = Session(profile="terms/v0.1", issues=ISSUES)
    session.feed(envelope("session.ack", {"constraints_commit": MERCHANT_COMMIT}))
    session.feed(terms_offer("offer.propose", 320, {"delivery_days": 3, "support": "premium"}))
    session.feed(terms_offer("offer.counter", 390, {"delivery_days": 9, "support": "none"}))
    position = read_position(session.log(), "merchant")
    assert position.issues == ISSUES_DECLARED
    assert position.own == Standing(D(390), SLOW)
    assert position.other == Standing(D(320), FAST)


def test_a_log_that_does_not_open_is_not_a_position() -> None:
    with pytest.raises(ValueError, match=r"session\.open"):
        read_position([], "buyer")


def terms_offer(kind: str, price: int, terms: dict[str, Any]) -> Any:
    commit = MERCHANT_COMMIT if kind == "offer.counter" else BUYER_COMMIT
    payload = {"round": 1, "price": price, "constraints_commit": commit, "terms": terms}
    return envelope(kind, payload)


# The arbiter's view: what the guard lets through, the arbiter never closes the session over.

PRICES = st.decimals(min_value=200, max_value=500, places=2)


@given(bids=st.lists(PRICES, min_size=5, max_size=5), asks=st.lists(PRICES, min_size=5))
def test_moves_the_guard_lets_through_never_breach_i4_nor_the_limits(
    bids: list[Decimal], asks: list[Decimal]
) -> None:
    """Each side draws a price a round, which the guard refuses exactly when it lies outside
    the range shown, and sends the nearest price within it: the arbiter judges no round
    violated, and a reveal of either limit finds no price past it."""
    ceiling, floor = D(420), D(280)
    session = negotiating()
    sent: dict[Any, list[tuple[int, Decimal]]] = {"buyer": [], "merchant": []}
    for round_, (bid, ask) in enumerate(zip(bids, asks, strict=False), start=1):
        for role, wanted, kind in (("buyer", bid, propose), ("merchant", ask, counter)):
            position = read_position(session.log(), role, ceiling if role == "buyer" else floor)
            price = _nearest(position.allowed(), wanted)
            assert (position.check_offer(Standing(wanted)) is None) == (price == wanted)
            session.feed(kind(round_, price))
            sent[role].append((round_, price))
    verdicts = [e.envelope["payload"] for e in session.entries if e.type == "round.verdict"]
    assert verdicts
    assert all(v["status"] != "violated" for v in verdicts)
    assert not limit_breaches("buyer", {"true_ceiling": 420}, sent["buyer"])
    assert not limit_breaches("merchant", {"floor_price": 280}, sent["merchant"])


def _nearest(allowed: Allowed, price: Decimal) -> Decimal:
    if allowed.lowest is not None:
        price = max(price, allowed.lowest)
    if allowed.highest is not None:
        price = min(price, allowed.highest)
    return price
