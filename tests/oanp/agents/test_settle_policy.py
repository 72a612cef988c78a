"""Agents that settle by reveal (docs/protocol.md §5): when they reveal, and what follows."""

from __future__ import annotations

import itertools
from decimal import Decimal

import pytest

from oanp.agents.parties import BuyerAgent, MerchantAgent
from oanp.agents.rehearsal import Rehearsal, rehearse
from oanp.agents.strategies import ReferenceBuyer, ReferenceMerchant
from oanp.agents.vaults import BuyerVault, MerchantVault
from oanp.audit.invariants import audit_log
from oanp.wire.commitments import encode_salt
from oanp.wire.settlement import NEVER_SETTLE, SettlePolicy
from oanp.wire.state import Arbiter
from tests.support.factories.logs import SteppingClock
from tests.support.factories.sessions import JWKS, KEY
from tests.support.factories.terms import BUYER_TERMS, ISSUES, MERCHANT_TERMS


def negotiate(
    buyer: SettlePolicy,
    merchant: SettlePolicy,
    *,
    ceiling: int = 420,
    floor: int = 280,
    steps: tuple[str, str] = ("0.05", "0.25"),
    terms: bool = False,
) -> tuple[Rehearsal, BuyerAgent]:
    """A session of the reference agents; with ``terms``, on the factory's issues, each
    party weighing them by the factory's vaults."""
    ids = itertools.count()

    def new_id() -> str:
        return f"m{next(ids)}"

    b = BuyerAgent(
        agent_id="buyer-1",
        vault=BuyerVault(
            true_ceiling=Decimal(ceiling),
            budget_cap=Decimal(min(400, ceiling)),
            urgency="low",
            terms=BUYER_TERMS if terms else None,
        ),
        strategy=ReferenceBuyer(step_share=Decimal(steps[0])),
        salt=encode_salt(b"\x01" * 32),
        new_message_id=new_id,
        settle=buyer,
    )
    m = MerchantAgent(
        agent_id="merchant-1",
        vault=MerchantVault(
            floor_price=Decimal(floor),
            ideal_price=Decimal(400),
            terms=MERCHANT_TERMS if terms else None,
        ),
        strategy=ReferenceMerchant(step_share=Decimal(steps[1])),
        salt=encode_salt(b"\x02" * 32),
        new_message_id=new_id,
        settle=merchant,
    )
    clock = SteppingClock()
    opening = b.open(
        session_id="sess-settle",
        merchant_agent_id="merchant-1",
        item={"sku": "x"},
        currency="USD",
        now=clock(),
        issues=ISSUES if terms else None,
    )
    result = rehearse(
        buyer=b,
        merchant=m,
        arbiter=Arbiter("arbiter.test", KEY, "u"),
        opening=opening,
        clock=clock,
    )
    assert audit_log([e.as_json() for e in result.entries], JWKS).ok
    return result, b


def types(result: Rehearsal) -> list[str]:
    return [e.type for e in result.entries]


def test_a_buyer_settling_from_round_one_settles_at_the_midpoint() -> None:
    result, buyer = negotiate(SettlePolicy("round", 1), NEVER_SETTLE)
    assert types(result)[1:] == [
        "session.ack",
        "settle.reveal",
        "settle.reveal",  # the merchant agreed to settle by acking: it answers
        "round.verdict",
        "session.agree",
    ]
    assert str(buyer.outcome) == "Agreed(price=Decimal('350'))"


def test_a_merchant_reveals_once_the_spread_stops_narrowing() -> None:
    # Neither side concedes after round 1, so round 2's verdict finds the spread unchanged;
    # the buyer allows settlement but would only reveal past the last round.
    result, buyer = negotiate(SettlePolicy("round", 6), SettlePolicy("stuck"), steps=("0", "0"))
    verdicts = [e.envelope["payload"] for e in result.entries if e.type == "round.verdict"]
    first = next(e for e in result.entries if e.type == "settle.reveal")
    assert first.envelope["sender"]["role"] == "merchant"
    assert first.envelope["payload"]["round"] == 3  # type: ignore[index]
    assert [v["rationale"] for v in verdicts] == [  # type: ignore[index]
        "opening_moves",
        "spread_unchanged",
        "settled",
    ]
    assert str(buyer.outcome) == "Agreed(price=Decimal('350'))"


def test_no_zone_closes_after_both_reveals() -> None:
    result, buyer = negotiate(SettlePolicy("round", 2), NEVER_SETTLE, ceiling=300, floor=350)
    assert types(result)[-3:] == ["settle.reveal", "round.verdict", "session.close"]
    assert str(buyer.outcome) == "Closed(reason='no_zone')"


def test_a_buyer_that_never_settles_does_not_ask_for_it() -> None:
    result, _ = negotiate(NEVER_SETTLE, SettlePolicy("round", 1))
    assert "settlement" not in result.entries[0].envelope["payload"]  # type: ignore[operator]
    assert "settle.reveal" not in types(result)


@pytest.mark.parametrize(("when", "from_round"), [("sometimes", 1), ("round", 0)])
def test_a_policy_that_means_nothing_is_refused(when: str, from_round: int) -> None:
    with pytest.raises(ValueError, match="settl"):
        SettlePolicy(when, from_round)  # type: ignore[arg-type]


def test_with_issues_an_agent_reveals_only_once_both_sides_terms_match() -> None:
    # A reveal settles the price alone: the arbiter refuses it while an issue is open
    # (docs/protocol.md §16), and a refusal would stop this rehearsal. The merchant would
    # reveal from round 1.
    result, buyer = negotiate(SettlePolicy("round", 6), SettlePolicy("round", 1), terms=True)
    assert str(buyer.outcome) == "Agreed(price=Decimal('340'))"
    assert "settle.reveal" not in types(result)  # the terms matched only in the accept
    # Under the floor, the terms match in round 5: only then does the merchant reveal.
    result, buyer = negotiate(
        SettlePolicy("round", 6), SettlePolicy("round", 1), ceiling=250, terms=True
    )
    offers = [e.envelope["payload"] for e in result.entries if e.type.startswith("offer.")]
    first = next(e for e in result.entries if e.type == "settle.reveal")
    assert first.envelope["sender"]["role"] == "merchant"
    assert first.envelope["payload"]["round"] == 5  # type: ignore[index]
    # Its turns: the buyer's propose against its own standing counter, matching at last.
    assert offers[-1]["terms"] == offers[-2]["terms"]  # type: ignore[index]
    assert offers[-3]["terms"] != offers[-4]["terms"]  # type: ignore[index]
    assert str(buyer.outcome) == "Closed(reason='no_zone')"
