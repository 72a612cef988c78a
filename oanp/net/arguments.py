"""What the ``oanp`` commands read from their flags and files: items, issues and wants, and a
party's private limits (a buyer's vault, a merchant's price list). Each refusal is a
:class:`UsageError` whose message says what is wrong, never the limit itself.
"""

from __future__ import annotations

import argparse
import json
import re
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from oanp.agents.pricelist import PriceLimits, PriceList, read_price_list
from oanp.agents.tradeoffs import IssueLimits, TermsVault, read_terms_vault, read_want
from oanp.agents.vaults import BuyerVault, MerchantVault
from oanp.wire.money import MINOR_UNITS
from oanp.wire.terms import IssuesInvalid, read_issues, take_written


class UsageError(Exception):
    """A flag or file the command cannot use; the message says why."""


def parse_item(values: list[str]) -> dict[str, Any]:
    """``--item`` as one JSON object, or as ``key=value`` pairs (repeatable)."""
    if len(values) == 1 and values[0].lstrip().startswith("{"):
        try:
            item = json.loads(values[0])
        except ValueError as exc:
            raise UsageError(f"--item is not a JSON object: {exc}") from exc
        if not isinstance(item, dict):
            raise UsageError("--item must be a JSON object")
        return item
    item = {}
    for value in values:
        key, equals, text = value.partition("=")
        if not equals or not key:
            raise UsageError(f"--item {value!r}: expected key=value or a JSON object")
        item[key] = text
    return item


def parse_amount(value: object, name: str) -> Decimal:
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        raise UsageError(f"{name} is not a number") from None
    if not amount.is_finite() or amount <= 0:
        raise UsageError(f"{name} must be a positive number")
    return amount


def limits_file(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        limits = json.loads(path.read_text(encoding="utf-8"), parse_float=Decimal)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--limits {path}: {exc}") from exc
    except InvalidOperation:  # 1e1000000000000000000: an exponent no Decimal holds
        raise UsageError(f"--limits {path}: a number's exponent is out of range") from None
    if not isinstance(limits, dict):
        raise UsageError(f"--limits {path}: expected a JSON object")
    return limits


_NUMBER_ISSUE = re.compile(r"number:(low|high):([^.:]+(?:\.\d+)?)\.\.([^:]+?)(?::(\d))?")


def parse_issue(text: str) -> dict[str, Any]:
    """``--issue NAME=number:low|high:MIN..MAX[:DECIMALS]``, or ``NAME=choice:A,B,C`` with
    the options from the buyer's best to the merchant's best (docs/protocol.md §16), an option
    holding a comma written as a JSON string."""
    name, equals, spec = text.partition("=")
    number = _NUMBER_ISSUE.fullmatch(spec)
    if equals and number:
        prefers, low, high, decimals = number.groups()
        issue: dict[str, Any] = {
            "name": name,
            "kind": "number",
            "buyer_prefers": prefers,
            "min": _issue_number(low, text),
            "max": _issue_number(high, text),
            "decimals": int(decimals or 0),
        }
    elif equals and spec.startswith("choice:"):
        try:
            options = _options(spec.removeprefix("choice:"))
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None
        issue = {"name": name, "kind": "choice", "options": options}
    else:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected NAME=number:low|high:MIN..MAX[:DECIMALS] or NAME=choice:A,B,C"
        )
    try:
        read_issues([issue])
    except IssuesInvalid as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None
    return issue


def _options(text: str) -> list[str]:
    """``A,B,C``; an option holding a comma written as a JSON string: ``"24/7, phone",none``."""
    # Each option is read after a comma: the first after one put in front of the text.
    options, rest = [], "," + text
    while rest:
        if not rest.startswith(","):
            raise ValueError("options are separated by commas")
        option, rest = take_written(rest[1:], ",")
        options.append(option)
    return options


def _issue_number(text: str, flag: str) -> int | float:
    try:
        number = Decimal(text)
    except InvalidOperation:
        raise argparse.ArgumentTypeError(f"{flag!r}: {text!r} is not a number") from None
    return int(number) if number == number.to_integral_value() else float(number)


def parse_want(text: str) -> IssueLimits:
    """``--want NAME=IDEAL..LIMIT[@WEIGHT]``: this party's best and worst value of an issue,
    and how much it matters beside the price (whose weight is ``--price-weight``)."""
    try:
        return read_want(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None


def _terms_vault(args: argparse.Namespace, limits: dict[str, Any]) -> TermsVault | None:
    """Weights and per-issue limits from ``--want`` and ``--price-weight``, or ``terms`` in
    ``--limits``; none when neither is given (the party then takes the other side's terms)."""
    try:
        if args.want:
            return TermsVault(parse_amount(args.price_weight, "--price-weight"), tuple(args.want))
        if "terms" in limits:
            return read_terms_vault(limits["terms"])
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return None


def buyer_vault(args: argparse.Namespace) -> BuyerVault:
    """The buyer's vault from ``--ceiling``/``--budget``/``--urgency`` or ``--limits``."""
    limits = limits_file(args.limits)
    ceiling = args.ceiling if args.ceiling is not None else limits.get("true_ceiling")
    if ceiling is None:
        raise UsageError("the buyer needs --ceiling, or true_ceiling in --limits")
    budget = args.budget if args.budget is not None else limits.get("budget_cap", ceiling)
    urgency = args.urgency or limits.get("urgency", "medium")
    try:
        return BuyerVault(
            true_ceiling=parse_amount(ceiling, "the ceiling"),
            budget_cap=parse_amount(budget, "the budget"),
            urgency=str(urgency),
            terms=_terms_vault(args, limits),
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def currency_code(text: str) -> str:
    """An ISO 4217 code, as ``--currency`` takes it (any case)."""
    code = text.strip().upper()
    if code not in MINOR_UNITS:
        raise argparse.ArgumentTypeError(f"{text[:12]!r} is not an ISO 4217 currency code")
    return code


def merchant_prices(args: argparse.Namespace) -> PriceList:
    """The merchant's price list: the ``limits`` rows of ``--limits`` (docs/agents.md), or one
    floor and ideal (``--floor``/``--ideal``, or the file's) for any item in ``--currency``.
    A session in another currency, or for an item the list does not price, is declined."""
    limits = limits_file(args.limits)
    if "limits" not in limits:
        vault = merchant_vault(args)
        try:
            row = PriceLimits(None, args.currency, vault.floor_price, vault.ideal_price)
        except ValueError as exc:
            raise UsageError(f"{exc} ({args.currency})") from None
        return PriceList((row,), terms=vault.terms)
    if args.floor is not None or args.ideal is not None:
        raise UsageError("--limits holds a price list: its rows name every floor and ideal")
    try:
        prices = read_price_list(limits)
    except ValueError as exc:
        raise UsageError(f"--limits {args.limits}: {exc}") from None
    return PriceList(prices.limits, prices.items_only, _terms_vault(args, limits))


def merchant_vault(args: argparse.Namespace) -> MerchantVault:
    """The merchant's vault from ``--floor``/``--ideal`` or ``--limits``."""
    limits = limits_file(args.limits)
    floor = args.floor if args.floor is not None else limits.get("floor_price")
    ideal = args.ideal if args.ideal is not None else limits.get("ideal_price")
    if floor is None or ideal is None:
        raise UsageError("the merchant needs --floor and --ideal, or both in --limits")
    try:
        return MerchantVault(
            floor_price=parse_amount(floor, "the floor"),
            ideal_price=parse_amount(ideal, "the ideal price"),
            terms=_terms_vault(args, limits),
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
