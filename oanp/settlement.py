"""Settlement by simultaneous reveal: the price rule the arbiter applies and the auditor
re-derives (docs/protocol.md §5, settlement)."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal

from oanp.money import minor_units

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
