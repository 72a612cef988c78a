"""Reference agents negotiating terms besides the price (oanp.agents.tradeoffs): each concedes first
on what it cares less about, never retracts, stays within its limits, and two of them reach an
agreement whose log the auditor passes."""

from __future__ import annotations

import itertools
import math
import re
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oanp.agents.parties import BuyerAgent, LimitGuard, MerchantAgent, TermsUnfit
from oanp.agents.rehearsal import rehearse
from oanp.agents.strategies import Boulware, Limits
from oanp.agents.tradeoffs import IssueLimits, TermsPlan, TermsVault, issues_for, read_want
from oanp.agents.vaults import MerchantVault
from oanp.audit import verify_log
from oanp.wire.commitments import encode_salt
from oanp.wire.terms import is_pure_retraction, issues_json, read_terms
from tests.support.factories.sessions import ARBITER, ITEM, JWKS, T0
from tests.support.factories.terms import (
    BUYER_TERMS,
    DECLARED,
    ISSUES,
    MERCHANT_TERMS,
    terms_agents,
)

#: The same weights the other way round, with limits that fit a merchant.
BUYER_TERMS_FOR_MERCHANT = TermsVault(
    Decimal(2),
    (
        IssueLimits("delivery_days", Decimal(1), Decimal(25), Decimal(5)),
        IssueLimits("support", Decimal("0.5"), "none", "premium"),
    ),
)


agents = terms_agents


def play(buyer: BuyerAgent, merchant: MerchantAgent) -> list[dict[str, Any]]:
    clock = itertools.count()
    opening = buyer.open(
        session_id="sess-terms",
        merchant_agent_id="merchant-sfo",
        item=ITEM,
        currency="USD",
        now=T0,
        issues=ISSUES,
    )
    run = rehearse(
        buyer=buyer,
        merchant=merchant,
        arbiter=ARBITER,
        opening=opening,
        clock=lambda: T0 + timedelta(seconds=next(clock)),
    )
    return [e.as_json() for e in run.entries]


def offers(log: list[dict[str, Any]], role: str) -> list[dict[str, Any]]:
    return [
        e["envelope"]["payload"]
        for e in log
        if e["envelope"]["type"] in ("offer.propose", "offer.counter")
        and e["envelope"]["sender"]["role"] == role
    ]


def first_moves(log: list[dict[str, Any]], role: str) -> dict[str, float]:
    """For each issue, the round of ``role``'s first offer whose value differs from the one it
    opened with; ``inf`` where it never moved."""
    mine = offers(log, role)
    opening = mine[0]["terms"]
    return {
        name: next((o["round"] for o in mine if o["terms"][name] != value), math.inf)
        for name, value in opening.items()
    }


def test_two_agents_trade_off_to_an_agreement_that_verifies():
    log = play(*agents(BUYER_TERMS, MERCHANT_TERMS))
    report = verify_log(log, JWKS)
    assert report.ok, [c.line() for c in report.checks if not c.ok]
    last = log[-1]["envelope"]
    assert last["type"] == "session.agree"
    final = last["payload"]["agreement"]["final_terms"]
    # Each got more of what it weighs most: the buyer fast delivery, the merchant its support
    # level; each value within both sides' limits.
    assert 3 <= final["delivery_days"] <= 14
    assert final["support"] in ("standard", "none")
    # Each gives up first what it weighs less: the buyer support (0.25) before delivery days
    # (2), the merchant delivery days (0.25) before support (2), which it may keep throughout.
    buyer, merchant = first_moves(log, "buyer"), first_moves(log, "merchant")
    assert buyer["support"] < buyer["delivery_days"], buyer
    assert merchant["delivery_days"] < merchant["support"], merchant
    verdicts = [e["envelope"]["payload"] for e in log if e["envelope"]["type"] == "round.verdict"]
    assert all(v["status"] != "violated" for v in verdicts)
    assert verdicts[-1]["issues_open"] == 0


def test_an_agent_without_terms_in_its_vault_takes_the_other_sides():
    log = play(*agents(None, MERCHANT_TERMS))
    assert verify_log(log, JWKS).ok
    first_buyer = offers(log, "buyer")[0]["terms"]
    # Indifferent, the buyer opens at the merchant's best: slowest delivery, no support.
    assert first_buyer == {"delivery_days": 30, "support": "none"}
    assert log[-1]["envelope"]["type"] == "session.agree"


def test_no_offer_of_either_agent_is_a_pure_retraction():
    for buyer_terms, merchant_terms in [
        (BUYER_TERMS, MERCHANT_TERMS),
        (None, BUYER_TERMS_FOR_MERCHANT),
        (BUYER_TERMS, None),
    ]:
        log = play(*agents(buyer_terms, merchant_terms))
        for role in ("buyer", "merchant"):
            mine = [
                (Decimal(str(o["price"])), read_terms(DECLARED, o["terms"]))
                for o in offers(log, role)
            ]
            for old, new in itertools.pairwise(mine):
                assert not is_pure_retraction(role == "merchant", DECLARED, old, new)


LIMITS = Limits(ideal=Decimal(400), reservation=Decimal(280), target=Decimal(400))


@given(
    weight=st.decimals(min_value="0.1", max_value=5, places=2),
    prices=st.lists(st.integers(280, 400), min_size=2, max_size=6),
    theirs=st.tuples(st.integers(1, 30), st.integers(0, 2)),
)
def test_a_plans_offers_concede_monotonically_within_limits_and_never_past_theirs(
    weight, prices, theirs
):
    vault = TermsVault(
        Decimal(1),
        (
            IssueLimits("delivery_days", weight, Decimal(20), Decimal(3)),
            IssueLimits("support", weight, "none", "standard"),
        ),
    )
    plan = TermsPlan("merchant", DECLARED, LIMITS, vault)
    their_values = (Decimal(theirs[0]), theirs[1])
    previous = None
    for price in sorted(prices, reverse=True):  # a merchant concedes downwards
        values = plan.offer(Decimal(price), previous, their_values)
        days, support = values
        # Never past the limit (3 days, standard support), nor past what the buyer asks.
        assert days >= max(Decimal(3), their_values[0])
        assert support >= max(1, their_values[1])
        if previous is not None:  # every move a concession, none taken back
            assert days <= previous[0]
            assert support <= previous[1]
        previous = values


def test_utility_weighs_price_and_issues():
    plan = TermsPlan("merchant", DECLARED, LIMITS, MERCHANT_TERMS)
    best = plan.utility(Decimal(400), (Decimal(20), 2))
    worst = plan.utility(Decimal(280), (Decimal(3), 1))
    assert best == 1
    assert worst == 0
    # Support matters eight times as much as delivery to this merchant.
    give_support = plan.utility(Decimal(400), (Decimal(20), 1))
    give_days = plan.utility(Decimal(400), (Decimal(3), 2))
    assert give_days > give_support
    assert plan.within((Decimal(3), 1))
    assert not plan.within((Decimal(2), 1))
    assert not plan.within((Decimal(10), 0))


def test_a_vault_with_terms_commits_to_them_and_stays_sealed():
    vault = MerchantVault(Decimal(280), Decimal(400), terms=MERCHANT_TERMS)
    assert vault.constraints()["terms"]["issues"]["support"] == {
        "weight": "2",
        "ideal": "none",
        "limit": "standard",
    }
    assert "standard" not in repr(vault)
    assert "standard" not in repr(MERCHANT_TERMS)
    assert "terms" not in MerchantVault(Decimal(280), Decimal(400)).constraints()


def test_a_boulware_merchant_also_trades_off():
    buyer, _ = agents(BUYER_TERMS, None)
    merchant = MerchantAgent(
        agent_id="merchant-sfo",
        vault=MerchantVault(Decimal(280), Decimal(400), terms=MERCHANT_TERMS),
        strategy=Boulware(),
        salt=encode_salt(b"\x02" * 32),
        new_message_id=iter(f"m-{i}" for i in itertools.count()).__next__,
    )
    log = play(buyer, merchant)
    assert verify_log(log, JWKS).ok


def test_a_vault_that_contradicts_the_declared_direction_is_refused_before_committing():
    buyer, _ = agents(MERCHANT_TERMS, None)  # its "ideal" 20 days is the buyer's worse end
    with pytest.raises(ValueError, match="worse for it than its limit"):
        buyer.open(
            session_id="s",
            merchant_agent_id="merchant-sfo",
            item=ITEM,
            currency="USD",
            now=T0,
            issues=ISSUES,
        )
    assert buyer.commitment is None


def test_a_vault_that_does_not_fit_the_issues_is_a_guard_that_names_no_limit():
    unfit = TermsVault(Decimal(1), (IssueLimits("support", Decimal(1), "gold", "none"),))
    buyer, _ = agents(unfit, None)
    with pytest.raises(TermsUnfit) as raised:
        buyer.open(
            session_id="s",
            merchant_agent_id="merchant-sfo",
            item=ITEM,
            currency="USD",
            now=T0,
            issues=ISSUES,
        )
    assert isinstance(raised.value, LimitGuard | ValueError)
    assert "gold" not in str(raised.value)
    assert "support is not one of its options" in str(raised.value)


def test_a_merchant_whose_terms_do_not_fit_declines_at_once():
    unfit = TermsVault(Decimal(1), (IssueLimits("support", Decimal(1), "none", "gold"),))
    buyer, merchant = agents(BUYER_TERMS, unfit)
    log = play(buyer, merchant)
    assert [(e["envelope"]["sender"]["role"], e["envelope"]["type"]) for e in log] == [
        ("buyer", "session.open"),
        ("merchant", "session.close"),
        ("arbiter", "session.close"),
    ]
    assert log[-1]["envelope"]["payload"]["reason"] == "withdrawn_by_merchant"
    assert "gold" not in str(log)
    assert merchant.finished
    assert str(merchant.outcome) == "Closed(reason='withdrawn_by_merchant')"
    assert verify_log(log, JWKS).ok


def test_read_want_reads_an_issues_limits_as_written():
    assert read_want(" delivery_days = 20 .. 3 @0.25") == IssueLimits(
        "delivery_days", Decimal("0.25"), "20", "3"
    )
    assert read_want("support=none..standard") == IssueLimits(
        "support", Decimal(1), "none", "standard"
    )
    # A choice's options may look like numbers: they are kept as written.
    assert read_want("tier=1..2").ideal == "1"


def test_read_want_takes_options_holding_its_separators_as_json_strings():
    assert read_want('support="24/7 @ phone".."mail..only"@2') == IssueLimits(
        "support", Decimal(2), "24/7 @ phone", "mail..only"
    )
    assert read_want(' support = "a@b" .. none ') == IssueLimits(
        "support", Decimal(1), "a@b", "none"
    )
    assert read_want('tier="\u00e9lite"..basic').ideal == "élite"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("delivery_days", "expected NAME=IDEAL..LIMIT[@WEIGHT]"),
        ("days=1..5@", "expected"),
        ("=1..5", "an issue's name"),
        ("price=1..5", "not price"),
        ("days=1..fast", "both numbers"),
        ("days=2..2.00", "must differ"),
        ("days=1..5@101", "the weight must be a number from 0 to 100"),
        ("days=1..5@nan", "the weight must be a number"),
        ("days=1..1000000000000", "below 10^12"),
        ("days=1..1.00001", "at most 4 decimals"),
        # A quoted value that does not close, or runs on into the next one.
        ('support="24/7..none', "a quoted value must be a JSON string"),
        ('support="gold"none..basic', "expected NAME=IDEAL..LIMIT[@WEIGHT]"),
        ('support=gold.."none"basic', "expected NAME=IDEAL..LIMIT[@WEIGHT]"),
        ('support=gold.."none"@', "expected NAME=IDEAL..LIMIT[@WEIGHT]"),
    ],
)
def test_read_want_refuses_without_quoting_the_values(text: str, message: str):
    with pytest.raises(ValueError, match=re.escape(message)) as raised:
        read_want(text)
    for private in ("1.00001", "1000000000000", "24/7", "gold"):
        assert private not in str(raised.value)


# Issues declared from a vault ---------------------------------------------------------------


def test_issues_for_declares_each_vault_issue_spanning_its_ideal_and_limit():
    # The merchant wants many days (20, at worst 3) and no support (at worst standard).
    assert issues_json(issues_for("merchant", MERCHANT_TERMS)) == [
        {
            "name": "delivery_days",
            "kind": "number",
            "buyer_prefers": "low",
            "min": 3,
            "max": 20,
            "decimals": 0,
        },
        {"name": "support", "kind": "choice", "options": ["standard", "none"]},
    ]
    # A buyer's vault: its ideal is the buyer's end, its options' first.
    assert issues_json(issues_for("buyer", BUYER_TERMS)) == [
        {
            "name": "delivery_days",
            "kind": "number",
            "buyer_prefers": "low",
            "min": 2,
            "max": 14,
            "decimals": 0,
        },
        {"name": "support", "kind": "choice", "options": ["premium", "none"]},
    ]
    # As the dashboard writes them: numbers as text, the decimals they are written with.
    written = TermsVault(Decimal(1), (read_want("weight_kg=2.5..10.25@3"),))
    [weight] = issues_json(issues_for("merchant", written))
    assert weight == {
        "name": "weight_kg",
        "kind": "number",
        "buyer_prefers": "high",
        "min": 2.5,
        "max": 10.25,
        "decimals": 2,
    }


def test_a_party_plays_its_vault_on_the_issues_declared_for_it():
    issues = issues_for("merchant", MERCHANT_TERMS)
    price = Limits(ideal=Decimal(400), reservation=Decimal(280), target=Decimal(400))
    plan = TermsPlan("merchant", issues, price, MERCHANT_TERMS)
    # Its ideal is its best: 20 days and no support; its limit the buyer's best end.
    assert plan.offer(Decimal(400), None, None) == (Decimal(20), 1)
    assert plan.offer(Decimal(280), None, None, Decimal(1)) == (Decimal(3), 0)


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        (
            IssueLimits("days", Decimal(1), Decimal(7), "7.0"),
            "the ideal and the limit of days are the same",
        ),
        (IssueLimits("days", Decimal(1), Decimal(7), "fast"), "a number and an option"),
        (IssueLimits("days", Decimal(1), Decimal("7.00001"), Decimal(3)), "decimals"),
    ],
)
def test_issues_for_refuses_a_vault_no_issue_can_hold_without_quoting_it(
    limits: IssueLimits, message: str
):
    with pytest.raises(ValueError, match=re.escape(message)) as raised:
        issues_for("merchant", TermsVault(Decimal(1), (limits,)))
    assert "7" not in str(raised.value)
    assert "fast" not in str(raised.value)
