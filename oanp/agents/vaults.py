"""A party's private limits: the vaults its commitment is made over, which only its own
agent reads (:mod:`oanp.agents.parties`). A vault's repr is sealed and its refusals never name a
limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol

from oanp.agents.strategies import Limits
from oanp.agents.tradeoffs import TermsVault
from oanp.wire.canonical import JsonObject
from oanp.wire.money import price_to_json

#: A buyer's vault holds no opening price; every buyer tactic opens at this share of its
#: budget_cap, which is where the published reference buyer opens.
BUYER_OPENING_SHARE = Decimal("0.8")


def _check_amounts(**amounts: Decimal) -> None:
    for name, value in amounts.items():
        if not isinstance(value, Decimal) or not value.is_finite() or value <= 0:
            # Never echo the value: tracebacks end up in logs, which are not sealed.
            raise ValueError(f"{name} must be a positive, finite Decimal")


@dataclass(frozen=True, slots=True, repr=False)
class BuyerVault:
    """A buyer's private limits: ``true_ceiling`` is hard, ``budget_cap`` the soft target."""

    true_ceiling: Decimal
    budget_cap: Decimal
    urgency: str = "medium"
    #: Weights and per-issue limits, for sessions that negotiate terms besides the price.
    terms: TermsVault | None = None

    def __post_init__(self) -> None:
        _check_amounts(true_ceiling=self.true_ceiling, budget_cap=self.budget_cap)
        if self.budget_cap > self.true_ceiling:
            raise ValueError("budget_cap must not exceed true_ceiling")
        if not isinstance(self.urgency, str):
            raise TypeError("urgency must be a string")

    def __repr__(self) -> str:
        return "BuyerVault(<sealed>)"

    def constraints(self) -> JsonObject:
        """The JSON object the buyer's commitment is made over (and a reveal discloses)."""
        constraints: JsonObject = {
            "budget_cap": price_to_json(self.budget_cap),
            "true_ceiling": price_to_json(self.true_ceiling),
            "urgency": self.urgency,
        }
        if self.terms is not None:
            constraints["terms"] = self.terms.constraints()
        return constraints

    def limits(self) -> Limits:
        """The price points a strategy works with: open low, give up nothing past the ceiling."""
        return Limits(
            ideal=self.budget_cap * BUYER_OPENING_SHARE,
            reservation=self.true_ceiling,
            target=self.budget_cap,
        )


@dataclass(frozen=True, slots=True, repr=False)
class MerchantVault:
    """A merchant's private limits: ``floor_price`` is hard, ``ideal_price`` its list price."""

    floor_price: Decimal
    ideal_price: Decimal
    #: Weights and per-issue limits, for sessions that negotiate terms besides the price.
    terms: TermsVault | None = None

    def __post_init__(self) -> None:
        _check_amounts(floor_price=self.floor_price, ideal_price=self.ideal_price)
        if self.floor_price > self.ideal_price:
            raise ValueError("floor_price must not exceed ideal_price")

    def __repr__(self) -> str:
        return "MerchantVault(<sealed>)"

    def constraints(self) -> JsonObject:
        """The JSON object the merchant's commitment is made over (and a reveal discloses)."""
        constraints: JsonObject = {
            "floor_price": price_to_json(self.floor_price),
            "ideal_price": price_to_json(self.ideal_price),
        }
        if self.terms is not None:
            constraints["terms"] = self.terms.constraints()
        return constraints

    def limits(self) -> Limits:
        """The price points a strategy works with: open at list price, stop at the floor."""
        return Limits(ideal=self.ideal_price, reservation=self.floor_price, target=self.ideal_price)


class Vault(Protocol):
    """What an agent needs of a vault: the committed constraints and the strategy's limits."""

    def constraints(self) -> JsonObject: ...

    def limits(self) -> Limits: ...

    @property
    def terms(self) -> TermsVault | None: ...
