"""The compiled reader answers exactly as the strict pure-Python one it falls back to.

``read_json`` reads with ``msgspec`` and leaves to ``read_json_strict`` every input whose
reading could differ. These tests run both on every body the suite refuses somewhere
(``refusals.jsonl``: collected from the tests of the wire, the audit and the API) and on
generated text built to find where they part (duplicate keys, numbers of every spelling,
escapes, surrogates, controls, nesting, broken bytes), and ``parse_envelope`` through each on
valid envelopes mutated field by field: the same value, types included, or the same error
class, code, detail and field errors.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import oanp.wire.canonical as canonical
import oanp.wire.envelope as envelope_module
from oanp.wire.canonical import read_json, read_json_strict
from oanp.wire.envelope import Envelope, parse_envelope
from oanp.wire.errors import ProtocolError
from tests.support.factories.logs import SFO_JFK, session_log

CORPUS = Path(__file__).with_name("refusals.jsonl")


def _body(record: dict[str, Any]) -> bytes | str:
    raw = bytes.fromhex(record["hex"]) if "hex" in record else record["text"].encode()
    return raw.decode("utf-8", "surrogatepass") if record.get("as_str") else raw


REFUSED = [_body(json.loads(line)) for line in CORPUS.read_text().splitlines()]


def typed(value: Any) -> list[Any]:
    """``value`` with every type spelled out, as a flat list (nesting too deep for recursion
    reads fine): ``1``, ``1.0``, ``Decimal("1.0")``, ``True`` and an ``ExponentDecimal`` all
    stay apart."""
    out: list[Any] = []
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            out.append(("dict", len(item)))
            for key, member in reversed(item.items()):
                pending += [member, key]
        elif isinstance(item, list | tuple):
            out.append((type(item).__name__, len(item)))
            pending += reversed(item)
        else:
            out.append((type(item).__name__, repr(item)))
    return out


def refusal(exc: ProtocolError) -> Any:
    return ("refused", type(exc), exc.code, exc.detail, exc.errors)


def reading(read: Callable[[bytes | str], Any], data: bytes | str) -> Any:
    try:
        return typed(read(data))
    except ProtocolError as exc:
        return refusal(exc)


def envelope_reading(data: bytes | str) -> Any:
    try:
        parsed: Envelope = parse_envelope(data)
    except ProtocolError as exc:
        return refusal(exc)
    return (repr(parsed), typed(parsed.body))


@contextmanager
def strict_only() -> Iterator[None]:
    """``parse_envelope`` with the compiled reader out of the way."""
    with mock.patch.object(envelope_module, "read_json", read_json_strict):
        yield


@contextmanager
def strict_calls() -> Iterator[list[object]]:
    """Each input ``read_json`` leaves to the strict reader, while the block runs."""
    calls: list[object] = []

    def counted(data: bytes | str) -> Any:
        calls.append(data)
        return read_json_strict(data)

    with mock.patch.object(canonical, "read_json_strict", counted):
        yield calls


def same_reading(data: bytes | str) -> None:
    assert reading(read_json, data) == reading(read_json_strict, data)


def same_envelope(data: bytes | str) -> None:
    fast = envelope_reading(data)
    with strict_only():
        assert fast == envelope_reading(data)


# The corpus of refusals ----------------------------------------------------------------------


def test_the_corpus_holds_refusals_of_every_kind() -> None:
    readings = [reading(read_json_strict, data) for data in REFUSED]
    refused = {r[3].split(":")[0] for r in readings if r[0] == "refused"}
    assert {"body is not UTF-8", "JSON nests too deeply", "body is not valid JSON"} <= refused
    assert any("duplicate key" in r[3] for r in readings if r[0] == "refused")
    envelopes = [envelope_reading(data) for data in REFUSED]
    assert sum(r[0] == "refused" and r[2] == "schema_invalid" for r in envelopes) > 100


@pytest.mark.parametrize("data", REFUSED, ids=range(len(REFUSED)))
def test_every_refused_body_reads_alike(data: bytes | str) -> None:
    same_reading(data)
    same_envelope(data)


def test_valid_envelopes_take_the_compiled_reader() -> None:
    bodies = [json.dumps(entry["envelope"]).encode() for entry in session_log(SFO_JFK)]
    with strict_calls() as calls:
        for body in bodies:
            parse_envelope(body)
    assert not calls


@pytest.mark.parametrize(
    "data",
    [
        b'{"a":1,"a":1}',
        b'{"a":{"b":1},"c":{"b":2,"b":3}}',
        b'{"a:":1,"a:":1}',
        b'{"a":"x","a":":"}',
        b'{"a":1,"a":"\\u003a"}',
        b'{"a":1, "a" : 2}',
        b"[" * 300 + b"]" * 300,
        b'"\\ud800"',
        b"1" + b"0" * 5000,
        b"\xef\xbb\xbf{}",
    ],
)
def test_what_the_compiled_reader_cannot_decide_goes_to_the_strict_one(data: bytes) -> None:
    with strict_calls() as calls:
        same_reading(data)
    assert calls == [data]


# Generated text ------------------------------------------------------------------------------

WHITESPACE = st.sampled_from(["", "", " ", "\n", "\t", "\r\n ", "\x0c", "\u00a0"])
KEYS = st.one_of(
    st.sampled_from(["a", "b", "a:", ":", "type", "payload", "", "é", "😀", "\\u003a"]),
    st.text(max_size=4),
)
DIGITS = st.text("0123456789", min_size=1, max_size=25)
NUMBERS = st.one_of(
    st.integers().map(str),
    st.sampled_from(
        [
            "9007199254740991",
            "-9007199254740991",
            "9007199254740992",
            "-9007199254740992",
            "18446744073709551616",
            "1" + "0" * 4300,
            "1" + "0" * 4299,
            "-" + "9" * 4300,
            "-0",
            "-0.0",
            "0e0",
            "1e400",
            "1e-400",
            "0e999999999999999999999",
            "1E+2",
            "3.4e2",
            "340.50",
            "1.",
            ".5",
            "01",
            "+1",
            "1e",
            "-",
            "NaN",
            "Infinity",
            "-Infinity",
        ]
    ),
    st.tuples(
        st.sampled_from(["", "-"]),
        DIGITS,
        st.sampled_from(["", ".", "e", "E+", "e-"]),
        st.sampled_from(["", "0", "5", "123"]),
    ).map("".join),
)
ESCAPES = st.sampled_from(
    [
        "\\n",
        "\\t",
        '\\"',
        "\\\\",
        "\\/",
        "\\b",
        "\\f",
        "\\r",
        "\\u0000",
        "\\u001f",
        "\\u003a",
        "\\u003A",
        "\\u00e9",
        "\\ud800",
        "\\udfff",
        "\\ud83d\\ude00",
        "\\ude00\\ud83d",
        "\\x",
        "\\u12",
        "\\U0041",
    ]
)
RAW_CHARACTERS = st.sampled_from(["a", ":", ",", "{", "[", "\x00", "\x1f", "\x7f", "é", "\ud800"])
STRINGS = st.lists(st.one_of(ESCAPES, RAW_CHARACTERS, st.text(max_size=3)), max_size=5).map(
    lambda parts: '"' + "".join(parts) + '"'
)
SCALARS = st.one_of(NUMBERS, STRINGS, st.sampled_from(["true", "false", "null", "tru", "nul"]))


def _object(members: list[tuple[str, str]], ws: str) -> str:
    return "{" + ws + ",".join(f"{json.dumps(k)}{ws}:{ws}{v}" for k, v in members) + ws + "}"


VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5).map(lambda items: "[" + ",".join(items) + "]"),
        st.tuples(st.lists(st.tuples(KEYS, inner), max_size=5), WHITESPACE).map(
            lambda drawn: _object(*drawn)
        ),
    ),
    max_leaves=25,
)


def _spelled(text: str, as_bytes: bool) -> bytes | str:
    return text.encode("utf-8", "surrogatepass") if as_bytes else text


@st.composite
def documents(draw: st.DrawFn) -> bytes | str:
    """JSON-ish text; now and then nested past any limit, cut short or with a byte broken."""
    text = draw(WHITESPACE) + draw(VALUES) + draw(WHITESPACE)
    depth = draw(st.sampled_from([0, 0, 0, 2, 64, 255, 257, 1000]))
    text = "[" * depth + text + "]" * depth
    data = _spelled(text, draw(st.booleans()))
    if isinstance(data, bytes) and data and draw(st.integers(0, 4)) == 0:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1 :]
    if data and draw(st.integers(0, 6)) == 0:
        data = data[: draw(st.integers(0, len(data) - 1))]
    return data


@settings(max_examples=1500, deadline=None)
@given(documents())
def test_generated_text_reads_alike(data: bytes | str) -> None:
    same_reading(data)


# Valid envelopes, mutated field by field -----------------------------------------------------

ENVELOPES = [entry["envelope"] for entry in session_log(SFO_JFK)]


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*path, index))


def _mutated(document: Any, path: tuple[Any, ...], change: str, text: str) -> str:
    """``document`` as JSON text with the value at ``path`` replaced by ``text``, dropped, or
    its member written twice (``change``)."""
    if not path:
        return text
    *parents, last = path
    holder = document
    for step in parents:
        holder = holder[step]
    marker = "\u0000MUTATED\u0000"
    if change == "drop":
        del holder[last]
    elif change == "twice" and isinstance(holder, dict):
        rest = json.dumps(holder[last])
        holder[last] = marker
        return json.dumps(document).replace(json.dumps(marker), f"{rest},{json.dumps(last)}:{text}")
    else:
        holder[last] = marker
    return json.dumps(document).replace(json.dumps(marker), text)


@st.composite
def mutated_envelopes(draw: st.DrawFn) -> bytes | str:
    document = json.loads(json.dumps(draw(st.sampled_from(ENVELOPES))))
    path = draw(st.sampled_from(list(_paths(document))))
    change = draw(st.sampled_from(["replace", "replace", "drop", "twice"]))
    text = _mutated(document, path, change, draw(VALUES))
    return _spelled(text, draw(st.booleans()))


@settings(max_examples=1500, deadline=None)
@given(mutated_envelopes())
def test_mutated_envelopes_parse_alike(data: bytes | str) -> None:
    same_reading(data)
    same_envelope(data)
