"""Whole negotiations between every pair of strategies, through the real machine."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oanp.agents.parties import BuyerAgent, Closed, MerchantAgent
from oanp.agents.rehearsal import rehearse
from oanp.agents.strategies import (
    Boulware,
    Conceder,
    Linear,
    ReferenceBuyer,
    ReferenceMerchant,
    TitForTat,
)
from oanp.agents.vaults import BuyerVault, MerchantVault
from oanp.audit.invariants import audit_log
from oanp.wire.commitments import encode_salt, limit_breaches
from oanp.wire.state import Phase
from tests.support.factories.sessions import ARBITER, JWKS

TIME_DEPENDENT = {"boulware": Boulware, "linear": Linear, "conceder": Conceder}
BUYER_STRATEGIES = {"reference": ReferenceBuyer, "tit-for-tat": TitForTat, **TIME_DEPENDENT}
MERCHANT_STRATEGIES = {"reference": ReferenceMerchant, "tit-for-tat": TitForTat, **TIME_DEPENDENT}
PAIRS = list(itertools.product(BUYER_STRATEGIES, MERCHANT_STRATEGIES))


def negotiate(
    buyer_strategy, merchant_strategy, *, ceiling, budget, floor, ideal, rounds, currency
):
    ids = itertools.count()
    moments = itertools.count()

    def clock():
        return datetime(2026, 4, 28, 14, tzinfo=UTC) + timedelta(seconds=next(moments))

    def new_id():
        return f"id{next(ids)}"

    buyer = BuyerAgent(
        agent_id="buyer-001",
        vault=BuyerVault(true_ceiling=ceiling, budget_cap=budget),
        strategy=BUYER_STRATEGIES[buyer_strategy](),
        salt=encode_salt(bytes([1]) * 32),
        new_message_id=new_id,
    )
    merchant = MerchantAgent(
        agent_id="merchant-sfo",
        vault=MerchantVault(floor_price=floor, ideal_price=ideal),
        strategy=MERCHANT_STRATEGIES[merchant_strategy](),
        salt=encode_salt(bytes([2]) * 32),
        new_message_id=new_id,
    )
    opening = buyer.open(
        session_id="s-1",
        merchant_agent_id="merchant-sfo",
        item={"sku": "X"},
        currency=currency,
        max_rounds=rounds,
        now=clock(),
    )
    result = rehearse(buyer=buyer, merchant=merchant, arbiter=ARBITER, opening=opening, clock=clock)
    return result, buyer, merchant


def prices_of(entries, role):
    moves = [
        e.envelope
        for e in entries
        if e.envelope["sender"]["role"] == role and e.type.startswith("offer.")
    ]
    return [(m["payload"]["round"], Decimal(repr(m["payload"]["price"]))) for m in moves]


@settings(max_examples=60, deadline=None)
@given(
    pair=st.sampled_from(PAIRS),
    floor=st.integers(50, 500),
    spread=st.integers(-200, 400),
    rounds=st.integers(1, 8),
    currency=st.sampled_from(["USD", "JPY", "KWD"]),
)
def test_every_pair_finishes_within_its_limits(pair, floor, spread, rounds, currency):
    floor_price = Decimal(floor)
    ceiling = max(Decimal(10), floor_price + spread)
    budget = ceiling
    ideal = floor_price * Decimal("1.5")
    result, buyer, merchant = negotiate(
        *pair,
        ceiling=ceiling,
        budget=budget,
        floor=floor_price,
        ideal=ideal,
        rounds=rounds,
        currency=currency,
    )
    state = result.negotiation.state
    assert state.terminal
    assert state.round <= rounds
    assert state.close_reason is None or state.close_reason.value == "withdrawn_by_buyer"
    assert buyer.finished
    assert merchant.finished
    assert not limit_breaches(
        "buyer", {"true_ceiling": float(ceiling)}, prices_of(result.entries, "buyer")
    )
    assert not limit_breaches(
        "merchant", {"floor_price": floor}, prices_of(result.entries, "merchant")
    )
    if state.phase is Phase.AGREED:
        assert floor_price <= state.final_price <= ceiling
    audit = audit_log([e.as_json() for e in result.entries], JWKS)
    assert audit.ok


@pytest.mark.parametrize(("buyer_strategy", "merchant_strategy"), PAIRS)
@pytest.mark.parametrize("rounds", [1, 2, 5])
def test_every_pair_agrees_when_the_buyer_opens_above_the_floor(
    buyer_strategy, merchant_strategy, rounds
):
    # The buyer opens at 80% of its budget cap (320), above the merchant's floor (280): a
    # merchant taking any price within its floor in the last round must close the deal.
    result, buyer, merchant = negotiate(
        buyer_strategy,
        merchant_strategy,
        ceiling=Decimal(420),
        budget=Decimal(400),
        floor=Decimal(280),
        ideal=Decimal(450),
        rounds=rounds,
        currency="USD",
    )
    state = result.negotiation.state
    assert state.phase is Phase.AGREED, state.close_reason
    assert Decimal(280) <= state.final_price <= Decimal(420)
    assert buyer.outcome == merchant.outcome


@pytest.mark.parametrize("buyer_strategy", sorted(TIME_DEPENDENT))
@pytest.mark.parametrize("merchant_strategy", sorted(MERCHANT_STRATEGIES))
def test_time_dependent_buyers_agree_whenever_the_limits_overlap_at_all(
    buyer_strategy, merchant_strategy
):
    # Such a buyer offers its ceiling in the last round; the merchant takes it above its floor.
    result, _, _ = negotiate(
        buyer_strategy,
        merchant_strategy,
        ceiling=Decimal("300.01"),
        budget=Decimal(300),
        floor=Decimal(300),
        ideal=Decimal(500),
        rounds=4,
        currency="USD",
    )
    assert result.negotiation.state.phase is Phase.AGREED


@pytest.mark.parametrize(("buyer_strategy", "merchant_strategy"), PAIRS)
def test_no_pair_agrees_when_the_limits_do_not_overlap(buyer_strategy, merchant_strategy):
    result, buyer, _ = negotiate(
        buyer_strategy,
        merchant_strategy,
        ceiling=Decimal(250),
        budget=Decimal(240),
        floor=Decimal(280),
        ideal=Decimal(400),
        rounds=5,
        currency="USD",
    )
    state = result.negotiation.state
    assert state.close_reason is not None
    # The buyer declines the merchant's last counter as its final answer: it withdraws.
    assert state.close_reason.value == "withdrawn_by_buyer"
    assert state.round == 5
    assert buyer.outcome == Closed("withdrawn_by_buyer")
