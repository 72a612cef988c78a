"""The Pareto frontier of a terms session from both sides' revealed limits (oanp.agents.frontier):
non-dominated, complete against a brute-force search, holding both sides' extremes, and an
agreement on it lies at distance 0."""

from __future__ import annotations

import itertools
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oanp.agents.frontier import Candidate, Frontier, frontier, revealed_plan, trade_offs
from oanp.agents.tradeoffs import IssueLimits, TermsPlan, TermsVault
from oanp.agents.vaults import BuyerVault, MerchantVault
from tests.support.factories.terms import BUYER_TERMS, DECLARED, MERCHANT_TERMS

BUYER = BuyerVault(Decimal(420), Decimal(400), terms=BUYER_TERMS).constraints()
MERCHANT = MerchantVault(Decimal(280), Decimal(400), terms=MERCHANT_TERMS).constraints()


def plans(buyer: dict[str, object] = BUYER, merchant: dict[str, object] = MERCHANT):
    return revealed_plan("buyer", DECLARED, buyer), revealed_plan("merchant", DECLARED, merchant)


def dominates(a: Candidate, b: Candidate) -> bool:
    return (
        a.buyer >= b.buyer
        and a.merchant >= b.merchant
        and (a.buyer, a.merchant)
        != (
            b.buyer,
            b.merchant,
        )
    )


def brute_force(buyer: TermsPlan, merchant: TermsPlan, prices: set[Decimal]) -> list[Candidate]:
    """Every agreement at these prices that both accept, with no folding and no pruning."""
    days = [Decimal(d) for d in range(1, 31)]
    outcomes = []
    for price, values in itertools.product(sorted(prices), itertools.product(days, range(3))):
        if buyer.within(values) and merchant.within(values):
            outcomes.append(
                Candidate(
                    price, values, buyer.utility(price, values), merchant.utility(price, values)
                )
            )
    return outcomes


def check(found: Frontier, buyer: TermsPlan, merchant: TermsPlan) -> None:
    points = found.points
    assert points
    # Non-dominated, and drawn along the curve: the buyer's utility up, the merchant's down.
    assert not any(dominates(a, b) for a in points for b in points)
    assert [p.buyer for p in points] == sorted(p.buyer for p in points)
    # Complete: at the prices it tried, no agreement both accept beats a point of it, and
    # each is matched or beaten by one.
    prices = {p.price for p in points} | {buyer.price.reservation, merchant.price.reservation}
    every = brute_force(buyer, merchant, prices)
    assert not any(dominates(o, p) for o in every for p in points)
    assert all(any(p.buyer >= o.buyer and p.merchant >= o.merchant for p in points) for o in every)
    # The extremes: the best agreement for each side (of those, the better for the other).
    best_buyer = max(every, key=lambda o: (o.buyer, o.merchant))
    best_merchant = max(every, key=lambda o: (o.merchant, o.buyer))
    assert (points[-1].buyer, points[-1].merchant) == (best_buyer.buyer, best_buyer.merchant)
    assert (points[0].buyer, points[0].merchant) == (best_merchant.buyer, best_merchant.merchant)


def test_the_frontier_of_the_reference_vaults_is_non_dominated_complete_and_has_the_extremes():
    buyer, merchant = plans()
    found = frontier(buyer, merchant, Decimal(280), Decimal(420))
    check(found, buyer, merchant)
    # Each side's extreme: the buyer's at its ideal price (lower gains it nothing, and costs
    # the merchant) with the merchant's limits, the merchant's at its list price with its ideal
    # support and the slowest delivery the buyer takes.
    assert found.points[-1].price == 320
    assert found.points[-1].values == (Decimal(3), 1)
    assert found.points[0].price == 400
    assert found.points[0].values == (Decimal(14), 2)


@settings(max_examples=25, deadline=None)
@given(
    weights=st.lists(st.decimals(min_value="0.1", max_value=4, places=1), min_size=4, max_size=4),
    price_weights=st.tuples(
        st.decimals(min_value="0.2", max_value=3, places=1),
        st.decimals(min_value="0.2", max_value=3, places=1),
    ),
)
def test_any_weights_give_a_non_dominated_complete_frontier(weights, price_weights):
    buyer_terms = TermsVault(
        price_weights[0],
        (
            IssueLimits("delivery_days", weights[0], Decimal(2), Decimal(14)),
            IssueLimits("support", weights[1], "premium", "none"),
        ),
    )
    merchant_terms = TermsVault(
        price_weights[1],
        (
            IssueLimits("delivery_days", weights[2], Decimal(20), Decimal(3)),
            IssueLimits("support", weights[3], "none", "standard"),
        ),
    )
    buyer, merchant = plans(
        BuyerVault(Decimal(420), Decimal(400), terms=buyer_terms).constraints(),
        MerchantVault(Decimal(280), Decimal(400), terms=merchant_terms).constraints(),
    )
    check(frontier(buyer, merchant, Decimal(280), Decimal(420)), buyer, merchant)


def test_an_agreement_on_the_frontier_lies_at_distance_0():
    buyer, merchant = plans()
    on = frontier(buyer, merchant, Decimal(280), Decimal(420)).points[7]
    found = trade_offs(DECLARED, BUYER, MERCHANT, (on.price, on.values))
    assert found is not None
    assert found.agreement == on
    assert found.distance == 0
    assert found.nearest == on


def test_an_agreement_off_the_price_steps_is_a_candidate_too():
    # Halfway between two neighbours on the frontier that differ in price alone: no step of
    # the price, yet no point beats it (one between them would have to lie between them).
    buyer, merchant = plans()
    points = frontier(buyer, merchant, Decimal(280), Decimal(420)).points
    p, q = next((p, q) for p, q in itertools.pairwise(points) if p.values == q.values)
    agreement = ((p.price + q.price) / 2, p.values)
    found = trade_offs(DECLARED, BUYER, MERCHANT, agreement)
    assert found is not None
    assert found.distance == 0
    assert any(o.price == agreement[0] for o in found.frontier.points)


def test_a_dominated_agreement_lies_off_it_and_the_nearest_point_beats_it():
    # Premium support costs the merchant most and the buyer hardly cares: anything dominates it.
    agreement = (Decimal(340), (Decimal(10), 0))
    assert not plans()[1].accepts(1, 0)
    found = trade_offs(DECLARED, BUYER, MERCHANT, (Decimal(340), (Decimal(10), 1)))
    assert found is not None
    assert found.agreement is not None
    assert found.distance is not None
    assert found.distance > 0
    assert found.nearest is not None
    assert found.nearest in found.frontier.points
    # Outside the merchant's limits, an agreement is measured but joins no frontier.
    outside = trade_offs(DECLARED, BUYER, MERCHANT, agreement)
    assert outside is not None
    assert all(p.values != agreement[1] for p in outside.frontier.points)


def test_no_zone_of_agreement_no_frontier():
    assert trade_offs(DECLARED, {**BUYER, "true_ceiling": 250, "budget_cap": 250}, MERCHANT) is None


def test_a_side_without_weights_is_indifferent_to_the_issues():
    no_terms = {k: v for k, v in MERCHANT.items() if k != "terms"}
    found = trade_offs(DECLARED, BUYER, no_terms)
    assert found is not None
    # The merchant cares for the price alone: at each price, terms the buyer likes best
    # (its ideal delivery or sooner, premium support).
    best = found.frontier.points[-1]
    assert best.buyer == 1
    assert best.values[1] == 0
    assert best.values[0] <= 2
    assert all(p.values == best.values for p in found.frontier.points)


@pytest.mark.parametrize(
    ("role", "constraints", "message"),
    [
        ("buyer", {}, "true_ceiling must be a number"),
        ("buyer", {"true_ceiling": "lots"}, "true_ceiling must be a number"),
        ("buyer", {"true_ceiling": -1}, "true_ceiling must be a positive number"),
        ("buyer", {"true_ceiling": 400, "budget_cap": 500}, "budget_cap must not exceed"),
        ("merchant", {"floor_price": 280}, "ideal_price must be a number"),
        ("merchant", {**MERCHANT, "terms": []}, "terms must be an object"),
        (
            "merchant",
            {
                **MERCHANT,
                "terms": {"issues": {"support": {"weight": 1, "ideal": "x", "limit": "none"}}},
            },
            "support is not one of its options",
        ),
    ],
)
def test_constraints_that_do_not_read_say_what(role, constraints, message):
    with pytest.raises(ValueError, match=message):
        revealed_plan(role, DECLARED, constraints)
