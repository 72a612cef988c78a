"""Canonical JSON (RFC 8785) and the strict JSON reader everything hashed goes through.

The reader keeps numbers exact (``Decimal`` for every literal with a fraction or exponent) and
refuses what would make two parties hash different bytes for "the same" document: duplicate
keys, ``NaN``/``Infinity``, integers outside I-JSON's ±2^53, lone surrogates.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from decimal import MAX_EMAX, MIN_ETINY, Decimal, InvalidOperation
from typing import Any, TypeAlias

import msgspec
import orjson
import rfc8785

from oanp.wire.errors import FieldError, MalformedEnvelope, SchemaInvalid

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
JsonObject: TypeAlias = "dict[str, JsonValue]"

#: I-JSON (RFC 7493) integer domain; JCS cannot represent integers beyond it exactly.
MAX_SAFE_INTEGER = 2**53 - 1
MAX_DEPTH = 64
ZERO_HASH = "sha256:" + "0" * 64


class ExponentDecimal(Decimal):
    """A number written with an exponent (``3.4e2``). Kept apart because prices forbid it."""

    __slots__ = ()


#: What the reader returns for a nonzero number whose exponent ``Decimal`` cannot hold (beyond
#: about ±10^18): the largest or the smallest magnitude it holds, of the same sign. Either lies
#: far outside what a double holds, so :func:`json_value` refuses it, naming the field, as it
#: refuses ``1e400`` and ``1e-400``.
_HUGE = f"1E+{MAX_EMAX}"
_TINY = f"1E{MIN_ETINY}"


def _parse_float(literal: str) -> Decimal:
    kind = ExponentDecimal if "e" in literal or "E" in literal else Decimal
    try:
        return kind(literal)
    except InvalidOperation:  # the scanner matched a JSON number: only its exponent can fail
        return kind(_beyond_decimal(literal))


def _beyond_decimal(literal: str) -> str:
    """A stand-in for a number too large or too small for ``Decimal``: zero when its digits
    are all zeros (``0e999999999999999999999`` is 0), else ``_HUGE`` or ``_TINY`` by the sign
    of its exponent. The digits before the exponent cannot tip it, being far fewer than 10^18."""
    mantissa, _, exponent = literal.lower().partition("e")
    sign = "-" if mantissa.startswith("-") else ""
    if not mantissa.strip("-0."):
        return sign + "0"
    return sign + (_TINY if exponent.startswith("-") else _HUGE)


def _parse_int(literal: str) -> int | Decimal:
    try:
        return int(literal)
    except ValueError:  # more digits than int() converts: far beyond I-JSON, refused by value
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


#: The strict reader's decoder; :mod:`oanp.audit.jsonstream` reads large documents piece by piece
#: with the same one, so a streamed file is held to the same rules as a loaded one.
STRICT_DECODER = json.JSONDecoder(
    parse_float=_parse_float,
    parse_int=_parse_int,
    parse_constant=_reject_constant,
    object_pairs_hook=_unique_keys,
)


def read_json(data: bytes | str) -> Any:
    """Parse strictly; numbers with a fraction or exponent come back as ``Decimal``.

    The compiled decoder reads first; wherever its answer could differ from
    :func:`read_json_strict`'s, that one answers instead (see :func:`_read_fast`), so both
    return the same value or raise the same error for every input.
    """
    value = _read_fast(data)
    return read_json_strict(data) if value is _DECLINED else value


def read_json_strict(data: bytes | str) -> Any:
    """:func:`read_json` by the pure-Python reader alone: the reference it answers as."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        return STRICT_DECODER.decode(text)
    except UnicodeDecodeError as exc:
        raise MalformedEnvelope("body is not UTF-8") from exc
    except RecursionError as exc:
        raise MalformedEnvelope("JSON nests too deeply") from exc
    except ValueError as exc:  # JSONDecodeError, duplicate keys, int digit limit
        raise MalformedEnvelope(f"body is not valid JSON: {exc}") from exc


#: ``msgspec`` reads numbers as the strict reader does: every literal with a fraction or an
#: exponent through :func:`_parse_float`, integers as ``int`` (failing, as ``int()`` does, past
#: the interpreter's digit limit). It refuses ``NaN``, lone surrogates, controls in strings and
#: bad UTF-8 as that reader does, with other messages, so on any error the strict one answers.
_FAST_DECODER = msgspec.json.Decoder(float_hook=_parse_float)
#: Writes a decoded value back, for its colons to be counted (numbers as strings: no colon).
_COLON_COUNTER = msgspec.json.Encoder(enc_hook=str)
#: Past this many ``[`` and ``{`` a document may nest deep enough for the strict reader to run
#: out of stack where ``msgspec`` does not, or the reverse; such documents it reads itself.
_FAST_BRACKETS = 4 * MAX_DEPTH
_DECLINED = object()


def _read_fast(data: bytes | str) -> Any:
    """``msgspec``'s reading of ``data``, or :data:`_DECLINED` where it could differ from the
    strict reader's: an error, a document with many brackets, or one that may hold a
    duplicate key, which ``msgspec`` silently overwrites.

    A duplicate is found by counting colons. Every member of an object in the text has one
    colon after its key; every other colon lies raw inside a string (no escape but ``\\u003a``
    spells a colon, and documents holding ``\\u003`` are declined). Written back, the decoded
    value has one colon per member it kept and the colons of the strings it kept. A duplicate
    drops a member, so the value written back has fewer colons than the text; without one,
    nothing is dropped and the counts are equal.
    """
    if isinstance(data, str):
        try:
            data = data.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: the strict reader says where it is
            return _DECLINED
    if data.count(b"[") + data.count(b"{") > _FAST_BRACKETS or b"\\u003" in data:
        return _DECLINED
    try:
        value = _FAST_DECODER.decode(data)
    except (ValueError, RecursionError):  # msgspec's DecodeError is a ValueError
        return _DECLINED
    if _COLON_COUNTER.encode(value).count(b":") != data.count(b":"):
        return _DECLINED
    return value


class _Slow(Exception):
    """A fast path declines the value; the general one answers for it."""


def json_value(
    value: object, path: str = "$", depth: int = 0, *, max_depth: int = MAX_DEPTH
) -> JsonValue:
    """Normalize a parsed or hand-built value to what RFC 8785 hashes, or say where it breaks.

    Every number must lie within I-JSON's ±(2^53-1), however it is spelled (``1e20`` as much
    as ``100000000000000000000``), and be what a double holds: one with more significant
    digits than that is refused rather than rounded. ``Decimal`` becomes ``int`` when whole,
    ``float`` otherwise.
    """
    try:
        plain: JsonValue = _plain_json(value, depth, max_depth)
    except _Slow:
        return _json_value(value, path, depth, max_depth=max_depth)
    return plain


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _plain_json(value: Any, depth: int, max_depth: int) -> Any:
    """:func:`_json_value` for the exact JSON types, keeping no path; :class:`_Slow` wherever
    it would raise, and for any other type (subclasses too), so that it says where."""
    if depth > max_depth:
        raise _Slow
    kind = type(value)
    if kind is dict:
        out: dict[str, Any] = {}
        depth += 1
        for key, item in value.items():
            if type(key) is not str or not (key.isascii() or _encodes(key)):
                raise _Slow
            if type(item) is str and item.isascii() and depth <= max_depth:
                out[key] = item  # the common leaf, without a call
            else:
                out[key] = _plain_json(item, depth, max_depth)
        return out
    if kind is list or kind is tuple:
        return [_plain_json(item, depth + 1, max_depth) for item in value]
    if kind is str:
        if value.isascii() or _encodes(value):
            return value
    elif value is None or kind is bool:
        return value
    elif kind is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
    elif kind is Decimal or kind is ExponentDecimal or kind is float:
        try:
            return _number(value, "$")
        except SchemaInvalid:
            raise _Slow from None
    raise _Slow


def _json_value(value: object, path: str, depth: int, *, max_depth: int) -> JsonValue:
    if depth > max_depth:
        raise SchemaInvalid("too deeply nested", errors=[FieldError(path, "nests too deeply")])
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise _beyond_i_json(path)
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
            _json_value(key, path, 0, max_depth=MAX_DEPTH)  # a key must be a valid string too
            out[key] = _json_value(item, f"{path}.{key}", depth + 1, max_depth=max_depth)
        return out
    if isinstance(value, list | tuple):
        return [
            _json_value(item, f"{path}[{i}]", depth + 1, max_depth=max_depth)
            for i, item in enumerate(value)
        ]
    raise SchemaInvalid(
        "not JSON", errors=[FieldError(path, f"{type(value).__name__} is not JSON")]
    )


def _beyond_i_json(path: str) -> SchemaInvalid:
    return SchemaInvalid("number out of range", errors=[FieldError(path, "beyond ±(2^53-1)")])


def _number(value: Decimal | float, path: str) -> int | float:
    as_decimal = Decimal(value) if isinstance(value, float) else value
    if not as_decimal.is_finite():
        raise SchemaInvalid("not a finite number", errors=[FieldError(path, "not finite")])
    # copy_abs, not abs(): abs() rounds to the context, which overflows past 1e999999.
    if as_decimal.copy_abs() > MAX_SAFE_INTEGER:
        raise _beyond_i_json(path)
    if as_decimal == as_decimal.to_integral_value():
        return int(as_decimal)
    as_float = float(as_decimal)
    if not as_float:
        raise SchemaInvalid(
            "number too small",
            errors=[FieldError(path, "is not 0, but a double rounds it to 0")],
        )
    if not isinstance(value, float) and Decimal(repr(as_float)) != as_decimal:
        # Hashed as the double, the number would silently stand for another one.
        raise SchemaInvalid(
            "number too precise",
            errors=[FieldError(path, "has more significant digits than a double holds")],
        )
    return as_float


_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
#: Non-integral doubles at least this large, and below 2^52 as every one is, are written by
#: ``orjson`` as ECMAScript writes them; from 1e-6 up to here it writes ``1e-6`` where
#: ECMAScript writes ``0.000001``.
_FIXED_FROM = 1e-5


def _jcs_ready(value: Any) -> Any:
    """``value`` as ``orjson`` spells in RFC 8785, or raise :class:`_Slow`.

    Returns ``value`` itself unless a whole float had to become an ``int``, in which case the
    containers on its path are copied. Exact types only: subclasses, ``Decimal`` and anything
    else go the slow way, which then raises whatever ``rfc8785`` raises. A cycle fails here with
    the ``RecursionError`` that ``rfc8785`` raises too.
    """
    kind = type(value)
    if kind is dict:
        copy: dict[str, Any] | None = None
        for key, item in value.items():
            if type(key) is not str or (not key.isascii() and _ASTRAL.search(key)):
                raise _Slow
            kind = type(item)
            if kind is str or item is None or kind is bool:
                continue  # the common leaves, without a call
            if kind is int and -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                continue
            ready = _jcs_ready(item)
            if ready is not item:
                if copy is None:
                    copy = dict(value)
                copy[key] = ready
        return value if copy is None else copy
    if kind is list or kind is tuple:
        converted: list[Any] | None = None
        for index, item in enumerate(value):
            ready = _jcs_ready(item)
            if ready is not item:
                if converted is None:
                    converted = list(value)
                converted[index] = ready
        return value if converted is None else converted
    if kind is str or value is None or kind is bool:
        return value
    if kind is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
    elif kind is float:
        if value.is_integer():
            if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
                return int(value)  # 340.0 -> 340, -0.0 -> 0
        elif _FIXED_FROM <= abs(value) < 1e16:  # the bound refuses the infinities; NaN fails both
            return value
    raise _Slow


def canonical_bytes(value: JsonValue) -> bytes:
    """RFC 8785 bytes of an already normalized value (see :func:`json_value`).

    Byte for byte what ``rfc8785.dumps`` gives, and the same error class for what it refuses.
    Values :func:`_jcs_ready` vouches for take ``orjson`` with its keys sorted, which then
    writes RFC 8785 exactly; anything else, and anything ``orjson`` refuses, takes the
    ``rfc8785`` package:

    - strings: ``orjson`` escapes ``"``, ``\\`` and the controls below U+0020 (``\\b \\t
      \\n \\f \\r``, the rest as lowercase ``\\u00xx``) and nothing else, as RFC 8785
      section 3.2.2.2 does; it refuses a lone surrogate, which then goes the slow way, which
      refuses it too;
    - keys: exact ``str``, sorted by code point, which is RFC 8785's UTF-16 order unless a key
      holds a character beyond U+FFFF: such objects go the slow way;
    - integers: the same decimal digits, within ±(2^53-1); beyond it the slow way refuses;
    - floats: a whole float within ±(2^53-1) becomes an ``int``, whose digits are ECMAScript's
      (``340.0`` is ``340``, ``-0.0`` is ``0``), where ``orjson`` would write ``340.0``. A
      non-integral double of magnitude at least 1e-5 is written by ``orjson`` with the
      shortest round-trip digits laid out as ECMAScript lays them out; below that, ``orjson``
      writes ``1e-6`` where ECMAScript writes ``0.000001``, so those go the slow way, as do
      larger whole floats (``1e+16`` against ``10000000000000000``), NaN and the infinities
      (which ``orjson`` would write as ``null``), all of them refused or written by
      ``rfc8785``.
    """
    try:
        return orjson.dumps(_jcs_ready(value), option=orjson.OPT_SORT_KEYS)
    except (_Slow, orjson.JSONEncodeError):
        return rfc8785.dumps(value)


def tagged_sha256(data: bytes) -> str:
    """``"sha256:" + hex``, the form every hash of this protocol takes on the wire."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def hash_canonical(value: JsonValue) -> str:
    return tagged_sha256(canonical_bytes(value))
