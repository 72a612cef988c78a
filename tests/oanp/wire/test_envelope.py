"""The parser: every field checked, every bad field named, nothing but ProtocolError escapes."""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oanp.wire.canonical import canonical_bytes, hash_canonical, json_value, read_json
from oanp.wire.envelope import (
    MAX_ENVELOPE_BYTES,
    MessageType,
    Offer,
    Open,
    parse_envelope,
    parse_timestamp,
)
from oanp.wire.errors import ProtocolError
from oanp.wire.log import entry_hash_of
from oanp.wire.machine import Negotiation
from tests.support.factories.sessions import ARBITER, opening

COMMIT = "sha256:" + "a" * 64


def body(**changes):
    envelope = {
        "oanp_version": "0.1",
        "message_id": "01JDB1P4W3X7Q9M2K8T6R5N0AZ",
        "session_id": "01JDB1P4W3X7Q9M2K8T6R5N0B0",
        "timestamp": "2026-04-28T14:00:00Z",
        "sender": {"role": "buyer", "agent_id": "buyer-001"},
        "type": "offer.propose",
        "payload": {"round": 1, "price": 320, "constraints_commit": COMMIT},
    }
    envelope.update(changes)
    return envelope


def wire(value) -> bytes:
    return json.dumps(value).encode()


def refusal(data) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        parse_envelope(data)
    return caught.value


def test_a_valid_propose_parses_to_exact_decimals():
    env = parse_envelope(
        b'{"oanp_version":"0.1","message_id":"m","session_id":"s",'
        b'"timestamp":"2026-04-28T14:00:00.5Z","sender":{"role":"buyer",'
        b'"agent_id":"b"},"type":"offer.propose","payload":{"round":1,'
        b'"price":339.99,"constraints_commit":"' + COMMIT.encode() + b'"}}'
    )
    assert env.type is MessageType.OFFER_PROPOSE
    assert env.payload == Offer(1, Decimal("339.99"), COMMIT)
    assert env.timestamp.microsecond == 500000


def test_open_defaults_are_applied_but_the_logged_body_is_what_was_sent():
    sent = body(
        type="session.open",
        payload={
            "merchant_agent_id": "m-1",
            "item": {"sku": "A1"},
            "currency": "JPY",
            "constraints_commit": "0xfd6b8b899c3e4309",
        },
    )
    env = parse_envelope(wire(sent))
    assert isinstance(env.payload, Open)
    assert (env.payload.max_rounds, env.payload.profile, env.payload.response_window_s) == (
        5,
        "default/v0.1",
        300,
    )
    assert "max_rounds" not in env.body["payload"]


@pytest.mark.parametrize(
    ("data", "code", "status"),
    [
        (b"", "malformed_json", 400),
        (b"\xff\xfe", "malformed_json", 400),
        (b"[1,2]", "schema_invalid", 400),
        (b'{"a":1,"a":2}', "malformed_json", 400),
        (b'{"x": NaN}', "malformed_json", 400),
        (b"1" * 5000, "schema_invalid", 400),  # JSON past int()'s digit limit: not an object
        (b"[" * 100_000, "envelope_too_large", 413),
        (b"[" * 60_000, "malformed_json", 400),  # too deep to even read
        (b" " * (MAX_ENVELOPE_BYTES + 1), "envelope_too_large", 413),
    ],
)
def test_unreadable_bytes(data, code, status):
    err = refusal(data)
    assert (err.code, err.status) == (code, status)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"oanp_version": "0.2"}, "$.oanp_version"),
        ({"message_id": ""}, "$.message_id"),
        ({"message_id": "a" * 65}, "$.message_id"),
        ({"message_id": "has space"}, "$.message_id"),
        ({"session_id": 7}, "$.session_id"),
        ({"timestamp": "2026-04-28T14:00:00+02:00"}, "$.timestamp"),
        ({"timestamp": "2026-02-30T14:00:00Z"}, "$.timestamp"),
        ({"sender": {"role": "auditor", "agent_id": "x"}}, "$.sender.role"),
        ({"sender": {"role": "buyer", "agent_id": "b", "name": "x"}}, "$.sender.name"),
        ({"type": "offer.haggle"}, "$.type"),
        ({"extra": 1}, "$.extra"),
        ({"payload": {"round": 0, "price": 320, "constraints_commit": COMMIT}}, "$.payload.round"),
        ({"payload": {"round": 21, "price": 320, "constraints_commit": COMMIT}}, "$.payload.round"),
        (
            {"payload": {"round": True, "price": 320, "constraints_commit": COMMIT}},
            "$.payload.round",
        ),
        ({"payload": {"round": 1, "price": 0, "constraints_commit": COMMIT}}, "$.payload.price"),
        ({"payload": {"round": 1, "price": -5, "constraints_commit": COMMIT}}, "$.payload.price"),
        (
            {"payload": {"round": 1, "price": 10**12, "constraints_commit": COMMIT}},
            "$.payload.price",
        ),
        (
            {"payload": {"round": 1, "price": "320", "constraints_commit": COMMIT}},
            "$.payload.price",
        ),
        (
            {"payload": {"round": 1, "price": 320, "constraints_commit": "sha256:xyz"}},
            "$.payload.constraints_commit",
        ),
        ({"payload": {"round": 1, "price": 320}}, "$.payload.constraints_commit"),
        (
            {"payload": {"round": 1, "price": 320, "constraints_commit": COMMIT, "note": "hi"}},
            "$.payload.note",
        ),
    ],
)
def test_each_bad_field_is_named(changes, field):
    err = refusal(wire(body(**changes)))
    assert (err.code, err.status) == ("schema_invalid", 400)
    assert field in [e.field for e in err.errors]


def test_every_bad_field_is_named_at_once():
    err = refusal(wire(body(message_id="", session_id="", payload={"round": 0})))
    fields = {e.field for e in err.errors}
    assert {
        "$.message_id",
        "$.session_id",
        "$.payload.round",
        "$.payload.price",
        "$.payload.constraints_commit",
    } <= fields


def test_exponent_notation_is_refused_for_prices():
    data = wire(body()).replace(b'"price": 320', b'"price": 3.2e2')
    err = refusal(data)
    assert [e.field for e in err.errors] == ["$.payload.price"]
    assert "exponent" in err.errors[0].message


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"blob": "x" * 5000}, "4096 bytes"),
        ({"n": 2**60}, "2^53"),
        ({"deep": json.loads("[" * 20 + "]" * 20)}, "deep"),
        ("SFO-JFK", "object"),
    ],
)
def test_items_are_bounded(item, message):
    err = refusal(
        wire(
            body(
                type="session.open",
                payload={
                    "merchant_agent_id": "m",
                    "item": item,
                    "currency": "USD",
                    "constraints_commit": COMMIT,
                },
            )
        )
    )
    assert any(message in e.message for e in err.errors), err.errors


def opening_with_number(literal: str) -> bytes:
    """A session.open whose item holds one number, written exactly as ``literal``."""
    opening = wire(
        body(
            type="session.open",
            payload={
                "merchant_agent_id": "m",
                "item": {"n": 0},
                "currency": "USD",
                "constraints_commit": COMMIT,
            },
        )
    )
    return opening.replace(b'"n": 0', b'"n": ' + literal.encode())


@pytest.mark.parametrize(
    "spelling",
    ["100000000000000000000", "1e20", "1E20", "100000000000000000000.0", "9007199254740992"],
)
def test_a_number_beyond_i_json_is_refused_however_it_is_spelled(spelling):
    err = refusal(opening_with_number(spelling))
    assert [(e.field, e.message) for e in err.errors] == [("$.payload.item.n", "beyond ±(2^53-1)")]


@pytest.mark.parametrize("spelling", ["0.10000000000000000001", "1.00000000000000000000001"])
def test_a_number_a_double_cannot_hold_is_refused_not_rounded(spelling):
    err = refusal(opening_with_number(spelling))
    assert [e.field for e in err.errors] == ["$.payload.item.n"]
    assert "more significant digits" in err.errors[0].message


@pytest.mark.parametrize("currency", ["usd", "XAU", "ABC", 840])
def test_currencies_are_iso_4217(currency):
    err = refusal(
        wire(
            body(
                type="session.open",
                payload={
                    "merchant_agent_id": "m",
                    "item": {},
                    "currency": currency,
                    "constraints_commit": COMMIT,
                },
            )
        )
    )
    assert [e.field for e in err.errors] == ["$.payload.currency"]


def test_a_party_close_must_say_withdrawn():
    err = refusal(
        wire(
            body(
                type="session.close",
                payload={"reason": "max_rounds_reached", "constraints_commit": COMMIT},
            )
        )
    )
    assert [e.field for e in err.errors] == ["$.payload.reason"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_arbitrary_json_only_ever_raises_protocol_errors(value):
    with contextlib.suppress(ProtocolError):
        parse_envelope(json.dumps(value).encode())


@settings(max_examples=400)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_only_ever_raise_protocol_errors(data):
    with contextlib.suppress(ProtocolError):
        parse_envelope(data)


field_paths = st.sampled_from(
    [
        ("message_id",),
        ("session_id",),
        ("timestamp",),
        ("sender",),
        ("sender", "role"),
        ("sender", "agent_id"),
        ("type",),
        ("payload",),
        ("payload", "round"),
        ("payload", "price"),
        ("payload", "constraints_commit"),
        ("oanp_version",),
    ]
)


@settings(max_examples=400)
@given(field_paths, json_values, st.sampled_from([t.value for t in MessageType]))
def test_a_valid_envelope_with_one_field_replaced_never_crashes(path, value, kind):
    envelope = body(type=kind)
    target = envelope
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    try:
        parsed = parse_envelope(wire(envelope))
    except ProtocolError:
        return
    assert parsed.body == json.loads(json.dumps(parsed.body))


# Leap seconds (RFC 3339 §5.6-5.7) --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ("2026-12-31T23:59:60Z", datetime(2027, 1, 1, tzinfo=UTC)),
        ("2016-12-31t23:59:60.25z", datetime(2017, 1, 1, 0, 0, 0, 250000, tzinfo=UTC)),
        ("2026-06-30T23:59:60+00:00", datetime(2026, 7, 1, tzinfo=UTC)),
        ("2028-02-29T23:59:60Z", datetime(2028, 3, 1, tzinfo=UTC)),
    ],
)
def test_a_leap_second_reads_as_the_first_instant_of_the_next_month(text, read):
    assert parse_timestamp(text) == read
    assert parse_timestamp(text) > parse_timestamp(text[:17] + "59.999999Z")


def test_a_leap_second_is_kept_as_sent_in_the_body_its_hash_covers():
    sent = body(timestamp="2026-12-31T23:59:60Z")
    env = parse_envelope(wire(sent))
    assert env.timestamp == datetime(2027, 1, 1, tzinfo=UTC)
    assert env.body == sent
    assert b'"timestamp":"2026-12-31T23:59:60Z"' in canonical_bytes(env.body)
    assert hash_canonical(env.body) == hash_canonical(json_value(read_json(wire(sent))))


def test_a_deadline_on_a_leap_second_is_a_deadline_at_the_next_month():
    received = datetime(2026, 4, 30, 12, 0, tzinfo=UTC)
    negotiation, entries = Negotiation.open(
        opening(deadline="2026-04-30T23:59:60Z"), received_at=received, arbiter=ARBITER
    )
    assert negotiation.state.deadline == datetime(2026, 5, 1, tzinfo=UTC)
    (entry,) = [e for e in entries if e.type == "session.open"]
    assert entry.envelope["payload"]["deadline"] == "2026-04-30T23:59:60Z"  # type: ignore[index]
    assert entry_hash_of(entry.as_json()) == entry.entry_hash


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2026-12-31T12:59:60Z", "which only a leap second has"),
        ("2026-12-31T23:58:60Z", "which only a leap second has"),
        ("2026-12-30T23:59:60Z", "which only a leap second has"),
        ("2027-02-28T23:59:59Z", None),
        ("2026-12-31T23:59:61Z", "is not a real date and time"),
        ("2027-02-29T23:59:60Z", "is not a real date and time"),
        ("9999-12-31T23:59:60Z", "is past the last second a timestamp may name"),
    ],
)
def test_second_60_is_refused_where_no_leap_second_falls(text, message):
    if message is None:
        parse_envelope(wire(body(timestamp=text)))  # the day before a leap second may fall
        return
    err = refusal(wire(body(timestamp=text)))
    assert [(e.field, message in e.message) for e in err.errors] == [("$.timestamp", True)]
