"""Golden vectors: bytes that other implementations must reproduce exactly.

Each expected value was checked by a second route (a literal JCS string hashed with hashlib,
a signature checked with ``cryptography`` directly) before it was frozen here.
"""

from __future__ import annotations

import base64
import hashlib
from datetime import timedelta
from decimal import Decimal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from oanp.wire.canonical import canonical_bytes, json_value, read_json
from oanp.wire.commitments import commit, encode_salt, reference_commit
from oanp.wire.machine import Negotiation
from tests.support.factories.sessions import (
    ARBITER,
    BUYER_COMMIT,
    ITEM,
    KEY,
    MERCHANT,
    MERCHANT_COMMIT,
    T0,
    envelope,
)

DEMO_CONSTRAINTS = {"budget_cap": 400, "true_ceiling": 420, "urgency": "medium"}
DEMO_ITEM = {"date": "2026-04-28", "route": "SFO-JFK"}


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_canonical_bytes_follow_rfc_8785():
    value = json_value(read_json('{"b": 339.99, "a": [1.0, 1e3, "é\\u0001"], "c": {"z": null}}'))
    assert canonical_bytes(value) == b'{"a":[1,1000,"\xc3\xa9\\u0001"],"b":339.99,"c":{"z":null}}'


def test_the_public_reference_commitment_vector():
    assert reference_commit(DEMO_CONSTRAINTS, DEMO_ITEM, 5) == "0xfd6b8b899c3e4309"


def test_the_salted_commitment_vector():
    salt = encode_salt(bytes(32))
    assert salt == "A" * 43
    literal = (
        '{"constraints":{"budget_cap":400,"true_ceiling":420,"urgency":"medium"},'
        '"item":{"date":"2026-04-28","route":"SFO-JFK"},"max_rounds":5,"salt":"' + salt + '"}'
    )
    expected = "sha256:b9dc96522fdee238a85218992518dc074790ec10d2b9f718559383930ffe6d4d"
    assert "sha256:" + hashlib.sha256(literal.encode()).hexdigest() == expected
    assert commit(DEMO_CONSTRAINTS, DEMO_ITEM, 5, salt) == expected
    # Decimal constraints commit to the same bytes as the integers they equal.
    decimals = {**DEMO_CONSTRAINTS, "budget_cap": Decimal("400.00")}
    assert commit(decimals, DEMO_ITEM, 5, salt) == expected


def golden_session():
    def at(seconds, kind, payload, mid, role=None):
        return envelope(kind, payload, message_id=mid, role=role), T0 + timedelta(seconds=seconds)

    negotiation, entries = Negotiation.open(
        envelope(
            "session.open",
            {
                "merchant_agent_id": MERCHANT,
                "item": ITEM,
                "currency": "USD",
                "max_rounds": 5,
                "constraints_commit": BUYER_COMMIT,
            },
            message_id="g1",
        ),
        received_at=T0,
        arbiter=ARBITER,
    )
    moves = [
        at(1, "session.ack", {"constraints_commit": MERCHANT_COMMIT}, "g2"),
        at(
            2, "offer.propose", {"round": 1, "price": 320, "constraints_commit": BUYER_COMMIT}, "g3"
        ),
        at(
            3,
            "offer.counter",
            {"round": 1, "price": 370, "constraints_commit": MERCHANT_COMMIT},
            "g4",
        ),
        at(
            4, "offer.propose", {"round": 2, "price": 340, "constraints_commit": BUYER_COMMIT}, "g5"
        ),
        at(
            5,
            "offer.accept",
            {"round": 2, "price": 340, "constraints_commit": MERCHANT_COMMIT},
            "g6",
            "merchant",
        ),
    ]
    for env, received_at in moves:
        entries += negotiation.feed(env, received_at=received_at)
    return entries


def test_the_first_entry_hash():
    first = golden_session()[0]
    literal = (
        '{"envelope":{"message_id":"g1","oanp_version":"0.1","payload":{"constraints_commit":"'
        + BUYER_COMMIT
        + '","currency":"USD","item":{"date":"2026-04-28","route":"SFO-JFK"},'
        '"max_rounds":5,"merchant_agent_id":"merchant-sfo"},"sender":{"agent_id":"buyer-001",'
        '"role":"buyer"},"session_id":"01JDB1P4W3X7Q9M2K8T6R5N0B0",'
        '"timestamp":"2026-04-28T14:00:00Z","type":"session.open"},'
        '"prev_hash":"sha256:' + "0" * 64 + '","received_at":"2026-04-28T14:00:00Z","seq":1}'
    )
    expected = "sha256:eeef09892be069d1a1e8fa50a6fbd78e5fd37be2d655d93d2fb84e42e4aae46c"
    assert "sha256:" + hashlib.sha256(literal.encode()).hexdigest() == expected
    assert first.entry_hash == expected


def test_the_chain_of_the_published_trace():
    hashes = [e.entry_hash.removeprefix("sha256:")[:16] for e in golden_session()]
    assert hashes == [
        "eeef09892be069d1",
        "b506816416918048",
        "0e1527d614078bd0",
        "8a1ece327819b866",
        "3e9bd08629312d62",
        "9e0192e42a9ac6da",
        "260495116f7236c8",
        "ece493a0cc4696b4",
        "164bad4225d9a3b8",
    ]


def test_the_signed_agreement_vector():
    agree = golden_session()[-1].envelope["payload"]
    assert agree["kid"] == KEY.kid == "1IG2tMH7J2wbJZnOf8LJzQitKf7LMvoAElsuDMVM54Y"
    assert agree["signature"] == (
        "eyJhbGciOiJFZDI1NTE5Iiwia2lkIjoiMUlHMnRNSDdKMndiSlpuT2Y4TEp6UWl0S2Y3TE12b0FFbHN1RE1WTTU0W"
        "SIsInR5cCI6Im9hbnAtYWdyZWVtZW50K2p3cyJ9..41I-BlWTjrkT4h6Wp2ANQY3oPQvx7RwDAOW5nn5Erelzodc1"
        "FH4Ifr-1WoiHIOxJxXg0NCaDnFbiSYR6Lt4wAg"
    )
    # Checked without joserfc: Ed25519 over b64url(header) + "." + b64url(JCS(agreement)).
    header, empty, signature = agree["signature"].split(".")
    assert empty == ""
    payload = base64.urlsafe_b64encode(canonical_bytes(agree["agreement"])).rstrip(b"=")
    public = Ed25519PublicKey.from_public_bytes(b64url_decode(KEY.public_jwk()["x"]))
    public.verify(b64url_decode(signature), header.encode() + b"." + payload)
    assert agree["agreement"]["session_digest"] == (
        "sha256:ece493a0cc4696b4ab4ccbb8407dbd92f5767b41ec88c7287cff89972a6ecda9"
    )
