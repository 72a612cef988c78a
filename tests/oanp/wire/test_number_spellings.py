"""Every JSON number, however spelled, is a value or a refusal naming its field, never a crash.

The readers of everything a client sends (docs/protocol.md §2): the strict reader itself and
the streamed one an audit bundle is read with, envelopes (an open ``item`` and a price),
reveals and signature headers. Each literal is checked against :func:`reading`, which judges
it from its digits and magnitude alone, so ``1e1000000000000000000`` costs nothing to judge.
The HTTP endpoints are fuzzed in tests/arbiter_app/test_number_spellings.py, ``oanp verify`` in
tests/oanp/net/test_cli.py.
"""

from __future__ import annotations

import base64
import io
import json
from decimal import Decimal
from typing import Any

import pytest
import rfc8785
from hypothesis import example, given, settings

from oanp.audit.jsonstream import PullReader, StreamError
from oanp.wire.canonical import ExponentDecimal, canonical_bytes, json_value, read_json
from oanp.wire.commitments import parse_reveal
from oanp.wire.envelope import parse_envelope
from oanp.wire.errors import FieldError, MalformedEnvelope, ProtocolError, SchemaInvalid
from oanp.wire.errors import SignatureMalformed as SignatureMalformedError
from oanp.wire.money import PRICE_CEILING
from oanp.wire.signing import verify_detached
from tests.support.factories.sessions import BUYER_COMMIT, ITEM, envelope_json
from tests.support.numbers import (
    FIELD_MESSAGES,
    LANDMARKS,
    NOT_NUMBERS,
    is_json_number,
    number_spellings,
    reading,
)

FUZZ = settings(max_examples=150, deadline=None)
MARK = '"@@number@@"'


def spelled(document: Any, literal: str) -> str:
    """``document`` as JSON text, with ``literal`` written where it holds :data:`MARK`."""
    text = json.dumps(document)
    assert text.count(MARK) == 1
    return text.replace(MARK, literal)


def landmarks(test: Any) -> Any:
    """Every landmark spelling and non-number, whatever Hypothesis draws besides."""
    for literal in (*LANDMARKS, *NOT_NUMBERS):
        test = example(literal=literal)(test)
    return test


def refused_at(err: SchemaInvalid, field: str, literal: str) -> None:
    """The refusal is :func:`reading`'s reason, at ``field``, and that field only (the
    envelope's reader gathers its fields' errors under a detail of its own)."""
    reason = reading(literal)
    assert isinstance(reason, str)
    assert err.detail in (reason, "envelope does not match the schema")
    assert err.errors == (FieldError(field, FIELD_MESSAGES[reason]),)


# The strict reader -----------------------------------------------------------------------------


@FUZZ
@landmarks
@given(literal=number_spellings())
def test_the_reader_takes_every_number_by_its_value_or_names_it(literal: str) -> None:
    document = '{"n": ' + literal + "}"
    if not is_json_number(literal):
        with pytest.raises(MalformedEnvelope):
            read_json(document)
        return
    read = read_json(document)  # valid JSON is always read, whatever its numbers
    if "e" in literal.lower():
        assert isinstance(read["n"], ExponentDecimal)  # prices refuse it by this type
    expected = reading(literal)
    if isinstance(expected, str):
        with pytest.raises(SchemaInvalid) as refused:
            json_value(read)
        refused_at(refused.value, "$.n", literal)
        return
    value = json_value(read)
    assert value == {"n": expected}
    assert type(value["n"]) is type(expected)
    assert canonical_bytes(value) == rfc8785.dumps({"n": expected})


def _streamed(document: str, chunk: int) -> list[Any]:
    """The items of a JSON array, read as an audit bundle is: piece by piece."""
    reader = PullReader(io.StringIO(document), chunk=chunk)
    reader.begin("[")
    items = []
    while reader.next_item():
        items.append(reader.value())
    reader.finish()
    return items


@FUZZ
@landmarks
@given(literal=number_spellings())
def test_the_streamed_reader_reads_a_number_as_the_reader_does(literal: str) -> None:
    """An audit bundle is read piece by piece: a number cut by a chunk's end reads whole."""
    document = "[" + literal + "]"
    for chunk in (1, 7, 4096):
        if not is_json_number(literal):
            with pytest.raises(StreamError):
                _streamed(document, chunk)
            continue
        (found,) = _streamed(document, chunk)
        (whole,) = read_json(document)
        assert (type(found), found) == (type(whole), whole)


# Envelopes ------------------------------------------------------------------------------------


def _open_with(literal: str) -> str:
    payload = {
        "merchant_agent_id": "merchant-sfo",
        "item": {**ITEM, "seats": json.loads(MARK)},
        "currency": "USD",
        "constraints_commit": BUYER_COMMIT,
    }
    return spelled(envelope_json("session.open", payload, message_id="b-0001"), literal)


@FUZZ
@landmarks
@given(literal=number_spellings())
def test_an_envelope_takes_any_number_in_its_item_or_names_it(literal: str) -> None:
    if not is_json_number(literal):
        with pytest.raises(MalformedEnvelope):
            parse_envelope(_open_with(literal))
        return
    expected = reading(literal)
    if isinstance(expected, str):
        with pytest.raises(SchemaInvalid) as refused:
            parse_envelope(_open_with(literal))
        refused_at(refused.value, "$.payload.item.seats", literal)
        return
    envelope = parse_envelope(_open_with(literal))
    assert envelope.body["payload"]["item"]["seats"] == expected  # type: ignore[index,call-overload]


@FUZZ
@landmarks
@given(literal=number_spellings())
def test_a_price_however_spelled_is_a_price_or_refused_at_the_price(literal: str) -> None:
    """§3: a price is a number without an exponent, 0 < price < 10^12, exactly a double."""
    payload = {"round": 1, "price": json.loads(MARK), "constraints_commit": BUYER_COMMIT}
    text = spelled(envelope_json("offer.propose", payload), literal)
    if not is_json_number(literal):
        with pytest.raises(MalformedEnvelope):
            parse_envelope(text)
        return
    value = reading(literal)
    if "e" in literal.lower() or isinstance(value, str) or not 0 < Decimal(literal) < PRICE_CEILING:
        with pytest.raises(SchemaInvalid) as refused:
            parse_envelope(text)
        assert [e.field for e in refused.value.errors] == ["$.payload.price"]
        return
    envelope = parse_envelope(text)
    assert envelope.payload.price == Decimal(literal)  # type: ignore[union-attr]
    assert envelope.body["payload"]["price"] == value  # type: ignore[index,call-overload]


# Reveals and signature headers -----------------------------------------------------------------


@FUZZ
@landmarks
@given(literal=number_spellings())
def test_a_reveal_takes_any_number_in_its_constraints_or_names_it(literal: str) -> None:
    body = spelled({"constraints": {"true_ceiling": json.loads(MARK)}, "salt": None}, literal)
    if not is_json_number(literal):
        with pytest.raises(MalformedEnvelope):
            parse_reveal(body)
        return
    expected = reading(literal)
    if isinstance(expected, str):
        with pytest.raises(SchemaInvalid) as refused:
            parse_reveal(body)
        refused_at(refused.value, "$.constraints.true_ceiling", literal)
        return
    assert parse_reveal(body).constraints == {"true_ceiling": expected}


def _b64url(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


@FUZZ
@landmarks
@given(literal=number_spellings())
def test_a_signature_header_holding_any_number_is_malformed(literal: str) -> None:
    header = '{"alg": "Ed25519", "kid": ' + literal + ', "typ": "oanp-agreement+jws"}'
    jws = _b64url(header) + ".." + _b64url("signature")
    with pytest.raises(SignatureMalformedError):
        verify_detached(jws, b"{}", {"keys": []}, typ="oanp-agreement+jws")


# The refusals themselves -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("literal", "detail", "message"),
    [
        ("1e1000000000000000000", "number out of range", "beyond ±(2^53-1)"),
        ("-1E+99999999999999999999", "number out of range", "beyond ±(2^53-1)"),
        ("1" + "0" * 5000, "number out of range", "beyond ±(2^53-1)"),
        ("1e-400", "number too small", "is not 0, but a double rounds it to 0"),
        (
            "-1e-1000000000000000000",
            "number too small",
            "is not 0, but a double rounds it to 0",
        ),
    ],
)
def test_a_refused_number_says_why_at_its_field(literal: str, detail: str, message: str) -> None:
    with pytest.raises(SchemaInvalid) as refused:
        json_value(read_json('{"a": [' + literal + "]}"))
    assert refused.value.detail == detail
    assert refused.value.errors == (FieldError("$.a[0]", message),)


@pytest.mark.parametrize("literal", ["0e1000000000000000000", "-0.000E-99999999999999999999", "-0"])
def test_a_zero_with_any_exponent_is_zero(literal: str) -> None:
    assert json_value(read_json(literal)) == 0
    assert canonical_bytes(json_value(read_json(literal))) == b"0"


def test_no_reader_lets_anything_but_a_protocol_error_escape() -> None:
    """The issue's body, in every reader of client JSON: a refusal, never ``decimal`` errors."""
    body = '{"a": 1e1000000000000000000}'
    for read in (
        lambda: json_value(read_json(body)),
        lambda: parse_envelope(body),
        lambda: parse_reveal(body),
    ):
        with pytest.raises(ProtocolError):
            read()
    assert isinstance(read_json(body)["a"], Decimal)
