"""Settlement by simultaneous reveal: the price rule the arbiter applies and the auditor
re-derives (docs/protocol.md §5, settlement)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Final, Literal

from oanp.wire.money import minor_units

#: The rule's name, as agreements carry it in ``settlement.rule``.
SETTLEMENT_RULE = "midpoint/v0.1"


def settlement_price(
    ceiling: Decimal,
    floor: Decimal,
    *,
    currency: str,
    buyer_standing: Decimal | None,
    merchant_standing: Decimal | None,
) -> Decimal:
    """The midpoint rule (docs/protocol.md §5): (ceiling + floor) / 2, rounded half-even to the
    currency's minor unit, then raised to the buyer's standing price and lowered to the
    merchant's, where each exists: no one loses a concession already offered."""
    unit = Decimal(1).scaleb(-minor_units(currency))
    price = ((ceiling + floor) / 2).quantize(unit, rounding=ROUND_HALF_EVEN)
    if buyer_standing is not None:
        price = max(price, buyer_standing)
    if merchant_standing is not None:
        price = min(price, merchant_standing)
    return price


# When an agent reveals first ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SettlePolicy:
    """When an agent reveals its limit to settle at once (docs/protocol.md §5, settlement).

    ``when`` is ``"never"``; ``"stuck"``, once a round's verdict finds the spread did not
    narrow; or ``"round"``, in its turn from round ``from_round`` on. Whatever ``when`` says,
    an agent in a session opened for settlement answers the other side's reveal with its own
    (the buyer asked for settlement by opening so, the merchant agreed to it by acking): the
    deal is then decided by both limits, and the midpoint never takes back a concession.
    A buyer opens a session for settlement only when its policy is not ``"never"``.
    """

    when: Literal["never", "stuck", "round"] = "never"
    from_round: int = 1

    def __post_init__(self) -> None:
        if self.when not in ("never", "stuck", "round"):
            raise ValueError(f"settle when {self.when!r}: never, stuck or round")
        if self.from_round < 1:
            raise ValueError("settling from a round before round 1")

    @property
    def allows(self) -> bool:
        return self.when != "never"

    def reveals_now(self, round_: int, stuck: bool) -> bool:
        """Whether to reveal first in this turn of round ``round_``."""
        if self.when == "stuck":
            return stuck
        return self.when == "round" and round_ >= self.from_round


NEVER_SETTLE: Final = SettlePolicy()
