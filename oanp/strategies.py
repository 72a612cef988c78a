"""Negotiation strategies: pure, deterministic functions from what a party knows to its next move.

A strategy sees a :class:`Situation` (its role, its private :class:`Limits`, the round, the
prices named so far) and returns an :class:`Offer` or :data:`ACCEPT` of the opponent's
standing price. The concession tactics share one frame, :class:`ConcessionStrategy`: a tactic
only says which price it aspires to this round; the frame rounds it in the party's own favour,
keeps it within the reservation and never behind the party's previous price, and applies one
acceptance rule (AC_next) to every tactic alike.

Both roles are handled by one set of formulas: a buyer concedes upwards from a low ideal to its
ceiling, a merchant downwards from its list price to its floor.

:data:`STRATEGIES` is the one registry of strategies by name, read by the command line, the
hosted agents, their form and the demo.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import (
    ROUND_CEILING,
    ROUND_FLOOR,
    ROUND_HALF_EVEN,
    Context,
    Decimal,
    DivisionByZero,
    InvalidOperation,
    Overflow,
    localcontext,
)
from types import MappingProxyType
from typing import Final, Protocol

from oanp.commitments import Role
from oanp.money import minor_units

# A fixed context, so that a caller's global decimal settings can never change a price.
_ARITHMETIC: Final = Context(
    prec=28, rounding=ROUND_HALF_EVEN, traps=[InvalidOperation, DivisionByZero, Overflow]
)


def at_least_as_good(role: Role, price: Decimal, than: Decimal) -> bool:
    """Whether ``price`` serves ``role`` at least as well as ``than``: lower for a buyer.

    Every comparison a party makes goes through here: "within my limit" is "at least as good
    as my reservation", "not reneging" is "my previous price is at least as good as this one".
    """
    return price <= than if role == "buyer" else price >= than


def in_own_favour(role: Role, price: Decimal, currency: str) -> Decimal:
    """``price`` rounded to the currency's minor unit in the party's interest.

    A buyer rounds down and a merchant up, so rounding never carries a price past a limit.
    """
    step = Decimal(1).scaleb(-minor_units(currency))
    rounding = ROUND_FLOOR if role == "buyer" else ROUND_CEILING
    return price.quantize(step, rounding=rounding, context=_ARITHMETIC)


@dataclass(frozen=True, slots=True, repr=False)
class Limits:
    """A party's private price points, as its strategy sees them.

    ``ideal`` is where it opens, ``reservation`` its hard limit, ``target`` its soft target
    (the scale some tactics measure their steps in). ``repr`` is sealed like the vaults'.
    """

    ideal: Decimal
    reservation: Decimal
    target: Decimal

    def __repr__(self) -> str:
        return "Limits(<sealed>)"


@dataclass(frozen=True, slots=True)
class Situation:
    """Everything a strategy may base one move on.

    ``own_prices`` are the party's earlier prices, ``opponent_prices`` the other side's, both
    oldest first. The last opponent price is the standing price an accept would take: for a
    merchant the buyer's price of this round, for a buyer the merchant's counter of the
    round before.
    """

    role: Role
    limits: Limits
    currency: str
    round: int
    max_rounds: int
    own_prices: tuple[Decimal, ...] = ()
    opponent_prices: tuple[Decimal, ...] = ()

    def __post_init__(self) -> None:
        if not 1 <= self.round <= self.max_rounds:
            raise ValueError("a situation's round lies between 1 and max_rounds")

    @property
    def direction(self) -> int:
        """+1 when conceding means raising the price (buyer), −1 when lowering it."""
        return 1 if self.role == "buyer" else -1

    @property
    def standing(self) -> Decimal | None:
        """The opponent's price an accept would take, if it has named one."""
        return self.opponent_prices[-1] if self.opponent_prices else None

    @property
    def progress(self) -> Decimal:
        """Time as the fraction t of the session used up: 0 in round 1, 1 in the last."""
        if self.max_rounds == 1:
            return Decimal(1)
        return Decimal(self.round - 1) / Decimal(self.max_rounds - 1)

    @property
    def is_last_counter(self) -> bool:
        """True for the merchant in the last round: a counter now is its last, and only the
        buyer's final answer can take it."""
        return self.role == "merchant" and self.round == self.max_rounds

    @property
    def is_final_answer(self) -> bool:
        """True for the buyer once the merchant countered in the last round: its accept is the
        only move left (docs/protocol.md §5); anything else the agent declines by withdrawing."""
        return (
            self.role == "buyer"
            and self.round == self.max_rounds
            and len(self.opponent_prices) >= self.round
        )

    def clamp(self, aspiration: Decimal) -> Decimal:
        """The price to name for ``aspiration``: rounded in the party's favour, no further than
        the reservation, no better for the party than its previous price, and positive.

        Positivity comes last on purpose: a buyer whose ceiling lies under one minor unit then
        yields a price beyond its limit, which the agent's guard refuses loudly.
        """
        price = in_own_favour(self.role, aspiration, self.currency)
        limit = in_own_favour(self.role, self.limits.reservation, self.currency)
        if not at_least_as_good(self.role, price, limit):
            price = limit
        if self.own_prices and at_least_as_good(self.role, price, self.own_prices[-1]):
            price = self.own_prices[-1]
        return max(price, Decimal(1).scaleb(-minor_units(self.currency)))


@dataclass(frozen=True, slots=True)
class Offer:
    """Name ``price`` for this round (``offer.propose`` or ``offer.counter``)."""

    price: Decimal


@dataclass(frozen=True, slots=True)
class Accept:
    """Accept the opponent's standing price (``offer.accept``)."""


ACCEPT: Final = Accept()

Decision = Offer | Accept


class Strategy(Protocol):
    """What an agent needs of a strategy: one move for one situation, nothing remembered."""

    def decide(self, situation: Situation) -> Decision:
        """The move to make in ``situation``."""
        ...


@dataclass(frozen=True)
class ConcessionStrategy(ABC):
    """A tactic that concedes from its ideal towards its reservation, with AC_next.

    Acceptance: take the standing price when it is at least as good as the price this party
    would name now. In the last round each side also takes any standing price within its
    limit: the merchant, rather than stake the deal on the buyer's final answer to its last
    counter; the buyer in that final answer, since the session ends unagreed without it.
    """

    @abstractmethod
    def aspiration(self, situation: Situation) -> Decimal:
        """The unrounded, unclamped price this tactic would name in ``situation``."""

    def decide(self, situation: Situation) -> Decision:
        """Offer the clamped aspiration, or accept the standing price under AC_next."""
        with localcontext(_ARITHMETIC):
            price = situation.clamp(self.aspiration(situation))
        standing = situation.standing
        if standing is not None and (
            at_least_as_good(situation.role, standing, price)
            or (
                (situation.is_final_answer or situation.is_last_counter)
                and at_least_as_good(situation.role, standing, situation.limits.reservation)
            )
        ):
            return ACCEPT
        return Offer(price)


@dataclass(frozen=True)
class ReferenceBuyer(ConcessionStrategy):
    """The published reference buyer: opens at its ideal (80% of budget_cap, see
    :meth:`oanp.agents.BuyerVault.limits`) and concedes ``step_share`` of its soft target
    (5% of budget_cap) per round, never past its ceiling.

    It is not time-dependent, so it may end a session below its ceiling.
    """

    step_share: Decimal = Decimal("0.05")

    def aspiration(self, situation: Situation) -> Decimal:
        step = self.step_share * situation.limits.target
        return situation.limits.ideal + situation.direction * step * (situation.round - 1)


@dataclass(frozen=True)
class ReferenceMerchant(ConcessionStrategy):
    """The published reference merchant: its ideal price is its list price, and in round r it
    names ideal − (ideal − floor) × ``step_share`` × r (25% of the range per round, already in
    round 1), never below its floor.

    With floor 280 and ideal 400 that is 370, 340, 310, 280: a buyer's 340 in round 2 meets
    the round-2 counter, so AC_next accepts it (the published SFO→JFK trace).
    """

    step_share: Decimal = Decimal("0.25")

    def aspiration(self, situation: Situation) -> Decimal:
        limits = situation.limits
        share = self.step_share * situation.round
        return limits.ideal + (limits.reservation - limits.ideal) * share


@dataclass(frozen=True)
class TimeDependent(ConcessionStrategy):
    """Faratin's time-dependent tactic: p(t) = ideal + (reservation − ideal) · t^(1/e), with
    t = (r − 1)/(max_rounds − 1) (t = 1 when max_rounds is 1).

    It opens at its ideal and names its reservation in the final round: a buyer's last
    propose is its ceiling (rounded down to the currency), so a merchant whose floor lies
    under it always gets a deal on its last word.
    """

    exponent: Decimal = Decimal(1)

    def __post_init__(self) -> None:
        if not self.exponent > 0:
            raise ValueError("a time-dependent exponent is positive")

    def aspiration(self, situation: Situation) -> Decimal:
        limits = situation.limits
        alpha = situation.progress ** (Decimal(1) / self.exponent)
        return limits.ideal + (limits.reservation - limits.ideal) * alpha


@dataclass(frozen=True)
class Boulware(TimeDependent):
    """Holds out and concedes late (e < 1)."""

    exponent: Decimal = Decimal("0.2")


@dataclass(frozen=True)
class Linear(TimeDependent):
    """Concedes the same amount every round (e = 1)."""

    exponent: Decimal = Decimal(1)


@dataclass(frozen=True)
class Conceder(TimeDependent):
    """Concedes early (e > 1)."""

    exponent: Decimal = Decimal(5)


@dataclass(frozen=True)
class TitForTat(ConcessionStrategy):
    """Faratin's relative tit-for-tat: concede in the proportion the opponent conceded in its
    last move (own price × its previous price / its last price), by at least ``min_share`` of
    the ideal–reservation range, never past the reservation.

    The minimum concession is what keeps two tit-for-tat agents from mirroring each other's
    stillness forever. It opens at its ideal.
    """

    min_share: Decimal = Decimal("0.05")

    def aspiration(self, situation: Situation) -> Decimal:
        limits = situation.limits
        if not situation.own_prices:
            return limits.ideal
        last = situation.own_prices[-1]
        mirrored = last
        if len(situation.opponent_prices) >= 2:
            before, latest = situation.opponent_prices[-2:]
            mirrored = last * before / latest
        minimum = self.min_share * abs(limits.reservation - limits.ideal)
        concession = max(situation.direction * (mirrored - last), minimum)
        return last + situation.direction * concession


# The registry ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NamedStrategy:
    """A strategy as a name stands for it: the tactic each role plays, and a one-line label.

    The label says how it plays as a hosted merchant, since that is where a person picks one.
    """

    label: str
    buyer: Callable[[], Strategy]
    merchant: Callable[[], Strategy]

    def for_role(self, role: Role) -> Strategy:
        """A fresh strategy for ``role``."""
        return self.buyer() if role == "buyer" else self.merchant()


#: Every strategy by its canonical name: the name hosted agents store, the command line takes
#: and the demo's buyers use. ``reference`` is the published reference tactic of each role.
STRATEGIES: Final[Mapping[str, NamedStrategy]] = MappingProxyType(
    {
        "reference": NamedStrategy(
            "Reference: a quarter of the range per round", ReferenceBuyer, ReferenceMerchant
        ),
        "boulware": NamedStrategy("Boulware: holds out, concedes late", Boulware, Boulware),
        "conceder": NamedStrategy("Conceder: concedes early", Conceder, Conceder),
        "linear": NamedStrategy("Linear: the same step every round", Linear, Linear),
        "tit-for-tat": NamedStrategy(
            "Tit-for-tat: mirrors the buyer's concessions", TitForTat, TitForTat
        ),
    }
)

#: Other spellings still accepted: ``titfortat`` is what the command line took at first.
ALIASES: Final[Mapping[str, str]] = MappingProxyType({"titfortat": "tit-for-tat"})


class UnknownStrategy(ValueError):
    """A name that is neither a strategy of :data:`STRATEGIES` nor one of its aliases."""


def canonical_name(name: str) -> str:
    """``name`` as :data:`STRATEGIES` spells it: an alias becomes its strategy's name, any
    other name comes back unchanged (so a caller checking choices still sees the unknown)."""
    return ALIASES.get(name, name)


def strategy_named(name: str, role: Role) -> Strategy:
    """A fresh strategy ``name`` (canonical or an alias) for ``role``."""
    try:
        return STRATEGIES[canonical_name(name)].for_role(role)
    except KeyError:
        raise UnknownStrategy(
            f"unknown strategy {name!r}; one of {', '.join(STRATEGIES)}"
        ) from None
