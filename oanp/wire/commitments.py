"""Commitments to private constraints, and the check of a reveal against one.

The salted form is ours: without a salt a ceiling between $1 and $10,000 is 10^6 guesses
away, so the salt is what keeps the arbiter from learning it. The unsalted ``0x`` form is the
public reference's; it is accepted so reference agents interoperate, and flagged as weak.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from oanp.wire.canonical import JsonValue, canonical_bytes, json_value, read_json, tagged_sha256
from oanp.wire.errors import EnvelopeTooLarge, FieldError, RevealMismatch, SchemaInvalid

SALTED_PATTERN = re.compile(r"sha256:[0-9a-f]{64}")
WEAK_PATTERN = re.compile(r"0x[0-9a-f]{16}")
SALT_BYTES = 32

#: A party's side of a session, as commitments and limits name it; the arbiter has none.
Side = Literal["buyer", "merchant"]


def is_commitment(value: str) -> bool:
    return bool(SALTED_PATTERN.fullmatch(value) or WEAK_PATTERN.fullmatch(value))


def is_weak(commitment: str) -> bool:
    """True for the unsalted reference form, which a dictionary attack can open."""
    return bool(WEAK_PATTERN.fullmatch(commitment))


def _committed(
    constraints: Mapping[str, object], item: Mapping[str, object], max_rounds: int
) -> dict[str, JsonValue]:
    return {
        "constraints": json_value(constraints),
        "item": json_value(item),
        "max_rounds": max_rounds,
    }


def commit(
    constraints: Mapping[str, object], item: Mapping[str, object], max_rounds: int, salt: str
) -> str:
    """The salted commitment: ``sha256:`` + hex SHA-256 of
    JCS({constraints, item, max_rounds, salt})."""
    document = _committed(constraints, item, max_rounds)
    document["salt"] = salt
    return tagged_sha256(canonical_bytes(document))


def reference_commit(
    constraints: Mapping[str, object], item: Mapping[str, object], max_rounds: int
) -> str:
    """The public reference's unsalted form: ``0x`` + the first 16 hex of SHA-256."""
    text = json.dumps(
        _committed(constraints, item, max_rounds), sort_keys=True, separators=(",", ":")
    )
    return "0x" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def encode_salt(raw: bytes) -> str:
    """32 random bytes (drawn by the caller) as unpadded base64url."""
    if len(raw) != SALT_BYTES:
        raise ValueError(f"a salt is {SALT_BYTES} bytes")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _salt_is_well_formed(salt: str) -> bool:
    try:
        raw = base64.urlsafe_b64decode(salt + "=" * (-len(salt) % 4))
    except (binascii.Error, ValueError):
        return False
    return len(raw) == SALT_BYTES


def opens(
    commitment: str,
    *,
    constraints: Mapping[str, object],
    item: Mapping[str, object],
    max_rounds: int,
    salt: str | None,
) -> bool:
    """Whether the revealed values open ``commitment`` (either form)."""
    if is_weak(commitment):
        candidate = reference_commit(constraints, item, max_rounds)
    elif salt is None or not _salt_is_well_formed(salt):
        return False
    else:
        candidate = commit(constraints, item, max_rounds, salt)
    return hmac.compare_digest(candidate, commitment)


@dataclass(frozen=True, slots=True)
class LimitBreach:
    """A party's own price that its revealed limit forbids."""

    round: int
    price: Decimal
    limit: Decimal
    limit_name: str

    def describe(self, role: Side) -> str:
        relation = "above" if role == "buyer" else "below"
        return (
            f"round {self.round}: {role} offered {self.price}, "
            f"{relation} its {self.limit_name} {self.limit}"
        )


#: Which revealed constraint bounds which role's prices, and in which direction.
LIMIT_KEYS: dict[Side, str] = {"buyer": "true_ceiling", "merchant": "floor_price"}


def limit_of(role: Side, constraints: Mapping[str, object]) -> Decimal | None:
    raw = constraints.get(LIMIT_KEYS[role])
    if isinstance(raw, bool) or not isinstance(raw, int | float | Decimal):
        return None
    return Decimal(str(raw))


def limit_breaches(
    role: Side, constraints: Mapping[str, object], prices: Iterable[tuple[int, Decimal]]
) -> list[LimitBreach]:
    """The party's own ``(round, price)`` moves that its revealed limit forbids.

    A buyer must never have offered above ``true_ceiling``; a merchant never below
    ``floor_price``. Constraints without that limit yield no breach (nothing was promised).
    """
    limit = limit_of(role, constraints)
    if limit is None:
        return []
    name = LIMIT_KEYS[role]
    if role == "buyer":
        return [LimitBreach(r, p, limit, name) for r, p in prices if p > limit]
    return [LimitBreach(r, p, limit, name) for r, p in prices if p < limit]


def verify_reveal(
    commitment: str,
    *,
    role: Side,
    constraints: Mapping[str, object],
    salt: str | None,
    item: Mapping[str, object],
    max_rounds: int,
    prices: Iterable[tuple[int, Decimal]],
) -> list[LimitBreach]:
    """Check a reveal: raise :class:`RevealMismatch` unless it opens the commitment, then
    return the party's own prices that broke the limit it revealed (empty when honest).

    A reveal that opens but shows a breach is still a true reveal: it is evidence, so it is
    returned for the caller to record, not refused.
    """
    if not opens(commitment, constraints=constraints, item=item, max_rounds=max_rounds, salt=salt):
        raise RevealMismatch("the revealed constraints and salt do not open the commitment")
    return limit_breaches(role, constraints, prices)


@dataclass(frozen=True, slots=True)
class Reveal:
    """A party's opening of its commitment: ``{"constraints": {...}, "salt": "..."}``."""

    constraints: dict[str, JsonValue]
    salt: str | None


MAX_REVEAL_BYTES = 16 * 1024


def parse_reveal(data: bytes | str) -> Reveal:
    """Read a reveal request body; only :class:`~oanp.wire.errors.ProtocolError` escapes.

    ``salt`` may be ``null`` for a reference (``0x``) commitment, which has none.
    """
    size = len(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    if size > MAX_REVEAL_BYTES:
        raise EnvelopeTooLarge.over(MAX_REVEAL_BYTES, size=size)
    document = read_json(data)
    errors: list[FieldError] = []
    if not isinstance(document, dict):
        raise SchemaInvalid("a reveal is a JSON object", errors=[FieldError("$", "not an object")])
    errors += [FieldError(f"$.{k}", "unknown field") for k in document if k not in _REVEAL_KEYS]
    constraints, salt = document.get("constraints"), document.get("salt")
    if not isinstance(constraints, dict):
        errors.append(FieldError("$.constraints", "required, an object"))
    if salt is not None and not isinstance(salt, str):
        errors.append(FieldError("$.salt", "a base64url string, or null for a 0x commitment"))
    if errors:
        raise SchemaInvalid("the reveal does not match the schema", errors=errors)
    assert isinstance(constraints, dict)
    value = json_value(constraints, "$.constraints")
    assert isinstance(value, dict)
    return Reveal(value, salt)


_REVEAL_KEYS = frozenset({"constraints", "salt"})
