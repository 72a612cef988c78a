"""The Pareto frontier of a multi-issue session (profile ``terms/v0.1``), from what both parties
revealed after the end (docs/protocol.md §10, §16), and where the agreement lies against it.

Each party's utility is its :class:`~oanp.agents.tradeoffs.TermsPlan`'s: the weighted sum of how far
the price and each issue lie from its ideal towards its limit, read from its revealed
constraints (the price limits as its vault holds them, the weights and per-issue limits under
``terms``). The candidates are the agreements both could accept by those limits: a price in
steps across the zone from the merchant's floor to the buyer's ceiling, each number issue on
its decimals grid (thinned to at most :data:`MAX_ISSUE_VALUES` evenly spaced values) and each
choice's options, each within both sides' limits. Of those, the frontier keeps the ones no
other is at least as good for both sides and better for one.

Every issue's utility depends on that issue alone, so a candidate's score is a sum of parts:
the search folds the issues in one at a time and keeps only the non-dominated partial sums (a
dominated part can never complete a non-dominated whole), rather than enumerating the product
of every issue's values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TypeVar

from oanp.agents.tradeoffs import TermsPlan, read_terms_vault
from oanp.agents.vaults import BuyerVault, MerchantVault
from oanp.wire.commitments import Side
from oanp.wire.money import decimals_of
from oanp.wire.terms import ChoiceIssue, Issue, Values

#: How many equal steps the price takes across the zone of agreement.
PRICE_STEPS = 40
#: The most values of one number issue the search tries (its whole grid when smaller).
MAX_ISSUE_VALUES = 101


@dataclass(frozen=True, slots=True)
class Candidate:
    """A candidate agreement and what it is worth to each side, 0 to 1."""

    price: Decimal
    values: Values
    buyer: Decimal
    merchant: Decimal


@dataclass(frozen=True, slots=True)
class Frontier:
    """The non-dominated candidates, by the buyer's utility ascending (so the merchant's
    descends): the curve a chart draws."""

    points: tuple[Candidate, ...]

    def nearest(self, buyer: Decimal, merchant: Decimal) -> tuple[Candidate, Decimal]:
        """The point of the frontier nearest to the utilities ``(buyer, merchant)``, and the
        distance between them (0 for a point on the frontier)."""
        if not self.points:
            raise ValueError("an empty frontier has no nearest point")
        distances = [
            ((p.buyer - buyer) ** 2 + (p.merchant - merchant) ** 2).sqrt() for p in self.points
        ]
        best = min(range(len(distances)), key=distances.__getitem__)
        return self.points[best], distances[best]


@dataclass(frozen=True, slots=True)
class TradeOffs:
    """What the reveals say of a terms session: each side's utility of the agreement, the
    frontier, and how far from it the agreement fell."""

    floor: Decimal
    ceiling: Decimal
    frontier: Frontier
    #: ``None`` when the session did not agree.
    agreement: Candidate | None
    nearest: Candidate | None
    distance: Decimal | None


def revealed_plan(
    role: Side, issues: Sequence[Issue], constraints: Mapping[str, object]
) -> TermsPlan:
    """A party's plan from the constraints its reveal opened: a buyer's ``true_ceiling`` and
    ``budget_cap`` (the ceiling when absent), a merchant's ``floor_price`` and ``ideal_price``,
    and ``terms`` as :func:`~oanp.agents.tradeoffs.read_terms_vault` reads them (none: indifferent
    to every issue). ``ValueError`` says what does not read."""
    terms = read_terms_vault(constraints["terms"]) if "terms" in constraints else None
    if role == "buyer":
        ceiling = _amount(constraints, "true_ceiling")
        budget = _amount(constraints, "budget_cap") if "budget_cap" in constraints else ceiling
        limits = BuyerVault(true_ceiling=ceiling, budget_cap=budget, terms=terms).limits()
    else:
        floor = _amount(constraints, "floor_price")
        ideal = _amount(constraints, "ideal_price")
        limits = MerchantVault(floor_price=floor, ideal_price=ideal, terms=terms).limits()
    return TermsPlan(role, tuple(issues), limits, terms)


def _amount(constraints: Mapping[str, object], name: str) -> Decimal:
    value = constraints.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise ValueError(f"{name} must be a number")
    try:
        amount = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    except InvalidOperation:
        raise ValueError(f"{name} must be a number") from None
    if not amount.is_finite() or amount <= 0:
        raise ValueError(f"{name} must be a positive number")
    return amount


def trade_offs(
    issues: Sequence[Issue],
    buyer: Mapping[str, object],
    merchant: Mapping[str, object],
    agreement: tuple[Decimal, Values] | None = None,
) -> TradeOffs | None:
    """The trade-offs of a session declaring ``issues``, from each side's revealed
    constraints, with the agreed price and values if any; ``None`` when the buyer's ceiling is
    under the merchant's floor (no agreement both could accept). ``ValueError`` when the
    constraints do not read as a reference agent's vault."""
    plans = revealed_plan("buyer", issues, buyer), revealed_plan("merchant", issues, merchant)
    floor, ceiling = plans[1].price.reservation, plans[0].price.reservation
    if floor > ceiling:
        return None
    found = frontier(plans[0], plans[1], floor, ceiling, agreement)
    if agreement is None:
        return TradeOffs(floor, ceiling, found, None, None, None)
    price, values = agreement
    agreed = Candidate(price, values, *(plan.utility(price, values) for plan in plans))
    if not found.points:
        return TradeOffs(floor, ceiling, found, agreed, None, None)
    nearest, distance = found.nearest(agreed.buyer, agreed.merchant)
    return TradeOffs(floor, ceiling, found, agreed, nearest, distance)


def frontier(
    buyer: TermsPlan,
    merchant: TermsPlan,
    floor: Decimal,
    ceiling: Decimal,
    include: tuple[Decimal, Values] | None = None,
) -> Frontier:
    """The Pareto frontier of the agreements priced from ``floor`` to ``ceiling`` that both
    plans accept; ``include``, an agreement, joins the candidates (when both accept it), so
    that one on the frontier lies exactly on it."""
    issues = buyer.issues
    prices = set(_steps(floor, ceiling))
    prices |= {p for p in (buyer.price.ideal, merchant.price.ideal) if floor <= p <= ceiling}
    if include is not None and floor <= include[0] <= ceiling:
        prices.add(include[0])
    # Partial candidates: (buyer's score, merchant's score, price, values so far).
    partial: list[tuple[Decimal, Decimal, Decimal, Values]] = _non_dominated(
        ((buyer.price_score(p), merchant.price_score(p), p, ()) for p in prices), _scores
    )
    for index, issue in enumerate(issues):
        own = set(_values(issue))
        if include is not None:
            own.add(include[1][index])
        fits = [v for v in own if buyer.accepts(index, v) and merchant.accepts(index, v)]
        parts = [(buyer.issue_score(index, v), merchant.issue_score(index, v), v) for v in fits]
        partial = _non_dominated(
            (
                (b + pb, m + pm, price, (*values, v))
                for b, m, price, values in partial
                for pb, pm, v in parts
            ),
            _scores,
        )
    outcomes = [
        Candidate(price, values, buyer.utility(price, values), merchant.utility(price, values))
        for _, _, price, values in partial
    ]
    # Once more on the utilities themselves, so that membership and distance agree exactly.
    kept = _non_dominated(outcomes, lambda o: (o.buyer, o.merchant))
    return Frontier(tuple(reversed(kept)))


def _scores(partial: tuple[Decimal, Decimal, Decimal, Values]) -> tuple[Decimal, Decimal]:
    return partial[0], partial[1]


def _steps(low: Decimal, high: Decimal) -> list[Decimal]:
    """``PRICE_STEPS`` equal steps from ``low`` to ``high``, both included, on a grid two
    decimals finer than theirs (so that no step lands beyond them)."""
    places = max(decimals_of(low), decimals_of(high)) + 2
    step = (high - low) / PRICE_STEPS
    grid = Decimal(1).scaleb(-places)
    return [low, *((low + step * k).quantize(grid) for k in range(1, PRICE_STEPS)), high]


def _values(issue: Issue) -> list[Decimal | int]:
    """An issue's values on its own axis: a choice's option indices, a number's grid."""
    if isinstance(issue, ChoiceIssue):
        return list(range(len(issue.options)))
    unit = Decimal(1).scaleb(-issue.decimals)
    count = int((issue.high - issue.low) / unit) + 1
    if count <= MAX_ISSUE_VALUES:
        return [issue.low + unit * k for k in range(count)]
    span = issue.high - issue.low
    inner = (
        (issue.low + span * k / (MAX_ISSUE_VALUES - 1)).quantize(unit)
        for k in range(1, MAX_ISSUE_VALUES - 1)
    )
    return [issue.low, *inner, issue.high]


T = TypeVar("T")


def _non_dominated(items: Iterable[T], key: Callable[[T], tuple[Decimal, Decimal]]) -> list[T]:
    """The items whose ``(buyer, merchant)`` no other item matches on one side and beats on
    the other, by the buyer's descending; of equal pairs, the first."""
    kept: list[T] = []
    best: Decimal | None = None
    for item in sorted(items, key=lambda i: tuple(-k for k in key(i))):
        merchant = key(item)[1]
        if best is None or merchant > best:
            kept.append(item)
            best = merchant
    return kept
