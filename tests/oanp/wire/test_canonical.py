"""``canonical_bytes`` against the reference ``rfc8785`` package: the same bytes or the same error.

``canonical_bytes`` takes ``orjson`` when that already spells RFC 8785, and the ``rfc8785``
package otherwise; these tests hold it to the package byte for byte, on the values
where the two encoders could part: floats of every magnitude, integers at the I-JSON edge,
every kind of character, and keys that sort differently by code point and by UTF-16.
"""

from __future__ import annotations

import math
import struct
import sys
from decimal import Decimal
from enum import IntEnum, StrEnum
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from oanp.wire.canonical import (
    MAX_DEPTH,
    MAX_SAFE_INTEGER,
    ExponentDecimal,
    _json_value,
    canonical_bytes,
    json_value,
)
from oanp.wire.errors import SchemaInvalid


def same_as_reference(value: Any) -> None:
    """``canonical_bytes(value)`` is ``rfc8785.dumps(value)``, or fails with the same class."""
    try:
        expected: bytes | BaseException = rfc8785.dumps(value)
    except Exception as exc:  # the reference refuses: so must we, with the same error
        expected = exc
    if isinstance(expected, bytes):
        assert canonical_bytes(value) == expected
    else:
        with pytest.raises(type(expected)):
            canonical_bytes(value)


# Strategies --------------------------------------------------------------------------------------


def _from_bits(bits: int) -> float:
    value: float = struct.unpack("<d", struct.pack("<Q", bits))[0]
    return value


def _near(edge: float) -> st.SearchStrategy[float]:
    """Doubles a few steps either side of ``edge``, of either sign."""
    return st.tuples(st.integers(-4, 4), st.booleans()).map(
        lambda drawn: _step(edge, drawn[0]) * (-1 if drawn[1] else 1)
    )


def _step(edge: float, steps: int) -> float:
    for _ in range(abs(steps)):
        edge = math.nextafter(edge, math.inf if steps > 0 else -math.inf)
    return edge


#: Where the encoders' layouts part or could: ECMAScript's switch to exponents below 1e-6 and
#: from 1e21, orjson's below 1e-5, whole floats from 1e16, the I-JSON edge, the subnormals.
EDGES = (1e-7, 1e-6, 1e-5, 1e-4, 1e16, 1e21, float(MAX_SAFE_INTEGER), 2.0**53, 5e-324, 2.2e-308)

#: Every double: any bit pattern (subnormals, huge values, NaN, infinities), plus the usual draws.
doubles = st.one_of(
    st.sampled_from(EDGES).flatmap(_near),
    st.floats(min_value=1e-6, max_value=1e-5),
    st.floats(),
    st.integers(0, 2**64 - 1).map(_from_bits),
    st.integers(-(2**60), 2**60).map(float),  # whole floats, beyond 2^53 too
    st.sampled_from([1e-7, 1e-6, 1e-5, 1e-4, 1e15, 1e16, 1e20, 1e21, 5e-324, 2.0**53]),
    st.floats(min_value=1e-8, max_value=1e-3),
    st.floats(min_value=1e14, max_value=1e23),
)
integers = st.one_of(
    st.integers(),
    st.integers(MAX_SAFE_INTEGER - 3, MAX_SAFE_INTEGER + 3),
    st.integers(-MAX_SAFE_INTEGER - 3, -MAX_SAFE_INTEGER + 3),
)
#: Every category, astral characters, the BMP just under the surrogates' neighbours, controls.
texts = st.one_of(
    st.text(),
    st.text(st.characters(codec="utf-8")),
    st.text(st.characters(min_codepoint=0, max_codepoint=0x7F)),
    st.text(st.characters(min_codepoint=0xE000, max_codepoint=0x10FFFF)),
    st.text(st.sampled_from('a\x00\x01\x1f\x7f\b\t\n\f\r"\\/\u2028\u2029\ue000\uffff😀\U0010ffff')),
    st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=2),
)
keys = st.one_of(texts, st.sampled_from(["a", "\ue000", "\uffff", "😀", "\U00010000", "a😀"]))
scalars = st.one_of(st.none(), st.booleans(), integers, doubles, texts)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6),
        st.lists(inner, max_size=6).map(tuple),
        st.dictionaries(keys, inner, max_size=6),
    ),
    max_leaves=40,
)


# Properties --------------------------------------------------------------------------------------


@settings(deadline=None)
@given(json_values)
def test_arbitrary_values_canonicalize_as_the_reference_does(value: Any) -> None:
    same_as_reference(value)


@settings(max_examples=1000, deadline=None)
@given(doubles)
def test_every_double_alone_and_inside_containers(number: float) -> None:
    same_as_reference(number)
    same_as_reference([number, {"x": number}])


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(keys, st.integers(0, 9), max_size=8))
def test_keys_sort_by_utf16_code_units(value: dict[str, int]) -> None:
    same_as_reference(value)
    same_as_reference({"outer": value})


@settings(max_examples=300, deadline=None)
@given(st.decimals(allow_nan=False, allow_infinity=False))
def test_decimals_normalized_by_json_value_canonicalize_as_the_reference_does(
    number: Decimal,
) -> None:
    holds = abs(number) <= MAX_SAFE_INTEGER and (
        number == number.to_integral_value() or Decimal(repr(float(number))) == number
    )
    try:
        value = json_value({"price": number})
    except SchemaInvalid:
        # Beyond I-JSON's range, or more digits than a double holds: refused, never rounded.
        assert not holds
        return
    assert holds
    same_as_reference(value)


# Edges -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (340.0, b"340"),
        (-0.0, b"0"),
        (0.0, b"0"),
        (1e21, b"1e+21"),
        (1e20, b"100000000000000000000"),
        (1e16, b"10000000000000000"),
        (2.0**53, b"9007199254740992"),
        (1e-7, b"1e-7"),
        (1e-6, b"0.000001"),
        (-1.5e-6, b"-0.0000015"),
        (9.99e-6, b"0.00000999"),
        (1.5e-5, b"0.000015"),
        (1e-4, b"0.0001"),
        (5e-324, b"5e-324"),
        (1.7976931348623157e308, b"1.7976931348623157e+308"),
        (0.1 + 0.2, b"0.30000000000000004"),
        (339.99, b"339.99"),
        (-123.456, b"-123.456"),
        (MAX_SAFE_INTEGER, b"9007199254740991"),
        (-MAX_SAFE_INTEGER, b"-9007199254740991"),
        (True, b"true"),
        (None, b"null"),
        ("\u2028\u2029\x7f/é😀", '"\u2028\u2029\x7f/é😀"'.encode()),
        ('\b\t\n\f\r\x00\x1f"\\', b'"\\b\\t\\n\\f\\r\\u0000\\u001f\\"\\\\"'),
        ({"b": [1.0, {}], "a": []}, b'{"a":[],"b":[1,{}]}'),
        (("x", 2.5), b'["x",2.5]'),
    ],
)
def test_edges(value: Any, expected: bytes) -> None:
    assert canonical_bytes(value) == expected
    same_as_reference(value)


def test_keys_with_astral_characters_sort_by_utf16() -> None:
    # By code point: "a" < "\ue000" < "😀" (U+1F600); by UTF-16: "😀" is D83D DE00, below E000.
    value = {"\ue000": 2, "a": 1, "\U0001f600": 3}
    assert canonical_bytes(value) == '{"a":1,"😀":3,"\ue000":2}'.encode()
    same_as_reference(value)
    same_as_reference({"k": [value]})


@pytest.mark.parametrize(
    "value",
    [
        MAX_SAFE_INTEGER + 1,
        -MAX_SAFE_INTEGER - 1,
        [2**64],
        math.nan,
        math.inf,
        {"x": -math.inf},
        "\ud800",
        {1: "non-string key"},
        Decimal("1.5"),
        {"x": object()},
    ],
)
def test_what_the_reference_refuses_is_refused_alike(value: Any) -> None:
    with pytest.raises(rfc8785.CanonicalizationError):
        rfc8785.dumps(value)
    same_as_reference(value)


def test_a_lone_surrogate_in_a_key_is_refused_alike() -> None:
    with pytest.raises(UnicodeEncodeError):  # from its UTF-16 sort key, before its encoder
        rfc8785.dumps({"\udfff": 1})
    same_as_reference({"\udfff": 1})
    same_as_reference({"a": {"\ud800x": 1}})


def test_deep_nesting_fails_as_the_reference_does() -> None:
    value: Any = []
    for _ in range(sys.getrecursionlimit() + 10):
        value = [value]
    same_as_reference(value)


# json_value: its fast path and its general one ------------------------------------------------


def typed(value: Any) -> Any:
    """``value`` with every type spelled out, so ``1``, ``1.0`` and ``True`` stay apart."""
    if isinstance(value, dict):
        return ("dict", [(typed(k), typed(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [typed(v) for v in value])
    return (type(value).__name__, repr(value))


class Tag(StrEnum):
    A = "a"


class Level(IntEnum):
    HIGH = 3


parsed_values = st.recursive(
    st.one_of(
        scalars,
        st.decimals(allow_nan=False, allow_infinity=False),
        st.decimals(),
        st.sampled_from([Decimal("1e400"), ExponentDecimal("3.4e2"), Tag.A, Level.HIGH, b"x"]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.lists(inner, max_size=5).map(tuple),
        st.dictionaries(st.one_of(keys, st.sampled_from([Tag.A, 1])), inner, max_size=5),
    ),
    max_leaves=30,
)


def general(value: Any, max_depth: int) -> Any:
    try:
        return typed(_json_value(value, "$", 0, max_depth=max_depth))
    except SchemaInvalid as exc:
        return ("refused", str(exc), exc.errors)


@settings(deadline=None)
@given(parsed_values, st.sampled_from([0, 1, 2, 3, MAX_DEPTH]))
def test_json_value_answers_as_its_general_path(value: Any, max_depth: int) -> None:
    try:
        fast = typed(json_value(value, max_depth=max_depth))
    except SchemaInvalid as exc:
        fast = ("refused", str(exc), exc.errors)
    assert fast == general(value, max_depth)
