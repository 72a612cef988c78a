"""A merchant's price list: its private limits per currency, and per item within a currency.

A floor of 280 means nothing without its currency: 280 USD and 280 JPY differ a hundredfold.
So a merchant's limits are kept as rows of (item or any item, currency, floor, ideal), each
amount to its currency's minor unit, and a session is negotiated only on the row that names
its currency: the item's own row first, else the currency's "any item" row. A session in a
currency with no row, or for an item without one when the merchant negotiates only the items
it priced, is not negotiated at all (:class:`Unpriced`); the agent declines it.

The document written by :meth:`PriceList.document` is what a vault seals and what a limits
file holds::

    {"limits": [{"item": null, "currency": "USD", "floor_price": "280", "ideal_price": "400"},
                {"item": "SFO-JFK", "currency": "EUR", "floor_price": "260", ...}],
     "items_only": false, "terms": {...}}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Final, Literal

from oanp.agents.tradeoffs import TermsVault, read_terms_vault
from oanp.wire.canonical import JsonObject
from oanp.wire.money import MINOR_UNITS, PRICE_CEILING, decimals_of

#: The most rows a price list holds: every item of a catalog in a few currencies.
MAX_PRICE_ROWS: Final = 200
#: The longest item key a row may name.
MAX_ITEM_KEY_CHARS: Final = 200
#: How much of an item key a refusal quotes.
_KEY_SHOWN: Final = 40
_PLAIN_AMOUNT: Final = re.compile(r"[0-9]+(?:\.[0-9]+)?")
#: The item members that name an item, in the order they are looked for.
ITEM_KEY_MEMBERS: Final = ("sku", "id", "route")


def item_key(item: Mapping[str, Any]) -> str:
    """The key an item is priced under: its ``sku``, else its ``id``, else its ``route``
    (``""`` when it has none of them, which only an "any item" row prices)."""
    for member in ITEM_KEY_MEMBERS:
        value = item.get(member)
        if value not in (None, ""):
            return str(value)
    return ""


def read_amount(value: object, what: str, currency: str) -> Decimal:
    """A positive amount below the protocol's ceiling with no more decimals than
    ``currency`` allows, from a JSON number or a numeric string; ``ValueError`` says what is
    wrong without quoting the value (it may be a private limit)."""
    if currency not in MINOR_UNITS:
        raise ValueError(f"{currency[:12]!r} is not an ISO 4217 currency code")
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise ValueError(f"{what} must be a number")
    # Written as people write prices: no exponent, no digit separators. A minus sign is a
    # number all the same, and is told what a price may be rather than that it is no number.
    if isinstance(value, str) and not _PLAIN_AMOUNT.fullmatch(value.strip().removeprefix("-")):
        raise ValueError(f"{what} must be a number, as 280 or 279.99")
    try:
        amount = Decimal(str(value).strip())
    except InvalidOperation:
        raise ValueError(f"{what} must be a number") from None
    if not amount.is_finite() or not 0 < amount < PRICE_CEILING:
        raise ValueError(f"{what} must be more than 0 and less than 10^12")
    allowed = MINOR_UNITS[currency]
    if decimals_of(amount) > allowed:
        unit = "no decimals" if allowed == 0 else f"at most {allowed} decimals"
        raise ValueError(f"{what} has too many decimals: {currency} takes {unit}")
    return amount


@dataclass(frozen=True, slots=True, repr=False)
class PriceLimits:
    """One row: the floor (never goes below) and ideal (opens there) of ``item`` (``None``:
    any item) in ``currency``. Made only with amounts that fit the currency."""

    item: str | None
    currency: str
    floor_price: Decimal
    ideal_price: Decimal

    def __post_init__(self) -> None:
        if self.currency not in MINOR_UNITS:
            raise ValueError(f"{self.currency[:12]!r} is not an ISO 4217 currency code")
        if self.item is not None and not 0 < len(self.item) <= MAX_ITEM_KEY_CHARS:
            raise ValueError(f"an item key is 1 to {MAX_ITEM_KEY_CHARS} characters")
        read_amount(self.floor_price, "the floor", self.currency)
        read_amount(self.ideal_price, "the ideal price", self.currency)
        if self.floor_price > self.ideal_price:
            raise ValueError("the floor cannot be above the ideal price")

    def __repr__(self) -> str:
        return f"PriceLimits(item={self.item!r}, currency={self.currency!r}, <sealed>)"

    @property
    def key(self) -> tuple[str | None, str]:
        return self.item, self.currency

    def document(self) -> JsonObject:
        return {
            "item": self.item,
            "currency": self.currency,
            "floor_price": str(self.floor_price),
            "ideal_price": str(self.ideal_price),
        }


class Unpriced(ValueError):
    """The price list holds no limits for a session: no row in its currency, or none for its
    item when the merchant negotiates only the items it priced. The message names the
    currency or the item, never a limit."""

    def __init__(self, reason: Literal["currency", "item"], message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True, repr=False)
class PriceList:
    """A merchant's limits, one row per (item or any item, currency); with ``items_only``,
    an item without a row of its own in the session's currency is not negotiated. ``terms``
    (weights and per-issue limits) are the same for every row."""

    limits: tuple[PriceLimits, ...]
    items_only: bool = False
    terms: TermsVault | None = None

    def __post_init__(self) -> None:
        if len(self.limits) > MAX_PRICE_ROWS:
            raise ValueError(f"a price list holds at most {MAX_PRICE_ROWS} rows")
        keys = [row.key for row in self.limits]
        for n, key in enumerate(keys):
            if key in keys[:n]:
                raise ValueError(f"{_row_name(key)} has a row already")

    def __repr__(self) -> str:
        return f"PriceList({len(self.limits)} rows, <sealed>)"

    @property
    def currencies(self) -> tuple[str, ...]:
        """The currencies it holds limits in, in the order first written."""
        return tuple(dict.fromkeys(row.currency for row in self.limits))

    def row(self, item: str | None, currency: str) -> PriceLimits | None:
        return next((row for row in self.limits if row.key == (item, currency)), None)

    def limits_for(self, currency: str, item: Mapping[str, Any]) -> PriceLimits:
        """The row a session in ``currency`` for ``item`` is negotiated on: the item's own,
        else (unless ``items_only``) the currency's "any item" row; :class:`Unpriced` when
        there is none."""
        if currency not in self.currencies:
            raise Unpriced("currency", f"it holds no limits in {currency}")
        key = item_key(item)
        own = self.row(key, currency) if key else None
        if own is not None:
            return own
        # An item key is the buyer's text, up to 4 KiB: a refusal quotes its start.
        shown = key if len(key) <= _KEY_SHOWN else f"{key[:_KEY_SHOWN]}…"
        named = f"the item {shown!r}" if key else "an item without a sku, id or route"
        if self.items_only:
            raise Unpriced("item", f"it negotiates only the items it priced, not {named}")
        fallback = self.row(None, currency)
        if fallback is None:
            raise Unpriced("item", f"it holds no {currency} limits for {named}")
        return fallback

    def document(self) -> JsonObject:
        document: JsonObject = {
            "limits": [row.document() for row in self.limits],
            "items_only": self.items_only,
        }
        if self.terms is not None:
            document["terms"] = self.terms.constraints()
        return document


def _row_name(key: tuple[str | None, str]) -> str:
    item, currency = key
    return f"{'any item' if item is None else repr(item)} in {currency}"


def read_price_list(document: object) -> PriceList:
    """A :class:`PriceList` from the JSON :meth:`PriceList.document` writes; amounts may be
    JSON numbers or numeric strings. ``ValueError`` says which row is wrong and why."""
    if not isinstance(document, dict) or not isinstance(document.get("limits"), list):
        raise ValueError('a price list is an object with a "limits" list')
    rows = []
    for n, row in enumerate(document["limits"], 1):
        try:
            rows.append(_read_row(row))
        except ValueError as bad:
            raise ValueError(f"limits row {n}: {bad}") from None
    items_only = document.get("items_only", False)
    if not isinstance(items_only, bool):
        raise ValueError('"items_only" must be true or false')
    terms = read_terms_vault(document["terms"]) if "terms" in document else None
    return PriceList(tuple(rows), items_only, terms)


def _read_row(row: object) -> PriceLimits:
    if not isinstance(row, dict):
        raise ValueError("must be an object")
    unknown = set(row) - {"item", "currency", "floor_price", "ideal_price"}
    if unknown:
        raise ValueError(f"unknown member {sorted(unknown)[0]!r}")
    currency, item = row.get("currency"), row.get("item")
    if not isinstance(currency, str) or currency not in MINOR_UNITS:
        raise ValueError("currency must be an ISO 4217 code")
    if item is not None and not isinstance(item, str):
        raise ValueError("item must be a string, or null for any item")
    return PriceLimits(
        item=item or None,
        currency=currency,
        floor_price=read_amount(row.get("floor_price"), "the floor", currency),
        ideal_price=read_amount(row.get("ideal_price"), "the ideal price", currency),
    )


def from_single_limits(document: Mapping[str, Any], currency: str) -> PriceList:
    """A price list from a vault written before limits had a currency (``floor_price``,
    ``ideal_price``, ``per_item`` ``{item: [floor, ideal]}``, ``terms``), read as limits in
    ``currency``. ``ValueError`` when an amount does not fit that currency."""
    rows = [
        PriceLimits(
            None,
            currency,
            read_amount(document["floor_price"], "the floor", currency),
            read_amount(document["ideal_price"], "the ideal price", currency),
        )
    ]
    for item, (floor, ideal) in document.get("per_item", {}).items():
        rows.append(
            PriceLimits(
                item,
                currency,
                read_amount(floor, f"{item!r}'s floor", currency),
                read_amount(ideal, f"{item!r}'s ideal price", currency),
            )
        )
    terms = read_terms_vault(document["terms"]) if "terms" in document else None
    return PriceList(tuple(rows), False, terms)
