"""Negotiation strategies: pure, deterministic functions from what a party knows to its next move.

A strategy sees a :class:`Situation` (its role, its private :class:`Limits`, the round, the
prices named so far) and returns an :class:`Offer` or :data:`ACCEPT` of the opponent's
standing price. The concession tactics share one frame, :class:`ConcessionStrategy`: a tactic
only says which price it aspires to this round; the frame adds the inventory pressure, rounds
the price in the party's own favour, keeps it within the reservation and never behind the
party's previous price, and applies the acceptance and last-round rules to every tactic alike.

Both roles are handled by one set of formulas: a buyer concedes upwards from a low ideal to its
ceiling, a merchant downwards from its list price to its floor.

:data:`STRATEGIES` is the one registry of strategies by name, read by the command line, the
hosted agents, their form, their preview and the demo: each names its tunable
:class:`Parameter` s, and builds a strategy for a role from a mapping of them.
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
from typing import Final, Literal, Protocol, get_args

from oanp.wire.commitments import Side
from oanp.wire.money import minor_units

# A fixed context, so that a caller's global decimal settings can never change a price.
_ARITHMETIC: Final = Context(
    prec=28, rounding=ROUND_HALF_EVEN, traps=[InvalidOperation, DivisionByZero, Overflow]
)


def at_least_as_good(role: Side, price: Decimal, than: Decimal) -> bool:
    """Whether ``price`` serves ``role`` at least as well as ``than``: lower for a buyer.

    Every comparison a party makes goes through here: "within my limit" is "at least as good
    as my reservation", "not reneging" is "my previous price is at least as good as this one".
    """
    return price <= than if role == "buyer" else price >= than


def in_own_favour(role: Side, price: Decimal, currency: str) -> Decimal:
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

    role: Side
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


#: Which standing prices a party takes (see :class:`ConcessionStrategy`).
Acceptance = Literal["next", "prev"]
#: What a merchant does in the last round (see :class:`ConcessionStrategy`).
LastRound = Literal["take", "counter"]


@dataclass(frozen=True)
class ConcessionStrategy(ABC):
    """A tactic that concedes from its ideal towards its reservation, in one frame for all.

    Price: with ``inventory_pressure`` p (0 to 1) the party names a + p·(reservation − a)
    instead of its tactic's aspiration a, before rounding and clamping: each move gives up the
    share p of what the tactic still holds back, from the first move on. A merchant with stock
    to clear concedes faster; p = 0 is the tactic alone, p = 1 names the reservation at once.

    Acceptance: take the standing price when it is at least as good as, with ``acceptance``
    ``"next"`` (AC_next), the price this party would name now; with ``"prev"`` (AC_prev), the
    price it named last (in its first move, the one it would name now). AC_prev never takes a
    price worse than one it has already asked for, so it agrees no sooner than AC_next.

    Last round: the buyer's final answer takes any counter within its ceiling, since the
    session ends unagreed without it. The merchant's last counter can only be taken by that
    final answer: with ``last_round`` ``"take"`` the merchant rather takes any standing price
    within its floor; with ``"counter"`` its acceptance rule alone decides, and a counter leaves
    the deal to the buyer. Tactics that name their floor in the last round (time-dependent ones)
    take the same prices either way under AC_next.
    """

    acceptance: Acceptance = "next"
    last_round: LastRound = "take"
    inventory_pressure: Decimal = Decimal(0)

    def __post_init__(self) -> None:
        if self.acceptance not in get_args(Acceptance):
            raise ValueError(f"acceptance {self.acceptance!r}: next or prev")
        if self.last_round not in get_args(LastRound):
            raise ValueError(f"last round {self.last_round!r}: take or counter")
        if not 0 <= self.inventory_pressure <= 1:
            raise ValueError("inventory pressure lies between 0 and 1")

    @abstractmethod
    def aspiration(self, situation: Situation) -> Decimal:
        """The unrounded, unclamped price this tactic would name in ``situation``."""

    def decide(self, situation: Situation) -> Decision:
        """Offer the clamped, pressed aspiration, or accept the standing price."""
        with localcontext(_ARITHMETIC):
            aspiration = self.aspiration(situation)
            if self.inventory_pressure:
                reservation = situation.limits.reservation
                aspiration += self.inventory_pressure * (reservation - aspiration)
            price = situation.clamp(aspiration)
        standing = situation.standing
        if standing is not None and self._accepts(situation, standing, price):
            return ACCEPT
        return Offer(price)

    def _accepts(self, situation: Situation, standing: Decimal, price: Decimal) -> bool:
        role = situation.role
        bar = price
        if self.acceptance == "prev" and situation.own_prices:
            bar = situation.own_prices[-1]
        last_word = situation.is_final_answer or (
            situation.is_last_counter and self.last_round == "take"
        )
        return at_least_as_good(role, standing, bar) or (
            last_word and at_least_as_good(role, standing, situation.limits.reservation)
        )


@dataclass(frozen=True)
class ReferenceBuyer(ConcessionStrategy):
    """The published reference buyer: opens at its ideal (80% of budget_cap, see
    :meth:`oanp.agents.vaults.BuyerVault.limits`) and concedes ``step_share`` of its soft target
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
        super().__post_init__()
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

#: A parameter's typed value: a decimal, or one of its choices.
ParameterValue = Decimal | str


class ParameterError(ValueError):
    """Parameters a strategy cannot be built with; ``errors`` maps each bad name to why."""

    def __init__(self, errors: Mapping[str, str]) -> None:
        super().__init__("; ".join(errors.values()))
        self.errors = dict(errors)


@dataclass(frozen=True, slots=True)
class Parameter:
    """One tunable of a named strategy: a keyword of its tactic's constructor.

    ``kind`` is ``"decimal"`` (within ``minimum``–``maximum``) or ``"choice"`` (one of the
    values of ``choices``, each with its label). ``merchant_default`` is the merchant's default
    where it differs from the buyer's; ``merchant_only`` parameters mean nothing to a buyer.
    """

    name: str
    label: str
    kind: Literal["decimal", "choice"]
    default: ParameterValue
    help: str
    minimum: Decimal = Decimal(0)
    maximum: Decimal = Decimal(0)
    choices: tuple[tuple[str, str], ...] = ()
    merchant_default: ParameterValue | None = None
    merchant_only: bool = False

    def default_for(self, role: Side) -> ParameterValue:
        if role == "merchant" and self.merchant_default is not None:
            return self.merchant_default
        return self.default

    @property
    def rule(self) -> str:
        """What a valid value is, as an error message says it."""
        if self.kind == "choice":
            return f"{self.name} is one of {', '.join(value for value, _ in self.choices)}"
        return f"{self.name} is a number from {self.minimum} to {self.maximum}"

    def parse(self, raw: object) -> ParameterValue:
        """``raw`` (text, an int or a Decimal) as this parameter's typed value.

        Raises :class:`ParameterError` naming the parameter and its range or choices.
        """
        if self.kind == "choice":
            if isinstance(raw, str) and raw in dict(self.choices):
                return raw
            raise ParameterError({self.name: self.rule})
        number = _decimal(raw)
        if number is None or not self.minimum <= number <= self.maximum:
            raise ParameterError({self.name: self.rule})
        return number


def _decimal(raw: object) -> Decimal | None:
    """An exact number from text, an int or a Decimal; ``None`` for anything else (a float
    has already lost its exact value, a bool is no number)."""
    if isinstance(raw, bool) or not isinstance(raw, str | int | Decimal):
        return None
    try:
        number = Decimal(raw.strip() if isinstance(raw, str) else raw)
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


@dataclass(frozen=True, slots=True)
class NamedStrategy:
    """A strategy as a name stands for it: the tactic each role plays, a one-line label, and
    the parameters it can be tuned with.

    The label says how it plays as a hosted merchant, since that is where a person picks one.
    """

    name: str
    label: str
    buyer: Callable[..., ConcessionStrategy]
    merchant: Callable[..., ConcessionStrategy]
    parameters: tuple[Parameter, ...]

    def parameters_for(self, role: Side) -> tuple[Parameter, ...]:
        """The parameters ``role`` may set, in the order a form shows them."""
        return tuple(p for p in self.parameters if role == "merchant" or not p.merchant_only)

    def parse(self, role: Side, raw: Mapping[str, object]) -> dict[str, ParameterValue]:
        """Every parameter of ``role``, typed: those of ``raw`` validated, the rest defaults.

        Raises :class:`ParameterError` with every bad or unknown name of ``raw`` at once.
        """
        known = {p.name: p for p in self.parameters_for(role)}
        values = {name: p.default_for(role) for name, p in known.items()}
        errors: dict[str, str] = {}
        for name, value in raw.items():
            parameter = known.get(name)
            if parameter is None:
                errors[name] = self._unknown(role, name)
                continue
            try:
                values[name] = parameter.parse(value)
            except ParameterError as invalid:
                errors.update(invalid.errors)
        if errors:
            raise ParameterError(errors)
        return values

    def _unknown(self, role: Side, name: str) -> str:
        if any(p.name == name for p in self.parameters):
            return f"{name} is a merchant's parameter, not a buyer's"
        names = ", ".join(p.name for p in self.parameters_for(role))
        return f"{self.name} has no parameter {name!r}; its parameters: {names}"

    def stored(self, role: Side, raw: Mapping[str, object]) -> dict[str, str]:
        """:meth:`parse` as JSON keeps it: every parameter as text, so decimals stay exact."""
        return {name: str(value) for name, value in self.parse(role, raw).items()}

    def build(
        self, role: Side, parameters: Mapping[str, object] = MappingProxyType({})
    ) -> Strategy:
        """A fresh strategy for ``role`` with ``parameters`` (validated by :meth:`parse`;
        none given: the defaults, which are the tactics' own)."""
        tactic = self.buyer if role == "buyer" else self.merchant
        return tactic(**self.parse(role, parameters))


ACCEPTANCE = Parameter(
    "acceptance",
    "Acceptance",
    "choice",
    "next",
    "When it takes the other side's standing price.",
    choices=(
        ("next", "At least as good as its own next price (AC_next)"),
        ("prev", "At least as good as its own last price (AC_prev): never sooner"),
    ),
)
LAST_ROUND = Parameter(
    "last_round",
    "Last round",
    "choice",
    "take",
    "Its last counter can only be taken by the buyer's final answer.",
    choices=(
        ("take", "Take any price within the floor"),
        ("counter", "Counter, and leave the deal to the buyer's final answer"),
    ),
    merchant_only=True,
)
INVENTORY_PRESSURE = Parameter(
    "inventory_pressure",
    "Inventory pressure",
    "decimal",
    Decimal(0),
    "Stock to clear: each price gives up this share of what the tactic still holds above the "
    "floor (0 none, 1 the floor at once).",
    minimum=Decimal(0),
    maximum=Decimal(1),
    merchant_only=True,
)
#: What every concession tactic can be tuned with, after its own parameters.
FRAME_PARAMETERS = (ACCEPTANCE, LAST_ROUND, INVENTORY_PRESSURE)


def _exponent(default: str) -> Parameter:
    return Parameter(
        "exponent",
        "Exponent e",
        "decimal",
        Decimal(default),
        "Price ideal + (reservation − ideal)·t^(1/e) at time t: under 1 holds out, over 1 "
        "gives in early.",
        minimum=Decimal("0.05"),
        maximum=Decimal(20),
    )


def _time_dependent(name: str, label: str, tactic: type[TimeDependent], e: str) -> NamedStrategy:
    return NamedStrategy(name, label, tactic, tactic, (_exponent(e), *FRAME_PARAMETERS))


#: Every strategy by its canonical name: the name hosted agents store, the command line takes
#: and the demo's buyers use. ``reference`` is the published reference tactic of each role.
STRATEGIES: Final[Mapping[str, NamedStrategy]] = MappingProxyType(
    {
        named.name: named
        for named in (
            NamedStrategy(
                "reference",
                "Reference: a quarter of the range per round",
                ReferenceBuyer,
                ReferenceMerchant,
                (
                    Parameter(
                        "step_share",
                        "Step share",
                        "decimal",
                        Decimal("0.05"),
                        "Conceded per round: this share of the ideal–floor range (a buyer: of "
                        "its budget).",
                        minimum=Decimal("0.01"),
                        maximum=Decimal("0.5"),
                        merchant_default=Decimal("0.25"),
                    ),
                    *FRAME_PARAMETERS,
                ),
            ),
            _time_dependent("boulware", "Boulware: holds out, concedes late", Boulware, "0.2"),
            _time_dependent("conceder", "Conceder: concedes early", Conceder, "5"),
            _time_dependent("linear", "Linear: the same step every round", Linear, "1"),
            NamedStrategy(
                "tit-for-tat",
                "Tit-for-tat: mirrors the buyer's concessions",
                TitForTat,
                TitForTat,
                (
                    Parameter(
                        "min_share",
                        "Least step",
                        "decimal",
                        Decimal("0.05"),
                        "Conceded at least, as a share of the ideal–floor range, when the other "
                        "side stands still.",
                        minimum=Decimal(0),
                        maximum=Decimal("0.5"),
                    ),
                    *FRAME_PARAMETERS,
                ),
            ),
        )
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


def strategy_named(
    name: str, role: Side, parameters: Mapping[str, object] = MappingProxyType({})
) -> Strategy:
    """A fresh strategy ``name`` (canonical or an alias) for ``role``, tuned by ``parameters``
    (:meth:`NamedStrategy.build`)."""
    try:
        named = STRATEGIES[canonical_name(name)]
    except KeyError:
        raise UnknownStrategy(
            f"unknown strategy {name!r}; one of {', '.join(STRATEGIES)}"
        ) from None
    return named.build(role, parameters)
