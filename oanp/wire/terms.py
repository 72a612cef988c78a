"""Multi-issue terms (docs/protocol.md §11, profile ``terms/v0.1``): issues, values, and the
rules both the machine and the auditor judge them by.

A session of this profile declares up to eight issues besides the price at open; every offer
then carries a value for each. Values are held positionally, in the declared order: a number
issue's value as its exact :class:`~decimal.Decimal`, a choice issue's as the index of the
option (options run from the buyer's best to the merchant's best, so a higher index is always
better for the merchant). That makes "which side does this change favour" one comparison for
every kind of issue, including the price.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal, TypeAlias

from oanp.wire.canonical import ExponentDecimal, JsonObject, JsonValue
from oanp.wire.errors import BadTerms, FieldError
from oanp.wire.money import PRICE_CEILING, decimals_of, price_to_json

#: The most issues a session.open may declare besides the price.
MAX_ISSUES = 8
MAX_DECIMALS = 4
MAX_OPTIONS = 16
MAX_OPTION_CHARS = 64
#: What an issue's name is (besides never "price"), whole.
ISSUE_NAME_PATTERN = "[a-z_]{1,32}"
_NAME = re.compile(ISSUE_NAME_PATTERN)

Preference = Literal["low", "high"]


@dataclass(frozen=True, slots=True)
class NumberIssue:
    """A number within ``low``–``high`` with at most ``decimals`` decimals."""

    name: str
    buyer_prefers: Preference
    low: Decimal
    high: Decimal
    decimals: int

    def as_json(self) -> JsonObject:
        return {
            "name": self.name,
            "kind": "number",
            "buyer_prefers": self.buyer_prefers,
            "min": price_to_json(self.low),
            "max": price_to_json(self.high),
            "decimals": self.decimals,
        }


@dataclass(frozen=True, slots=True)
class ChoiceIssue:
    """One of ``options``, ordered from the buyer's best to the merchant's best."""

    name: str
    options: tuple[str, ...]

    def as_json(self) -> JsonObject:
        return {"name": self.name, "kind": "choice", "options": list(self.options)}


Issue: TypeAlias = NumberIssue | ChoiceIssue
#: One value per declared issue, in their order: a number, or a choice's option index.
Values: TypeAlias = tuple[Decimal | int, ...]


class IssuesInvalid(ValueError):
    """A declaration of issues that is not well formed; the message names what and where."""


# Declarations --------------------------------------------------------------------------------


def read_issues(value: object) -> tuple[Issue, ...]:
    """The ``issues`` of a ``session.open``; :class:`IssuesInvalid` says what is wrong."""
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_ISSUES:
        raise IssuesInvalid(f"must be a list of 1 to {MAX_ISSUES} issues")
    issues = tuple(_issue(i, raw) for i, raw in enumerate(value))
    names = [issue.name for issue in issues]
    if len(set(names)) != len(names):
        raise IssuesInvalid("must name each issue once")
    return issues


def is_issue_name(name: object) -> bool:
    """Whether ``name`` may name an issue: 1-32 of a-z and _, and not the price."""
    return isinstance(name, str) and bool(_NAME.fullmatch(name)) and name != "price"


_STRING = json.JSONDecoder()


def take_written(text: str, stop: str) -> tuple[str, str]:
    """The value written at the start of ``text``, and the rest from ``stop`` on (empty when
    there is no ``stop``). A value is the text up to ``stop``, trimmed, or a JSON string
    (``"24/7, phone"``) for an option that holds the separators a one-line syntax uses
    (``,``, ``..``, ``@``). ``ValueError`` on a quote that does not close."""
    text = text.lstrip()
    if text.startswith('"'):
        try:
            value, end = _STRING.raw_decode(text)
        except ValueError:
            raise ValueError("a quoted value must be a JSON string") from None
        return value, text[end:].lstrip()
    value, found, rest = text.partition(stop)
    return value.strip(), found + rest


def _issue(index: int, raw: object) -> Issue:
    where = f"[{index}]"
    if not isinstance(raw, dict):
        raise IssuesInvalid(f"{where} must be an object")
    name = raw.get("name")
    if not isinstance(name, str) or not is_issue_name(name):
        raise IssuesInvalid(f"{where}.name must be 1-32 of a-z and _, and not price")
    kind = raw.get("kind")
    if kind == "number":
        _closed(where, raw, {"name", "kind", "buyer_prefers", "min", "max", "decimals"})
        prefers = raw.get("buyer_prefers")
        if prefers not in ("low", "high"):
            raise IssuesInvalid(f'{where}.buyer_prefers must be "low" or "high"')
        decimals = raw.get("decimals")
        if isinstance(decimals, bool) or not isinstance(decimals, int):
            raise IssuesInvalid(f"{where}.decimals must be an integer from 0 to {MAX_DECIMALS}")
        if not 0 <= decimals <= MAX_DECIMALS:
            raise IssuesInvalid(f"{where}.decimals must be an integer from 0 to {MAX_DECIMALS}")
        low, high = _bound(where, "min", raw.get("min")), _bound(where, "max", raw.get("max"))
        if low >= high:
            raise IssuesInvalid(f"{where}.min must be less than its max")
        if decimals_of(low) > decimals or decimals_of(high) > decimals:
            raise IssuesInvalid(f"{where}.min and max must have at most {decimals} decimals")
        return NumberIssue(name, "low" if prefers == "low" else "high", low, high, decimals)
    if kind == "choice":
        _closed(where, raw, {"name", "kind", "options"})
        options = raw.get("options")
        if (
            not isinstance(options, list)
            or not 2 <= len(options) <= MAX_OPTIONS
            or not all(isinstance(o, str) and 1 <= len(o) <= MAX_OPTION_CHARS for o in options)
            or len(set(options)) != len(options)
        ):
            raise IssuesInvalid(
                f"{where}.options must be 2 to {MAX_OPTIONS} distinct strings of 1 to "
                f"{MAX_OPTION_CHARS} characters"
            )
        return ChoiceIssue(name, tuple(options))
    raise IssuesInvalid(f'{where}.kind must be "number" or "choice"')


def _closed(where: str, raw: Mapping[str, object], known: set[str]) -> None:
    extra = sorted(set(raw) - known)
    if extra:
        raise IssuesInvalid(f"{where}.{extra[0]} is not a known field")
    missing = sorted(known - set(raw))
    if missing:
        raise IssuesInvalid(f"{where}.{missing[0]} is required")


def _number(value: object) -> Decimal | None:
    """A JSON number as the exact decimal it was written as, or ``None`` if it is not one a
    term can hold (a float in a stored log is read back by its shortest repr)."""
    if isinstance(value, bool | ExponentDecimal) or not isinstance(value, int | float | Decimal):
        return None
    number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    if not number.is_finite() or abs(number) >= PRICE_CEILING:
        return None
    if Decimal(repr(float(number))) != number:
        return None  # the log stores a double: a value it cannot hold exactly would drift
    return number


def _bound(where: str, name: str, value: object) -> Decimal:
    number = _number(value)
    if number is None:
        raise IssuesInvalid(f"{where}.{name} must be a number below 10^12 in magnitude")
    return number


# Values --------------------------------------------------------------------------------------


def read_terms(issues: Sequence[Issue], terms: object) -> Values:
    """An offer's ``terms`` against the session's issues; :class:`~oanp.wire.errors.BadTerms`
    (422) names every missing, undeclared or out-of-domain value at once."""
    path = "$.payload.terms"
    if not isinstance(terms, dict):
        raise BadTerms(
            "the offer must carry terms for every declared issue",
            errors=[FieldError(path, "must be an object with a value for every issue")],
        )
    errors = [
        FieldError(f"{path}.{name}", "is not a declared issue")
        for name in sorted(set(terms) - {i.name for i in issues})
    ]
    values: list[Decimal | int] = []
    for issue in issues:
        where = f"{path}.{issue.name}"
        if issue.name not in terms:
            errors.append(FieldError(where, "is required: every declared issue has a value"))
            continue
        value, problem = _value(issue, terms[issue.name])
        if problem:
            errors.append(FieldError(where, problem))
        else:
            values.append(value)
    if errors:
        raise BadTerms("the offer's terms are outside the declared issues", errors=errors)
    return tuple(values)


def _value(issue: Issue, raw: object) -> tuple[Decimal | int, str]:
    if isinstance(issue, ChoiceIssue):
        if isinstance(raw, str) and raw in issue.options:
            return issue.options.index(raw), ""
        return 0, "must be one of " + ", ".join(issue.options)
    number = _number(raw)
    if number is None or not issue.low <= number <= issue.high:
        return 0, f"must be a number from {issue.low} to {issue.high}"
    if decimals_of(number) > issue.decimals:
        return 0, f"must have at most {issue.decimals} decimals"
    return number, ""


def terms_json(issues: Sequence[Issue], values: Values) -> JsonObject:
    """Values as an offer or an agreement carries them: ``{name: number or option}``."""
    out: JsonObject = {}
    for issue, value in zip(issues, values, strict=True):
        if isinstance(issue, ChoiceIssue):
            assert isinstance(value, int)
            out[issue.name] = issue.options[value]
        else:
            assert isinstance(value, Decimal)
            out[issue.name] = price_to_json(value)
    return out


def issues_json(issues: Sequence[Issue]) -> list[JsonValue]:
    return [issue.as_json() for issue in issues]


# Rules -----------------------------------------------------------------------------------


def merchant_gain(issue: Issue | None, old: Decimal | int, new: Decimal | int) -> int:
    """+1 when moving from ``old`` to ``new`` is better for the merchant, -1 worse, 0 equal.
    ``issue`` is ``None`` for the price, which the merchant wants high."""
    if new == old:
        return 0
    higher = new > old
    if isinstance(issue, NumberIssue) and issue.buyer_prefers == "high":
        higher = not higher
    return 1 if higher else -1


def gains_for_other(
    merchant_moved: bool,
    issues: Sequence[Issue],
    old: tuple[Decimal, Values],
    new: tuple[Decimal, Values],
) -> tuple[int, ...]:
    """Per issue, the price first: +1 where a party's new offer is better for the other side
    than its own previous offer (it moved towards the other side), -1 worse, 0 unchanged."""
    gains = [merchant_gain(None, old[0], new[0])]
    gains += [merchant_gain(i, a, b) for i, a, b in zip(issues, old[1], new[1], strict=True)]
    # The buyer gains what the merchant loses, and the other way round.
    return tuple(-g for g in gains) if merchant_moved else tuple(gains)


def is_pure_retraction(
    merchant_moved: bool,
    issues: Sequence[Issue],
    old: tuple[Decimal, Values],
    new: tuple[Decimal, Values],
) -> bool:
    """I4 as §11 words it: a party's new offer may not be, for the other side, no better on
    every issue (price included) and worse on one, than its own previous offer. Trade-offs
    (better on one issue, worse on another) pass. With no issues it is exactly v0.1's I4: the
    buyer may not lower its price, the merchant may not raise it."""
    if not issues:
        # The price alone, as every price-only session asks on every offer: one comparison.
        return new[0] > old[0] if merchant_moved else new[0] < old[0]
    for_other = gains_for_other(merchant_moved, issues, old, new)
    return all(g <= 0 for g in for_other) and any(g < 0 for g in for_other)


def issues_open(issues: Sequence[Issue], buyer: Values | None, merchant: Values | None) -> int:
    """How many declared issues (the price not counted) the two standing offers differ on;
    before both sides have offered, none is settled."""
    if buyer is None or merchant is None:
        return len(issues)
    return sum(1 for a, b in zip(buyer, merchant, strict=True) if a != b)
