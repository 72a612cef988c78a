"""Canonical JSON (RFC 8785) and the strict JSON reader everything hashed goes through.

The reader keeps numbers exact (``Decimal`` for every literal with a fraction or exponent) and
refuses what would make two parties hash different bytes for "the same" document: duplicate
keys, ``NaN``/``Infinity``, integers outside I-JSON's ±2^53, lone surrogates.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, TypeAlias

import rfc8785

from oanp.errors import FieldError, MalformedEnvelope, SchemaInvalid

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
JsonObject: TypeAlias = "dict[str, JsonValue]"

#: I-JSON (RFC 7493) integer domain; JCS cannot represent integers beyond it exactly.
MAX_SAFE_INTEGER = 2**53 - 1
MAX_DEPTH = 64
ZERO_HASH = "sha256:" + "0" * 64


class ExponentDecimal(Decimal):
    """A number written with an exponent (``3.4e2``). Kept apart because prices forbid it."""

    __slots__ = ()


def _parse_float(literal: str) -> Decimal:
    if "e" in literal or "E" in literal:
        return ExponentDecimal(literal)
    return Decimal(literal)


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        dupes = [k for k, _ in pairs if k in seen or seen.add(k)]  # type: ignore[func-returns-value]
        raise ValueError(f"duplicate key {dupes[0]!r}")
    return obj


def read_json(data: bytes | str) -> Any:
    """Parse strictly; numbers with a fraction or exponent come back as ``Decimal``."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        return json.loads(
            text,
            parse_float=_parse_float,
            parse_constant=_reject_constant,
            object_pairs_hook=_unique_keys,
        )
    except UnicodeDecodeError as exc:
        raise MalformedEnvelope("body is not UTF-8") from exc
    except RecursionError as exc:
        raise MalformedEnvelope("JSON nests too deeply") from exc
    except ValueError as exc:  # JSONDecodeError, duplicate keys, int digit limit
        raise MalformedEnvelope(f"body is not valid JSON: {exc}") from exc


def json_value(
    value: object, path: str = "$", depth: int = 0, *, max_depth: int = MAX_DEPTH
) -> JsonValue:
    """Normalize a parsed or hand-built value to what RFC 8785 hashes, or say where it breaks.

    ``Decimal`` becomes ``int`` when whole and within I-JSON, ``float`` otherwise.
    """
    if depth > max_depth:
        raise SchemaInvalid("too deeply nested", errors=[FieldError(path, "nests too deeply")])
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise SchemaInvalid(
                "integer out of range", errors=[FieldError(path, "integer beyond ±(2^53-1)")]
            )
        return value
    if isinstance(value, Decimal | float):
        return _number(value, path)
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise SchemaInvalid(
                "invalid string", errors=[FieldError(path, "string holds a lone surrogate")]
            ) from exc
        return value
    if isinstance(value, Mapping):
        out: dict[str, JsonValue] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise SchemaInvalid(
                    "invalid key", errors=[FieldError(path, "keys must be strings")]
                )
            json_value(key, path)  # a key must be a valid string too
            out[key] = json_value(item, f"{path}.{key}", depth + 1, max_depth=max_depth)
        return out
    if isinstance(value, list | tuple):
        return [
            json_value(item, f"{path}[{i}]", depth + 1, max_depth=max_depth)
            for i, item in enumerate(value)
        ]
    raise SchemaInvalid(
        "not JSON", errors=[FieldError(path, f"{type(value).__name__} is not JSON")]
    )


def _number(value: Decimal | float, path: str) -> int | float:
    as_decimal = Decimal(value) if isinstance(value, float) else value
    if not as_decimal.is_finite():
        raise SchemaInvalid("not a finite number", errors=[FieldError(path, "not finite")])
    if as_decimal == as_decimal.to_integral_value() and abs(as_decimal) <= MAX_SAFE_INTEGER:
        return int(as_decimal)
    as_float = float(as_decimal)
    if as_float in (float("inf"), float("-inf")):
        raise SchemaInvalid("number out of range", errors=[FieldError(path, "overflows a double")])
    return as_float


def canonical_bytes(value: JsonValue) -> bytes:
    """RFC 8785 bytes of an already normalized value (see :func:`json_value`)."""
    return rfc8785.dumps(value)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tagged_sha256(data: bytes) -> str:
    """``"sha256:" + hex``, the form every hash of this protocol takes on the wire."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def hash_canonical(value: JsonValue) -> str:
    return tagged_sha256(canonical_bytes(value))
