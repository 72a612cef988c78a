"""How a reference agent negotiates declared issues besides the price (profile terms/v0.1).

A party's view of the issues lives in its sealed vault as a :class:`TermsVault`: a weight per
issue (and for the price) and, per issue, its ideal value and the worst it will take. From
these, each issue's utility runs from 1 at the ideal to 0 at the limit, and an offer's utility
is the weighted sum with the price's.

Conceding: the price strategy decides the price; how far the party has conceded, the farther
of the price's way from ideal to reservation and the session's time (0 in round 1, 1 in the
last), sets how far to concede on each issue, as that fraction f to the power of the issue's
weight over the price's: an issue that matters less is given up early (f^0.25), one that
matters more late (f^2), and every issue reaches its limit by the last round. So two parties
that weight issues differently each give first what the other values more: the trade-offs a
rational agent makes. A value never passes the other side's standing
value (it would give away more than asked), never goes back towards the party's own ideal
(every move is a concession on every issue, so never a retraction), and never passes the limit.
An issue the vault does not name is one the party is indifferent to: it takes the other side's
value, or opens at the other side's best.

Accepting: the other side's standing offer is taken when every value lies within the party's
limits and its utility is at least that of the offer the party would make instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

from oanp.agents.strategies import Limits
from oanp.wire.canonical import JsonObject, JsonValue
from oanp.wire.commitments import Side
from oanp.wire.money import PRICE_CEILING, decimals_of, price_to_json
from oanp.wire.terms import (
    MAX_DECIMALS,
    MAX_OPTION_CHARS,
    ChoiceIssue,
    Issue,
    NumberIssue,
    Preference,
    Values,
    is_issue_name,
    read_issues,
    take_written,
)


@dataclass(frozen=True, slots=True)
class IssueLimits:
    """One issue as one party sees it: how much it matters, the best and the worst value.

    ``ideal`` and ``limit`` are numbers for a number issue and options for a choice."""

    name: str
    weight: Decimal
    ideal: Decimal | str
    limit: Decimal | str

    def __post_init__(self) -> None:
        if not isinstance(self.weight, Decimal) or not self.weight >= 0:
            raise ValueError(f"the weight of {self.name} must be a Decimal of at least 0")

    def as_json(self) -> JsonObject:
        def wire(value: Decimal | str) -> int | float | str:
            return value if isinstance(value, str) else price_to_json(value)

        return {"weight": str(self.weight), "ideal": wire(self.ideal), "limit": wire(self.limit)}


@dataclass(frozen=True, slots=True, repr=False)
class TermsVault:
    """A party's private weights and per-issue limits; ``price_weight`` weighs the price."""

    price_weight: Decimal
    issues: tuple[IssueLimits, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.price_weight, Decimal) or not self.price_weight > 0:
            raise ValueError("the price weight must be a positive Decimal")
        names = [i.name for i in self.issues]
        if len(set(names)) != len(names):
            raise ValueError("each issue is weighed once")

    def __repr__(self) -> str:
        return "TermsVault(<sealed>)"

    def constraints(self) -> JsonObject:
        """What the commitment covers besides the price limits (and a reveal discloses)."""
        return {
            "price_weight": str(self.price_weight),
            "issues": {i.name: i.as_json() for i in self.issues},
        }

    def of(self, name: str) -> IssueLimits | None:
        return next((i for i in self.issues if i.name == name), None)


# One issue's scale --------------------------------------------------------------------------


def _position(issue: Issue, value: Decimal | str) -> Decimal:
    """A value on the issue's own axis: the number itself, or a choice's option index."""
    if isinstance(issue, ChoiceIssue):
        if not isinstance(value, str) or value not in issue.options:
            # Never the value itself: it is a sealed ideal or limit, and messages reach logs.
            raise ValueError(f"the ideal or the limit of {issue.name} is not one of its options")
        return Decimal(issue.options.index(value))
    if isinstance(value, str):  # a number written as text, as a command line gives it
        try:
            value = Decimal(value)
        except ArithmeticError:
            raise ValueError(f"the ideal or the limit of {issue.name} is not a number") from None
    if not issue.low <= value <= issue.high:
        raise ValueError(f"the ideal or the limit of {issue.name} is outside its range")
    return value


def _best_for(role: Side, issue: Issue) -> Decimal:
    """Where the issue's axis is best for ``role``."""
    if isinstance(issue, ChoiceIssue):
        return Decimal(0) if role == "buyer" else Decimal(len(issue.options) - 1)
    buyer_best = issue.low if issue.buyer_prefers == "low" else issue.high
    buyer_worst = issue.high if issue.buyer_prefers == "low" else issue.low
    return buyer_best if role == "buyer" else buyer_worst


@dataclass(frozen=True, slots=True)
class _Scale:
    """One issue for one party: its ideal and limit on the issue's axis, and its weight."""

    issue: Issue
    weight: Decimal
    ideal: Decimal
    limit: Decimal

    @property
    def indifferent(self) -> bool:
        return self.weight == 0 or self.ideal == self.limit

    def utility(self, position: Decimal) -> Decimal:
        if self.indifferent:
            return Decimal(0)
        share = (position - self.ideal) / (self.limit - self.ideal)
        return 1 - min(max(share, Decimal(0)), Decimal(1))

    def score(self, position: Decimal) -> Decimal:
        """The utility weighed: this issue's part of an offer's before the weights' total."""
        return self.weight * self.utility(position)

    def within(self, position: Decimal) -> bool:
        """Whether a value is no worse than the limit (indifference takes anything)."""
        return self.indifferent or self.utility(position) > 0 or position == self.limit

    def at(self, fraction: Decimal) -> Decimal:
        """The value ``fraction`` of the way from ideal to limit, rounded towards the ideal
        on the issue's grid (so concessions stay monotone and within the limit)."""
        raw = self.ideal + fraction * (self.limit - self.ideal)
        towards_ideal = ROUND_FLOOR if self.limit > self.ideal else ROUND_CEILING
        step = 0 if isinstance(self.issue, ChoiceIssue) else self.issue.decimals
        return raw.quantize(Decimal(1).scaleb(-step), rounding=towards_ideal)

    def closer(self, a: Decimal, b: Decimal) -> bool:
        """Whether ``a`` lies nearer this party's ideal than ``b`` (better for it)."""
        return (a < b) == (self.ideal < self.limit) and a != b


def _scales(role: Side, issues: Sequence[Issue], vault: TermsVault | None) -> list[_Scale]:
    scales = []
    for issue in issues:
        limits = vault.of(issue.name) if vault is not None else None
        if limits is None:
            other: Side = "merchant" if role == "buyer" else "buyer"
            best_of_other = _best_for(other, issue)
            scales.append(_Scale(issue, Decimal(0), best_of_other, best_of_other))
        else:
            ideal, limit = _position(issue, limits.ideal), _position(issue, limits.limit)
            best = _best_for(role, issue)
            if abs(ideal - best) > abs(limit - best):
                # Conceding from such an ideal would take back what the other side values.
                raise ValueError(
                    f"the {role}'s ideal {issue.name} is worse for it than its limit, "
                    "by the direction the session declares"
                )
            scales.append(_Scale(issue, limits.weight, ideal, limit))
    return scales


# The party's plan ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TermsPlan:
    """The declared issues as one party weighs them, with its price limits."""

    role: Side
    issues: tuple[Issue, ...]
    price: Limits
    vault: TermsVault | None
    #: Each issue's scale, built once: every utility, check and offer reads them, and a search
    #: over offers (the frontier) does so per candidate value.
    _scale_list: tuple[_Scale, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # A vault that contradicts the declared issues fails here, at once.
        object.__setattr__(self, "_scale_list", tuple(_scales(self.role, self.issues, self.vault)))

    def _scales(self) -> tuple[_Scale, ...]:
        return self._scale_list

    @property
    def _price_weight(self) -> Decimal:
        return self.vault.price_weight if self.vault is not None else Decimal(1)

    def price_conceded(self, price: Decimal) -> Decimal:
        """How far ``price`` lies from the ideal towards the reservation, 0 to 1."""
        span = self.price.reservation - self.price.ideal
        if span == 0:
            return Decimal(1)
        return min(max((price - self.price.ideal) / span, Decimal(0)), Decimal(1))

    def utility(self, price: Decimal, values: Values) -> Decimal:
        """The weighted utility of an offer, 0 to 1: the price's and each issue's scores over
        the weights' total."""
        scales = self._scales()
        total = self._price_weight + sum((s.weight for s in scales), Decimal(0))
        score = self.price_score(price)
        score += sum((s.score(Decimal(v)) for s, v in zip(scales, values, strict=True)), Decimal(0))
        return score / total

    def price_score(self, price: Decimal) -> Decimal:
        """The price's part of :meth:`utility`, before the division by the weights' total: the
        parts add up, so a search over offers may weigh each issue on its own."""
        return self._price_weight * (1 - self.price_conceded(price))

    def issue_score(self, index: int, value: Decimal | int) -> Decimal:
        """The part of :meth:`utility` of the value of the issue at ``index``, as
        :meth:`price_score` is the price's."""
        return self._scales()[index].score(Decimal(value))

    def accepts(self, index: int, value: Decimal | int) -> bool:
        """Whether the value of the issue at ``index`` is no worse than the party's limit."""
        return self._scales()[index].within(Decimal(value))

    def within(self, values: Values) -> bool:
        return all(s.within(Decimal(v)) for s, v in zip(self._scales(), values, strict=True))

    def offer(
        self,
        price: Decimal,
        previous: Values | None,
        theirs: Values | None,
        progress: Decimal = Decimal(0),
    ) -> Values:
        """The terms to offer beside ``price`` at time ``progress``: conceded as far as the
        price or the time has gone, earlier on issues that matter less, never past the other
        side's value or back from ``previous``."""
        conceded = max(self.price_conceded(price), progress)
        values: list[Decimal | int] = []
        for i, scale in enumerate(self._scales()):
            if scale.indifferent:
                target = scale.ideal if theirs is None else Decimal(theirs[i])
            else:
                share = conceded ** (scale.weight / self._price_weight)
                target = scale.at(share)
                if theirs is not None and scale.closer(Decimal(theirs[i]), target):
                    target = Decimal(theirs[i])  # asked for less than this: take it, no more
            if previous is not None and scale.closer(target, Decimal(previous[i])):
                target = Decimal(previous[i])  # never back towards the ideal
            values.append(int(target) if isinstance(scale.issue, ChoiceIssue) else target)
        return tuple(values)


def terms_of(issues: Sequence[Issue], terms: Mapping[str, object]) -> Values:
    """An offer's terms from the stream as values (the arbiter already checked them)."""
    values: list[Decimal | int] = []
    for issue in issues:
        raw = terms[issue.name]
        if isinstance(issue, ChoiceIssue):
            assert isinstance(raw, str)
            values.append(issue.options.index(raw))
        else:
            assert isinstance(raw, int | float | Decimal) and not isinstance(raw, bool)
            values.append(Decimal(repr(raw)) if isinstance(raw, float) else Decimal(raw))
    return tuple(values)


def issues_for(role: Side, vault: TermsVault) -> tuple[Issue, ...]:
    """The narrowest issues a session could declare to negotiate ``vault``'s, in its order.

    Why: a vault names no domains (an ideal and a limit are all a party knows of an issue;
    whoever opens a session declares the issues), yet something that plays a party on its own,
    as the dashboard's preview plays a merchant agent against made-up buyers, must declare
    issues its vault fits. Per issue: when the ideal and the limit are numbers, a number issue
    from one to the other with as many decimals as they have, the buyer preferring the end
    that is the buyer's ideal (so the other end, for a merchant's vault); when they are
    options, a choice of the two, ordered (as a choice always is) so that ``role``'s ideal is
    its best end. ``ValueError``, never quoting the values (they are private), when an issue
    cannot be declared so: an ideal equal to its limit, a number beside an option."""
    declared: list[JsonValue] = []
    for limits in vault.issues:
        ideal, limit = (_written(limits.name, v) for v in (limits.ideal, limits.limit))
        if ideal == limit:
            raise ValueError(f"the ideal and the limit of {limits.name} are the same")
        if isinstance(ideal, Decimal) and isinstance(limit, Decimal):
            ideal_end: Preference = "high" if ideal > limit else "low"
            other_end: Preference = "low" if ideal_end == "high" else "high"
            issue: Issue = NumberIssue(
                limits.name,
                ideal_end if role == "buyer" else other_end,
                min(ideal, limit),
                max(ideal, limit),
                max(decimals_of(ideal), decimals_of(limit)),
            )
        elif isinstance(ideal, str) and isinstance(limit, str):
            # Options run from the buyer's best to the merchant's best.
            issue = ChoiceIssue(limits.name, (ideal, limit) if role == "buyer" else (limit, ideal))
        else:
            raise ValueError(f"the ideal and the limit of {limits.name} are a number and an option")
        declared.append(issue.as_json())
    # Read back as a session.open's would be: what cannot be declared fails here, not there.
    return read_issues(declared)


def _written(name: str, value: Decimal | str) -> Decimal | str:
    """An ideal or a limit as the declared issue reads it: text that is a number is a number
    (as ``oanp --want`` and the dashboard write every value), other text an option."""
    if isinstance(value, Decimal):
        return value
    number = _written_number(name, value)
    return value if number is None else number


def read_terms_vault(value: object) -> TermsVault:
    """A :class:`TermsVault` from the JSON its :meth:`~TermsVault.constraints` writes
    (``{"price_weight": w, "issues": {name: {"weight", "ideal", "limit"}}}``); numbers may be
    JSON numbers or numeric strings, options are strings. ``ValueError`` says what is wrong."""
    if not isinstance(value, dict):
        raise ValueError("terms must be an object with price_weight and issues")
    issues = value.get("issues", {})
    if not isinstance(issues, dict):
        raise ValueError("terms.issues must be an object of issue names")
    limits = []
    for name, spec in issues.items():
        if not isinstance(spec, dict) or set(spec) != {"weight", "ideal", "limit"}:
            raise ValueError(f"terms.issues.{name} must hold weight, ideal and limit")
        limits.append(
            IssueLimits(
                str(name),
                _decimal(spec["weight"], f"terms.issues.{name}.weight"),
                _term(spec["ideal"]),
                _term(spec["limit"]),
            )
        )
    weight = _decimal(value.get("price_weight", 1), "terms.price_weight")
    return TermsVault(weight, tuple(limits))


def _decimal(value: object, where: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise ValueError(f"{where} must be a number")
    try:
        number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    except ArithmeticError:
        raise ValueError(f"{where} must be a number") from None
    if not number.is_finite():
        raise ValueError(f"{where} must be a finite number")
    return number


def _term(value: object) -> Decimal | str:
    """An ideal or a limit: a number for a number issue, an option (a string) for a choice."""
    if isinstance(value, str):
        return value
    return _decimal(value, "an ideal or a limit")


#: The largest weight :func:`read_want` takes: weights only count relative to each other.
MAX_WEIGHT = Decimal(100)
#: How :func:`read_want` reads one issue's limits, as ``oanp --want`` and the dashboard write them.
WANT_SYNTAX = "NAME=IDEAL..LIMIT[@WEIGHT]"


def read_weight(text: str, what: str = "the weight") -> Decimal:
    """A weight written as text: a number from 0 to :data:`MAX_WEIGHT`."""
    try:
        weight = Decimal(text.strip())
    except ArithmeticError:
        weight = Decimal("NaN")
    if not weight.is_finite() or not 0 <= weight <= MAX_WEIGHT:
        raise ValueError(f"{what} must be a number from 0 to {MAX_WEIGHT}")
    return weight


def read_want(text: str) -> IssueLimits:
    """One issue's limits written ``NAME=IDEAL..LIMIT[@WEIGHT]`` (weight 1 when left out): two
    numbers for a number issue, two options for a choice, an option holding ``..`` or ``@``
    written as a JSON string (``support="24/7 @ phone"..none``). Values stay as written, so
    that a choice whose options look like numbers still reads. ``ValueError`` says what is wrong
    without quoting the ideal or the limit, which are private."""
    name, equals, spec = text.strip().partition("=")
    ideal, rest = take_written(spec, "..")
    limit, rest = take_written(rest[2:], "@") if rest.startswith("..") else ("", rest)
    weight = rest[1:] if rest.startswith("@") else None
    if not (equals and ideal and limit) or (rest and weight is None) or weight == "":
        raise ValueError(f"expected {WANT_SYNTAX}")
    name = name.strip()
    if not is_issue_name(name):
        raise ValueError("an issue's name is 1-32 of a-z and _, and not price")
    numbers = [_written_number(name, value) for value in (ideal, limit)]
    if (numbers[0] is None) != (numbers[1] is None):
        raise ValueError(
            f"{name}: the ideal and the limit are both numbers (a number issue) "
            "or both options (a choice)"
        )
    if numbers[0] is None and max(len(ideal), len(limit)) > MAX_OPTION_CHARS:
        raise ValueError(f"{name}: an option is at most {MAX_OPTION_CHARS} characters")
    if ideal == limit or (numbers[0] is not None and numbers[0] == numbers[1]):
        raise ValueError(f"{name}: the ideal and the limit must differ")
    return IssueLimits(name, read_weight(weight or "1", f"{name}: the weight"), ideal, limit)


def _written_number(name: str, text: str) -> Decimal | None:
    """``text`` as a term's number, ``None`` when it is an option instead; a number no issue
    can hold is refused."""
    try:
        number = Decimal(text)
    except ArithmeticError:
        return None
    if not number.is_finite():
        return None  # "NaN", "Infinity": words, so options
    if abs(number) >= PRICE_CEILING or decimals_of(number) > MAX_DECIMALS:
        raise ValueError(
            f"{name}: a number is below 10^12 in magnitude, with at most {MAX_DECIMALS} decimals"
        )
    return number
