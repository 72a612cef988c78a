"""Envelopes and payloads of docs/protocol.md §§2–4: types and the one strict parser.

:func:`parse_envelope` is the only door for bytes from outside. For every input it returns an
:class:`Envelope` or raises a :class:`~oanp.wire.errors.ProtocolError`; nothing else escapes.
Schemas are closed (``item`` and ``constraints`` excepted) and every bad field is named at once.
"""

from __future__ import annotations

import re
from calendar import monthrange
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import MAXYEAR, UTC, datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Any, TypeAlias, TypeVar

from oanp.wire.canonical import ExponentDecimal, JsonObject, canonical_bytes, json_value, read_json
from oanp.wire.commitments import is_commitment
from oanp.wire.errors import (
    EnvelopeTooLarge,
    FieldError,
    ProtocolError,
    RoleMayNotSend,
    SchemaInvalid,
)
from oanp.wire.money import MINOR_UNITS, PRICE_CEILING
from oanp.wire.profiles import Reason, VerdictStatus
from oanp.wire.terms import MAX_ISSUES, Issue, IssuesInvalid, read_issues

OANP_VERSION = "0.1"
MAX_ENVELOPE_BYTES = 64 * 1024
MAX_ITEM_BYTES = 4 * 1024
#: Items nest at most this deep, so an entry that carries one stays within canonical limits.
MAX_ITEM_DEPTH = 16
MAX_ROUNDS_LIMIT = 20
DEFAULT_MAX_ROUNDS = 5
DEFAULT_PROFILE = "default/v0.1"
DEFAULT_RESPONSE_WINDOW_S = 300
RESPONSE_WINDOW_RANGE = (10, 3600)
INVARIANTS = ("I1", "I2", "I3", "I4", "I5", "I6", "I7")
#: The arbiter numbers its own messages under this prefix, which parties may not use.
ARBITER_ID_PREFIX = "arbiter:"
_ONE_SECOND = timedelta(seconds=1)

#: What an identifier (a message, session or agent id) may be: the schema's pattern too.
ID_PATTERN = "[A-Za-z0-9._:-]{1,64}"
_ID = re.compile(ID_PATTERN)
_TIMESTAMP = re.compile(
    r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(?:Z|\+00:00)", re.IGNORECASE
)


class Role(StrEnum):
    BUYER = "buyer"
    MERCHANT = "merchant"
    ARBITER = "arbiter"


class MessageType(StrEnum):
    SESSION_OPEN = "session.open"
    SESSION_ACK = "session.ack"
    OFFER_PROPOSE = "offer.propose"
    OFFER_COUNTER = "offer.counter"
    OFFER_ACCEPT = "offer.accept"
    ROUND_VERDICT = "round.verdict"
    SESSION_AGREE = "session.agree"
    SESSION_CLOSE = "session.close"
    SETTLE_REVEAL = "settle.reveal"


#: Settlement rules a session may be opened with (docs/protocol.md §5, settlement).
SETTLEMENTS = ("reveal",)


#: Which role may send which type (docs/protocol.md §1).
SENDERS: Mapping[MessageType, frozenset[Role]] = {
    MessageType.SESSION_OPEN: frozenset({Role.BUYER}),
    MessageType.SESSION_ACK: frozenset({Role.MERCHANT}),
    MessageType.OFFER_PROPOSE: frozenset({Role.BUYER}),
    MessageType.OFFER_COUNTER: frozenset({Role.MERCHANT}),
    MessageType.OFFER_ACCEPT: frozenset({Role.BUYER, Role.MERCHANT}),
    MessageType.ROUND_VERDICT: frozenset({Role.ARBITER}),
    MessageType.SESSION_AGREE: frozenset({Role.ARBITER}),
    MessageType.SESSION_CLOSE: frozenset({Role.BUYER, Role.MERCHANT, Role.ARBITER}),
    MessageType.SETTLE_REVEAL: frozenset({Role.BUYER, Role.MERCHANT}),
}

PARTY_CLOSE_REASON = "withdrawn"


# Payloads ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Open:
    merchant_agent_id: str
    item: JsonObject
    currency: str
    max_rounds: int
    profile: str
    constraints_commit: str
    response_window_s: int
    deadline: datetime | None
    #: ``"reveal"`` when the buyer asks to allow settlement by simultaneous reveal.
    settlement: str | None = None
    #: The issues negotiated besides the price (profile ``terms/v0.1``); empty otherwise.
    issues: tuple[Issue, ...] = ()


@dataclass(frozen=True, slots=True)
class Ack:
    constraints_commit: str


@dataclass(frozen=True, slots=True)
class Offer:
    """``offer.propose``, ``offer.counter`` and ``offer.accept`` share this shape."""

    round: int
    price: Decimal
    constraints_commit: str
    #: ``{issue: value}`` as sent; checked against the session's issues by the machine, which
    #: alone knows them.
    terms: JsonObject | None = None


@dataclass(frozen=True, slots=True)
class SettleReveal:
    """``settle.reveal``: a party opens its own commitment to settle at once."""

    round: int
    constraints: JsonObject
    salt: str
    constraints_commit: str


@dataclass(frozen=True, slots=True)
class Withdraw:
    constraints_commit: str


@dataclass(frozen=True, slots=True)
class Verdict:
    round: int
    status: VerdictStatus
    rationale: Reason
    buyer_price: Decimal | None
    merchant_price: Decimal | None
    spread: Decimal | None
    checks: dict[str, str]
    #: In a session with issues: how many the two standing offers differ on.
    issues_open: int | None = None


@dataclass(frozen=True, slots=True)
class Agree:
    final_price: Decimal
    currency: str
    session_digest: str
    invariants_satisfied: tuple[str, ...]
    agreement: JsonObject
    signature: str
    signature_alg: str
    kid: str
    jwks_uri: str


@dataclass(frozen=True, slots=True)
class Close:
    """The arbiter's close; ``detail`` is for humans, ``reason`` for machines."""

    reason: Reason
    detail: str
    round: int


Payload: TypeAlias = Open | Ack | Offer | SettleReveal | Withdraw | Verdict | Agree | Close


@dataclass(frozen=True, slots=True)
class Envelope:
    """A parsed envelope. ``body`` is its normalized JSON: what the log stores and hashes."""

    message_id: str
    session_id: str
    timestamp: datetime
    role: Role
    agent_id: str
    type: MessageType
    payload: Payload
    body: JsonObject

    def canonical(self) -> bytes:
        return canonical_bytes(self.body)

    @property
    def signed(self) -> bool:
        """Whether its sender signed it (§12): the body carries ``signature``."""
        return "signature" in self.body


# Field readers -------------------------------------------------------------------------------

T = TypeVar("T")


class _Bad(ValueError):
    """A field's value is wrong; the message says how. Leaves this module only from the
    public readers (:func:`parse_timestamp`), as the ``ValueError`` it is."""


#: A detached compact JWS of Ed25519 or ES256 with its three-member header is about 250
#: characters: this leaves room for a long kid and nothing more.
MAX_SIGNATURE_CHARS = 1024
IDENTIFIER_RULE = "1-64 characters of A-Z a-z 0-9 . _ : -"


def is_identifier(value: object) -> bool:
    """Whether ``value`` may be a session, message or agent id."""
    return isinstance(value, str) and _ID.fullmatch(value) is not None


def _identifier(value: object) -> str:
    if not is_identifier(value):
        raise _Bad(f"must be {IDENTIFIER_RULE}")
    assert isinstance(value, str)
    return value


def _party_message_id(value: object) -> str:
    text = _identifier(value)
    if text.startswith(ARBITER_ID_PREFIX):
        raise _Bad(f"the prefix {ARBITER_ID_PREFIX!r} is reserved for the arbiter")
    return text


def parse_timestamp(value: object) -> datetime:
    """RFC 3339 in UTC (``Z`` or ``+00:00``); fractions beyond microseconds are truncated.

    A leap second, ``23:59:60`` on a month's last day, reads as the next month's first instant
    (plus its fraction), as POSIX time counts it; second 60 at any other time is refused.
    Only the instant read moves: the envelope keeps the text, so every hash stays as sent.
    """
    if not isinstance(value, str):
        raise _Bad("must be an RFC 3339 UTC timestamp string")
    match = _TIMESTAMP.fullmatch(value)
    if not match:
        raise _Bad("must be an RFC 3339 timestamp in UTC, like 2026-04-28T14:00:00Z")
    whole, fraction = match.groups()
    try:
        if whole.endswith("60"):
            moment = _leap_second(whole)
        else:
            moment = datetime.fromisoformat(whole.upper()).replace(tzinfo=UTC)
    except _Bad:
        raise
    except ValueError as exc:
        raise _Bad("is not a real date and time") from exc
    if fraction:
        moment = moment.replace(microsecond=int(fraction[:6].ljust(6, "0")))
    return moment


def _leap_second(whole: str) -> datetime:
    """``YYYY-MM-DDTHH:MM:60`` as the instant after ``HH:MM:59``, refused unless a leap second
    may fall there: RFC 3339 §5.7 puts them at 23:59:60 UTC at the end of a month. Which
    months, only a table published months ahead says, and the protocol keeps none."""
    last = datetime.fromisoformat(whole[:-2].upper() + "59").replace(tzinfo=UTC)
    if (last.hour, last.minute) != (23, 59) or last.day != monthrange(last.year, last.month)[1]:
        raise _Bad("has second 60, which only a leap second has: 23:59:60 on a month's last day")
    if (last.year, last.month) == (MAXYEAR, 12):
        raise _Bad("is past the last second a timestamp may name")
    return last + _ONE_SECOND


def format_timestamp(moment: datetime) -> str:
    """The arbiter's own timestamp form: UTC, ``Z``, microseconds only when present."""
    moment = moment.astimezone(UTC)
    if moment.year >= 1000:  # the same text, faster: isoformat gives microseconds when present
        return moment.isoformat()[:-6] + "Z"  # less its "+00:00"
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")  # an unpadded year, as it always was
    if moment.microsecond:
        text += f".{moment.microsecond:06d}"
    return text + "Z"


def _integer(low: int, high: int) -> Callable[[object], int]:
    def read(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise _Bad(f"must be an integer from {low} to {high}")
        return value

    return read


def _price(value: object) -> Decimal:
    if isinstance(value, ExponentDecimal):
        raise _Bad("must not use exponent notation")
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise _Bad("must be a JSON number")
    price = _exact(value)
    if not 0 < price < PRICE_CEILING:
        raise _Bad("must be greater than 0 and less than 10^12")
    if Decimal(repr(float(price))) != price:
        # The log stores a double; a price it cannot hold exactly would hash ambiguously.
        raise _Bad("has more significant digits than a price can carry exactly")
    return price


def _optional_amount(value: object) -> Decimal | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise _Bad("must be a number or null")
    return _exact(value)


def _exact(value: int | float | Decimal) -> Decimal:
    """A number as the decimal it was written as; a float (a stored log) by its shortest repr."""
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise _Bad("must be finite")
        return Decimal(repr(value))
    return Decimal(value)


def _currency(value: object) -> str:
    if not isinstance(value, str) or value not in MINOR_UNITS:
        raise _Bad("must be an ISO 4217 currency code, like USD")
    return value


def _commitment(value: object) -> str:
    if not isinstance(value, str) or not is_commitment(value):
        raise _Bad('must be "sha256:" + 64 hex digits, or the reference "0x" + 16 hex digits')
    return value


def _bounded_object(path: str) -> Callable[[object], JsonObject]:
    """A free-form object (an item, revealed constraints), nested and sized within bounds."""

    def read(value: object) -> JsonObject:
        if not isinstance(value, dict):
            raise _Bad("must be a JSON object")
        normalized = json_value(value, path, max_depth=MAX_ITEM_DEPTH)
        assert isinstance(normalized, dict)
        if len(canonical_bytes(normalized)) > MAX_ITEM_BYTES:
            raise _Bad(f"must be at most {MAX_ITEM_BYTES} bytes")
        return normalized

    return read


_item = _bounded_object("$.payload.item")
_constraints = _bounded_object("$.payload.constraints")


def _settlement(value: object) -> str:
    if value not in SETTLEMENTS:
        raise _Bad("must be one of " + ", ".join(f'"{v}"' for v in SETTLEMENTS))
    assert isinstance(value, str)
    return value


def _issues(value: object) -> tuple[Issue, ...]:
    try:
        return read_issues(value)
    except IssuesInvalid as bad:
        raise _Bad(str(bad)) from bad


def _terms(value: object) -> JsonObject:
    """An offer's terms in shape only: names, and scalar values (their domain is the
    session's, checked where the session is known)."""
    if not isinstance(value, dict):
        raise _Bad("must be an object of issue values")
    for name, term in value.items():
        if isinstance(term, bool) or not isinstance(term, str | int | float | Decimal):
            raise _Bad(f"{name} must be a number or a string")
    normalized = json_value(value, "$.payload.terms")
    assert isinstance(normalized, dict)
    return normalized


def _profile_name(value: object) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= 64:
        raise _Bad("must be a profile name, like default/v0.1")
    return value


def _text(limit: int) -> Callable[[object], str]:
    def read(value: object) -> str:
        if not isinstance(value, str) or len(value) > limit:
            raise _Bad(f"must be a string of at most {limit} characters")
        return value

    return read


def _one_of(enum: Callable[[str], T], choices: Any) -> Callable[[object], T]:
    values = frozenset(c.value for c in choices)
    expected = "must be one of " + ", ".join(sorted(values))

    def read(value: object) -> T:
        if not isinstance(value, str) or value not in values:
            raise _Bad(expected)
        return enum(value)

    return read


_MESSAGE_TYPE = _one_of(MessageType, MessageType)
_ROLE = _one_of(Role, Role)


def _withdrawn(value: object) -> str:
    if value != PARTY_CLOSE_REASON:
        raise _Bad(f'must be "{PARTY_CLOSE_REASON}"')
    return PARTY_CLOSE_REASON


def _checks(value: object) -> dict[str, str]:
    if not isinstance(value, dict) or not value:
        raise _Bad("must be an object of invariant results")
    if not set(value) <= set(INVARIANTS) or not set(value.values()) <= {"pass", "fail"}:
        raise _Bad('must map I1..I7 to "pass" or "fail"')
    return dict(value)


def _invariant_list(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _Bad("must be a list of invariant ids")
    if not set(value) <= set(INVARIANTS):
        raise _Bad("must name only I1..I7")
    return tuple(value)


def _object(value: object) -> JsonObject:
    if not isinstance(value, dict):
        raise _Bad("must be a JSON object")
    return value


class _Fields:
    """Reads one closed object, collecting every bad field before failing once."""

    def __init__(self, obj: Mapping[str, object], path: str, errors: list[FieldError]) -> None:
        self.obj, self.path, self.errors = obj, path, errors
        self.seen: set[str] = set()

    def take(self, name: str, read: Callable[[object], T], default: T | None = None) -> T:
        self.seen.add(name)
        if name not in self.obj:
            if default is None:
                self.errors.append(FieldError(f"{self.path}.{name}", "is required"))
            return default  # type: ignore[return-value]  # only read when errors is empty
        try:
            return read(self.obj[name])
        except _Bad as bad:
            self.errors.append(FieldError(f"{self.path}.{name}", str(bad)))
        except SchemaInvalid as invalid:
            self.errors.extend(invalid.errors)
        return None  # type: ignore[return-value]

    def optional(self, name: str, read: Callable[[object], T]) -> T | None:
        self.seen.add(name)
        if name not in self.obj or self.obj[name] is None:
            return None
        return self.take(name, read)

    def close(self) -> None:
        for extra in sorted(set(self.obj) - self.seen):
            self.errors.append(FieldError(f"{self.path}.{extra}", "is not a known field"))


def _read_payload(kind: MessageType, role: Role, f: _Fields) -> Payload:
    if kind is MessageType.SESSION_OPEN:
        return Open(
            merchant_agent_id=f.take("merchant_agent_id", _identifier),
            item=f.take("item", _item),
            currency=f.take("currency", _currency),
            max_rounds=f.take("max_rounds", _integer(1, MAX_ROUNDS_LIMIT), DEFAULT_MAX_ROUNDS),
            profile=f.take("profile", _profile_name, DEFAULT_PROFILE),
            constraints_commit=f.take("constraints_commit", _commitment),
            response_window_s=f.take(
                "response_window_s", _integer(*RESPONSE_WINDOW_RANGE), DEFAULT_RESPONSE_WINDOW_S
            ),
            deadline=f.optional("deadline", parse_timestamp),
            settlement=f.optional("settlement", _settlement),
            issues=f.optional("issues", _issues) or (),
        )
    if kind is MessageType.SETTLE_REVEAL:
        return SettleReveal(
            round=f.take("round", _integer(1, MAX_ROUNDS_LIMIT)),
            constraints=f.take("constraints", _constraints),
            salt=f.take("salt", _text(128)),
            constraints_commit=f.take("constraints_commit", _commitment),
        )
    if kind is MessageType.SESSION_ACK:
        return Ack(f.take("constraints_commit", _commitment))
    if kind in (MessageType.OFFER_PROPOSE, MessageType.OFFER_COUNTER, MessageType.OFFER_ACCEPT):
        return Offer(
            round=f.take("round", _integer(1, MAX_ROUNDS_LIMIT)),
            price=f.take("price", _price),
            constraints_commit=f.take("constraints_commit", _commitment),
            terms=f.optional("terms", _terms),
        )
    if kind is MessageType.SESSION_CLOSE and role is not Role.ARBITER:
        f.take("reason", _withdrawn)
        return Withdraw(f.take("constraints_commit", _commitment))
    if kind is MessageType.SESSION_CLOSE:
        return Close(
            reason=f.take("reason", _one_of(Reason, Reason)),
            detail=f.take("detail", _text(1000)),
            round=f.take("round", _integer(0, MAX_ROUNDS_LIMIT)),
        )
    if kind is MessageType.ROUND_VERDICT:
        return Verdict(
            round=f.take("round", _integer(1, MAX_ROUNDS_LIMIT)),
            status=f.take("status", _one_of(VerdictStatus, VerdictStatus)),
            rationale=f.take("rationale", _one_of(Reason, Reason)),
            buyer_price=f.optional("buyer_price", _optional_amount),
            merchant_price=f.optional("merchant_price", _optional_amount),
            spread=f.optional("spread", _optional_amount),
            checks=f.take("checks", _checks),
            issues_open=f.optional("issues_open", _integer(0, MAX_ISSUES)),
        )
    return Agree(
        final_price=f.take("final_price", _price),
        currency=f.take("currency", _currency),
        session_digest=f.take("session_digest", _commitment),
        invariants_satisfied=f.take("invariants_satisfied", _invariant_list),
        agreement=f.take("agreement", _object),
        signature=f.take("signature", _text(4096)),
        signature_alg=f.take("signature_alg", _text(32)),
        kid=f.take("kid", _text(128)),
        jwks_uri=f.take("jwks_uri", _text(2048)),
    )


def check_sender(envelope: Envelope) -> None:
    """Refuse a type the sender's role may not send (422).

    Kept out of the parser on purpose: a transport answers 403 and 404 before this 422.
    """
    if envelope.role not in SENDERS[envelope.type]:
        raise RoleMayNotSend(f"a {envelope.role.value} may not send {envelope.type.value}")


# The parser ----------------------------------------------------------------------------------


def parse_envelope(data: bytes | str) -> Envelope:
    """Parse one envelope from the wire. Raises only :class:`ProtocolError` subclasses."""
    size = len(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    if size > MAX_ENVELOPE_BYTES:
        raise EnvelopeTooLarge.over(MAX_ENVELOPE_BYTES, size=size)
    return envelope_from_json(read_json(data))


def envelope_from_json(obj: object) -> Envelope:
    """Validate an already decoded JSON value (``Decimal`` or ``int`` numbers) as an envelope."""
    try:
        return _envelope(obj)
    except ProtocolError:
        raise
    except Exception as exc:  # a parser bug must still answer as a refusal, never a crash
        raise SchemaInvalid(f"envelope could not be read: {type(exc).__name__}") from exc


def _envelope(obj: object) -> Envelope:
    if not isinstance(obj, dict):
        raise SchemaInvalid(
            "an envelope is a JSON object", errors=[FieldError("$", "not an object")]
        )
    errors: list[FieldError] = []
    top = _Fields(obj, "$", errors)
    version = top.take("oanp_version", _text(8))
    if version is not None and version != OANP_VERSION:
        errors.append(FieldError("$.oanp_version", f'must be "{OANP_VERSION}"'))
    kind = top.take("type", _MESSAGE_TYPE)
    sender = top.take("sender", _object)
    role, agent_id = None, None
    if sender is not None:
        who = _Fields(sender, "$.sender", errors)
        role = who.take("role", _ROLE)
        agent_id = who.take("agent_id", _identifier)
        who.close()
    read_id = _identifier if role is Role.ARBITER else _party_message_id
    message_id = top.take("message_id", read_id)
    session_id = top.take("session_id", _identifier)
    timestamp = top.take("timestamp", parse_timestamp)
    raw_payload = top.take("payload", _object)
    if "signature" in obj:  # a party's, §12; checked against its keys by whoever holds them
        top.take("signature", _text(MAX_SIGNATURE_CHARS))
        if role is Role.ARBITER:
            errors.append(FieldError("$.signature", "only a party signs its envelope"))
    top.close()
    payload: Payload | None = None
    if kind is not None and role is not None and raw_payload is not None:
        fields = _Fields(raw_payload, "$.payload", errors)
        payload = _read_payload(kind, role, fields)
        fields.close()
    if errors:
        raise SchemaInvalid("envelope does not match the schema", errors=errors)
    # With no errors collected, every field above was read.
    assert kind is not None and role is not None and payload is not None
    assert agent_id is not None and message_id is not None and session_id is not None
    assert timestamp is not None
    body = json_value(obj)
    assert isinstance(body, dict)
    return Envelope(message_id, session_id, timestamp, role, agent_id, kind, payload, body)
