"""What the parties' reveals say about a session: the zone of agreement, the Nash point and
how the agreed price split the surplus (docs/protocol.md §10); in a session with issues
besides the price, each side's utility of the agreement and the Pareto frontier it is
measured against (:mod:`oanp.agents.frontier`).

Only revealed values are used, and only once revealed: until then the arbiter knows
commitments, not limits. The buyer's reservation price is its ``true_ceiling``, the
merchant's its ``floor_price``.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation
from typing import Any

from oanp.agents.frontier import Candidate, Frontier, TradeOffs, trade_offs
from oanp.wire.terms import Issue, issues_json, read_terms, terms_json

PERCENT = Decimal("0.1")


def plain(value: Decimal) -> Decimal:
    """``value`` without trailing zeros and never in exponent form (340, not 3.4E+2)."""
    return value.quantize(Decimal(1)) if value == value.to_integral() else value.normalize()


def _price(constraints: dict[str, Any] | None, name: str) -> Decimal | None:
    if constraints is None:
        return None
    try:
        value = Decimal(str(constraints[name]))
    except (KeyError, InvalidOperation):
        return None
    return plain(value) if value.is_finite() else None


@dataclass(frozen=True)
class Surplus:
    """Who got what of the zone: amounts, and their shares of the whole in percent."""

    buyer: Decimal
    merchant: Decimal
    buyer_pct: Decimal | None
    merchant_pct: Decimal | None


@dataclass(frozen=True)
class Analysis:
    ceiling: Decimal | None
    floor: Decimal | None
    price: Decimal | None

    @property
    def both(self) -> bool:
        return self.ceiling is not None and self.floor is not None

    @property
    def any(self) -> bool:
        return self.ceiling is not None or self.floor is not None

    @property
    def has_zone(self) -> bool:
        return self.both and self.floor <= self.ceiling  # type: ignore[operator]

    @property
    def width(self) -> Decimal | None:
        return self.ceiling - self.floor if self.has_zone else None  # type: ignore[operator]

    @property
    def nash(self) -> Decimal | None:
        """With linear utilities (each side's gain is the distance of the price from its
        limit) and nothing on disagreement, the product of gains peaks at the midpoint."""
        if not self.has_zone:
            return None
        return plain((self.floor + self.ceiling) / 2)  # type: ignore[operator]

    @property
    def surplus(self) -> Surplus | None:
        """The split at the agreed price; shares only when it lies within the zone, since a
        price outside it leaves one side below its own limit."""
        if self.price is None or not self.any:
            return None
        buyer = None if self.ceiling is None else self.ceiling - self.price
        merchant = None if self.floor is None else self.price - self.floor
        if buyer is None or merchant is None:
            # One side revealed: its own gain is known, the other's is not.
            return Surplus(buyer, merchant, None, None)  # type: ignore[arg-type]
        total = buyer + merchant
        if not self.has_zone or total <= 0 or buyer < 0 or merchant < 0:
            return Surplus(buyer, merchant, None, None)
        return Surplus(
            buyer,
            merchant,
            (100 * buyer / total).quantize(PERCENT),
            (100 * merchant / total).quantize(PERCENT),
        )

    @property
    def nash_position(self) -> Decimal | None:
        return self.position(self.nash)

    def position(self, value: Decimal | None) -> Decimal | None:
        """Where ``value`` lies along the zone, 0 to 100, for the bar."""
        if value is None or not self.width:
            return None
        share = 100 * (value - self.floor) / self.width  # type: ignore[operator]
        return min(Decimal(100), max(Decimal(0), share)).quantize(PERCENT)


def analyse(revealed: dict[str, dict[str, Any]], final_price: Decimal | None) -> Analysis:
    """The analysis of one session from its reveals (``{"buyer": constraints, ...}``)."""
    return Analysis(
        ceiling=_price(revealed.get("buyer"), "true_ceiling"),
        floor=_price(revealed.get("merchant"), "floor_price"),
        price=None if final_price is None else plain(final_price),
    )


#: The most frontier points the chart draws: a frontier of thousands reads no better.
CHART_POINTS = 400


@dataclass(frozen=True)
class TermsAnalysis:
    """A terms session's trade-offs once both sides revealed: ``found`` is ``None`` when the
    revealed limits leave no agreement both could accept, or ``problem`` says why they do not
    read as limits and weights.

    ``found.frontier`` holds the points the chart draws (thinned evenly to at most
    ``CHART_POINTS`` + 1, both ends kept); ``frontier_size`` counts the whole frontier, which
    the agreement's distance and nearest point were measured against."""

    issues: tuple[Issue, ...]
    found: TradeOffs | None
    problem: str | None = None
    frontier_size: int = 0

    @property
    def nearest_terms(self) -> list[tuple[str, Any]]:
        """The price and terms of the frontier's point nearest to the agreement, as (name,
        value) pairs, the price first: an agreement both sides would have liked better."""
        near = self.found.nearest if self.found else None
        if near is None:
            return []
        return [("price", plain(near.price)), *terms_json(self.issues, near.values).items()]

    @property
    def chart_json(self) -> str:
        """The frontier, the agreement and the frontier's point nearest to it, as the chart
        draws them: buyer's utility on x."""
        if self.found is None:
            return "null"

        def xy(o: Candidate | None) -> dict[str, float] | None:
            return None if o is None else {"x": float(o.buyer), "y": float(o.merchant)}

        return json.dumps(
            {
                "frontier": [xy(o) for o in self.found.frontier.points],
                "agreement": xy(self.found.agreement),
                "nearest": xy(self.found.nearest) if self.found.distance else None,
            }
        )


def _thinned(found: TradeOffs) -> TradeOffs:
    points = found.frontier.points
    step = max(1, -(-len(points) // CHART_POINTS))
    shown = (*points[:-1:step], points[-1]) if points else ()
    return replace(found, frontier=Frontier(shown))


#: Analyses already made by this process, by a digest of what they were made from. The
#: frontier's search takes up to a second with eight issues, and an ended session's page is
#: rendered again on every visit; its inputs no longer change, and when a late reveal does
#: change them the digest changes with them, so nothing here is ever stale.
_made: OrderedDict[str, TermsAnalysis] = OrderedDict()
_made_lock = threading.Lock()
MADE_KEPT = 128


def _digest(
    issues: tuple[Issue, ...],
    revealed: Mapping[str, dict[str, Any]],
    final_price: Decimal | None,
    final_terms: Mapping[str, Any],
) -> str:
    made_from = [issues_json(issues), revealed, final_price, final_terms]
    text = json.dumps(made_from, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def analyse_terms(
    issues: tuple[Issue, ...],
    revealed: Mapping[str, dict[str, Any]],
    final_price: Decimal | None,
    final_terms: Mapping[str, Any],
) -> TermsAnalysis | None:
    """The trade-offs of a session declaring ``issues``, once both sides revealed, with its
    agreement (``final_price`` and ``final_terms``) if any; ``None`` before (or when the
    session declares none). Made once per process for the same inputs, but for two first
    renders at the same moment, which each make it (made outside the lock, so that one
    session's search never holds up another's page)."""
    if not issues or "buyer" not in revealed or "merchant" not in revealed:
        return None
    both = {role: revealed[role] for role in ("buyer", "merchant")}
    key = _digest(issues, both, final_price, final_terms)
    with _made_lock:
        if key in _made:
            _made.move_to_end(key)
            return _made[key]
    made = _analysed(issues, both, final_price, final_terms)
    with _made_lock:
        _made[key] = made
        while len(_made) > MADE_KEPT:
            _made.popitem(last=False)
    return made


def _analysed(
    issues: tuple[Issue, ...],
    revealed: Mapping[str, dict[str, Any]],
    final_price: Decimal | None,
    final_terms: Mapping[str, Any],
) -> TermsAnalysis:
    agreement = None
    if final_price is not None:
        agreement = (final_price, read_terms(issues, dict(final_terms)))
    try:
        found = trade_offs(issues, revealed["buyer"], revealed["merchant"], agreement)
    except ValueError as refused:
        return TermsAnalysis(issues, None, f"the revealed limits do not read: {refused}")
    if found is None:
        return TermsAnalysis(issues, None)
    return TermsAnalysis(issues, _thinned(found), frontier_size=len(found.frontier.points))
