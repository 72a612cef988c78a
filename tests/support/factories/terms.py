"""A multi-issue session's declaration (profile terms/v0.1) and two reference agents whose
vaults weigh its issues the other way round, so that each concedes first what the other wants."""

from __future__ import annotations

import itertools
from decimal import Decimal
from typing import Any

from oanp.agents.parties import BuyerAgent, MerchantAgent
from oanp.agents.strategies import ReferenceBuyer, ReferenceMerchant
from oanp.agents.tradeoffs import IssueLimits, TermsVault
from oanp.agents.vaults import BuyerVault, MerchantVault
from oanp.wire.commitments import encode_salt
from oanp.wire.terms import read_issues

ISSUES: list[dict[str, Any]] = [
    {
        "name": "delivery_days",
        "kind": "number",
        "buyer_prefers": "low",
        "min": 1,
        "max": 30,
        "decimals": 0,
    },
    {"name": "support", "kind": "choice", "options": ["premium", "standard", "none"]},
]
DECLARED = read_issues(ISSUES)

#: The buyer needs it fast and cares little for support; the merchant the other way round.
BUYER_TERMS = TermsVault(
    Decimal(1),
    (
        IssueLimits("delivery_days", Decimal(2), Decimal(2), Decimal(14)),
        IssueLimits("support", Decimal("0.25"), "premium", "none"),
    ),
)
MERCHANT_TERMS = TermsVault(
    Decimal(1),
    (
        IssueLimits("delivery_days", Decimal("0.25"), Decimal(20), Decimal(3)),
        IssueLimits("support", Decimal(2), "none", "standard"),
    ),
)


def terms_agents(
    buyer_terms: TermsVault | None = BUYER_TERMS,
    merchant_terms: TermsVault | None = MERCHANT_TERMS,
    *,
    buyer_id: str = "buyer-001",
    merchant_id: str = "merchant-sfo",
) -> tuple[BuyerAgent, MerchantAgent]:
    """The SFO→JFK agents' price limits (ceiling 420, floor 280) with these terms."""
    numbers = itertools.count(1)

    def new_id() -> str:
        return f"msg-{next(numbers):04d}"

    buyer = BuyerAgent(
        agent_id=buyer_id,
        vault=BuyerVault(Decimal(420), Decimal(400), terms=buyer_terms),
        strategy=ReferenceBuyer(),
        salt=encode_salt(b"\x01" * 32),
        new_message_id=new_id,
    )
    merchant = MerchantAgent(
        agent_id=merchant_id,
        vault=MerchantVault(Decimal(280), Decimal(400), terms=merchant_terms),
        strategy=ReferenceMerchant(),
        salt=encode_salt(b"\x02" * 32),
        new_message_id=new_id,
    )
    return buyer, merchant
