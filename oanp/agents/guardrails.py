"""Guardrails for an agent whose moves come from a model: what it may send next, and why not.

The arbiter judges I4 only after a move is logged: a retraction is evidence, and the session
closes as violated. A party's own limit it never sees at all. A model driving a party (the MCP
tools, :mod:`oanp.net.mcp`) is better told beforehand, and stopped before it sends: a
:class:`Position` is what the party's log and its own limit say about its next move, its
:meth:`~Position.allowed` range is what to show the model, and its checks are what to refuse.

Everything is judged as the arbiter judges it (:func:`oanp.wire.terms.is_pure_retraction`, the
accept naming the other side's standing price) or as the reveal does (a buyer never above its
``true_ceiling``, a merchant never below its ``floor_price``), so the arbiter judges no move
the guard lets through a violation of I4, and no reveal shows one past the party's limit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Final, Literal

from oanp.agents.strategies import at_least_as_good, in_own_favour
from oanp.wire.canonical import JsonObject, JsonValue
from oanp.wire.commitments import Side
from oanp.wire.envelope import Offer, Open, envelope_from_json
from oanp.wire.money import price_to_json
from oanp.wire.terms import Issue, Values, is_pure_retraction, read_terms

#: Why a move is refused: past the party's own limit, a (pure) retraction of its standing
#: offer, or an accept of a price that is not the other side's standing one.
RefusalCode = Literal["beyond_limit", "retraction", "not_standing", "other_currency"]


@dataclass(frozen=True, slots=True)
class Standing:
    """A party's latest offer: its price and, in a session with issues, its terms' values."""

    price: Decimal
    values: Values = ()


@dataclass(frozen=True, slots=True)
class Allowed:
    """What a party may send next: a propose (a buyer's) or counter (a merchant's) priced
    from ``lowest`` to ``highest`` (``None``: no bound on that side; none at all when
    ``lowest`` exceeds ``highest``), and an accept of ``accept_price`` (``None``: nothing it
    may accept). With ``trade_offs`` (a session with issues) the bound its own standing price
    sets gives way to terms better for the other side; its limit never does."""

    lowest: Decimal | None
    highest: Decimal | None
    accept_price: Decimal | None
    trade_offs: bool
    #: Why no price at all may be sent (a session in a currency the limit is not in).
    blocked: str | None = None

    def as_json(self) -> JsonObject:
        """The range as a tool shows it, prices as the wire writes them."""
        shown: JsonObject = {
            "min_price": _price(self.lowest),
            "max_price": _price(self.highest),
            "accept_price": _price(self.accept_price),
            "trade_offs": self.trade_offs,
        }
        if self.blocked is not None:
            shown["blocked"] = self.blocked
        return shown


@dataclass(frozen=True, slots=True)
class Refusal:
    """A move the guard stops: why (``code``, ``detail``) and what is allowed instead."""

    code: RefusalCode
    detail: str
    allowed: Allowed


@dataclass(frozen=True, slots=True)
class Position:
    """What bounds a party's next move: its latest offer (``own``) and the other side's
    (``other``), each ``None`` before it offered, its own hard ``limit`` (a buyer's
    ``true_ceiling``, a merchant's ``floor_price``; ``None`` when not given) in
    ``limit_currency`` (``None``: the limit holds in any currency) and the session's
    ``currency`` and ``issues``."""

    role: Side
    currency: str
    own: Standing | None = None
    other: Standing | None = None
    limit: Decimal | None = None
    issues: tuple[Issue, ...] = ()
    limit_currency: str | None = None

    @property
    def other_currency(self) -> str | None:
        """Why the limit says nothing of this session, or ``None`` when it does: 280 USD is
        no floor in yen, so nothing may be sent on it."""
        if self.limit is None or self.limit_currency in (None, self.currency):
            return None
        return (
            f"your limit is in {self.limit_currency} and this session is in {self.currency}: "
            "no price in it is within your limit; withdraw"
        )

    def allowed(self) -> Allowed:
        """The range to show: no retraction of the party's own standing price, nothing past
        its limit (rounded to the currency's minor unit, inwards), and the other side's
        standing price to accept when it lies within the limit; nothing at all in a currency
        the limit is not in."""
        if (blocked := self.other_currency) is not None:
            return Allowed(None, None, None, bool(self.issues), blocked)
        standing = None if self.own is None else self.own.price
        limit = None
        if self.limit is not None:
            # Rounded towards the party, so that the bound shown is a price it may send.
            limit = in_own_favour(self.role, self.limit, self.currency)
        accept = None
        if self.other is not None and not self._beyond_limit(self.other.price):
            accept = self.other.price
        if self.role == "buyer":
            return Allowed(standing, limit, accept, bool(self.issues))
        return Allowed(limit, standing, accept, bool(self.issues))

    def check_offer(self, new: Standing) -> Refusal | None:
        """Why a propose or counter of ``new`` may not be sent, or ``None`` when it may."""
        if (blocked := self.other_currency) is not None:
            return self._refusal("other_currency", blocked)
        if self._beyond_limit(new.price):
            return self._refusal("beyond_limit", self._past_limit(new.price))
        own = self.own
        if own is not None and is_pure_retraction(
            self.role == "merchant", self.issues, (own.price, own.values), (new.price, new.values)
        ):
            return self._refusal("retraction", self._retraction_detail(own, new))
        return None

    def check_accept(self, price: Decimal) -> Refusal | None:
        """Why an accept naming ``price`` may not be sent, or ``None`` when it may."""
        if (blocked := self.other_currency) is not None:
            return self._refusal("other_currency", blocked)
        if self.other is None:
            return self._refusal("not_standing", "the other side has no standing price to accept")
        standing = self.other.price
        if price != standing:
            detail = f"the other side's standing price is {standing}, not {price}"
            return self._refusal("not_standing", detail)
        if self._beyond_limit(price):
            return self._refusal("beyond_limit", "their standing price, " + self._past_limit(price))
        return None

    def _beyond_limit(self, price: Decimal) -> bool:
        return self.limit is not None and not at_least_as_good(self.role, price, self.limit)

    def _past_limit(self, price: Decimal) -> str:
        side = "above" if self.role == "buyer" else "below"
        return f"{price} {self.currency} is {side} your limit of {self.limit} {self.currency}"

    def _retraction_detail(self, own: Standing, new: Standing) -> str:
        if self.issues:
            return (
                "this offer is worse for the other side than your standing one on some terms and "
                "better on none (I4: no pure retraction); give them more on another issue"
            )
        verb = "lower" if self.role == "buyer" else "raise"
        return f"you may not {verb} your standing price of {own.price} to {new.price} (I4)"

    def _refusal(self, code: RefusalCode, detail: str) -> Refusal:
        return Refusal(code, detail, self.allowed())


#: The member of a party's constraints that a settlement reveals as its limit.
LIMIT_MEMBER: Final[Mapping[Side, str]] = {"buyer": "true_ceiling", "merchant": "floor_price"}


def past_committed_limit(
    role: Side, constraints: Mapping[str, JsonValue], limit: Decimal
) -> str | None:
    """Why committing to ``constraints`` would let ``role`` agree past its own ``limit``, or
    ``None``: a settlement by reveal settles at the midpoint of the two committed limits
    (docs/protocol.md §5), so a merchant committing a floor under its real one, or a buyer a
    ceiling over it, could be settled past it without ever sending an offer."""
    name = LIMIT_MEMBER[role]
    value = constraints.get(name)
    if value is None:
        return None  # nothing to settle on: a reveal of it is refused not_settleable
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return f"{name} must be a number"
    try:
        committed = Decimal(str(value))
    except InvalidOperation:
        return f"{name} must be a number"
    if committed.is_finite() and at_least_as_good(role, committed, limit):
        return None
    return f"a {name} of {value} is past your limit of {limit}: a settlement could agree past it"


def needs_approval(role: Side, threshold: Decimal | None, price: Decimal) -> bool:
    """Whether accepting ``price`` waits for a person: past ``threshold`` on the side that
    costs ``role`` (above it for a buyer, below it for a merchant); never without one."""
    return threshold is not None and not at_least_as_good(role, price, threshold)


def read_position(
    entries: Sequence[Mapping[str, JsonValue]],
    role: Side,
    limit: Decimal | None = None,
    limit_currency: str | None = None,
) -> Position:
    """``role``'s position after a session's log (as its API returns it, ``session.open``
    first): the currency and issues the session opened with, and each party's latest offer,
    which is the one the arbiter holds it to (a buyer proposes once a round, and the merchant
    answers its proposal of the round). A :class:`~oanp.wire.errors.ProtocolError` for an entry
    that holds no envelope or an offer whose terms do not fit the issues, and ``ValueError``
    for a log that does not open: none of them is in a log the arbiter wrote."""
    envelopes = [envelope_from_json(entry.get("envelope")) for entry in entries]
    opening = envelopes[0].payload if envelopes else None
    if not isinstance(opening, Open):
        raise ValueError("a session's log starts with its session.open")
    latest: dict[str, Standing] = {}
    for envelope in envelopes:
        if isinstance(envelope.payload, Offer):
            offer = envelope.payload
            values = read_terms(opening.issues, offer.terms) if opening.issues else ()
            latest[envelope.role.value] = Standing(offer.price, values)
    other = "merchant" if role == "buyer" else "buyer"
    return Position(
        role,
        opening.currency,
        latest.get(role),
        latest.get(other),
        limit,
        opening.issues,
        limit_currency,
    )


def _price(value: Decimal | None) -> int | float | None:
    return None if value is None else price_to_json(value)
