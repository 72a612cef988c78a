"""§12's party signatures in the core: what a party signs, the keys it may register, and the
check of a signed envelope against its sender's keys, in force when it was received. Every
signature is also checked by jwcrypto, an outside JOSE library."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from jwcrypto import jwk as outside_jwk
from jwcrypto import jws as outside_jws

from oanp.wire.canonical import canonical_bytes
from oanp.wire.envelope import parse_envelope
from oanp.wire.errors import BadPartyKey, BadSignature, PrivateKeySent, SchemaInvalid
from oanp.wire.party_signatures import (
    ENVELOPE_TYP,
    PartyKey,
    check_party_signature,
    registrable_key,
    sign_envelope,
    signing_input,
    unsigned,
)
from oanp.wire.signing import SigningKey

REGISTERED = datetime(2026, 4, 1, tzinfo=UTC)
RECEIVED = datetime(2026, 4, 28, 9, 0, tzinfo=UTC)
ED25519 = SigningKey.from_ed25519_seed(bytes(range(32)))
ES256 = SigningKey(ec.derive_private_key(7, ec.SECP256R1()))


def offer(agent_id: str = "buyer-001", role: str = "buyer") -> dict[str, object]:
    return {
        "oanp_version": "0.1",
        "message_id": "m-1",
        "session_id": "sess-1",
        "timestamp": "2026-04-28T09:00:00Z",
        "sender": {"role": role, "agent_id": agent_id},
        "type": "offer.propose",
        "payload": {"round": 1, "price": 300, "constraints_commit": "sha256:" + "a" * 64},
    }


def key_of(signer: SigningKey, agent_id: str = "buyer-001", **span: datetime) -> PartyKey:
    span.setdefault("registered_at", REGISTERED)
    return PartyKey(agent_id, registrable_key(signer.public_jwk()), **span)


@pytest.mark.parametrize("signer", [ED25519, ES256], ids=["Ed25519", "ES256"])
def test_a_signed_envelope_verifies_here_and_with_an_outside_library(signer: SigningKey) -> None:
    body = sign_envelope(offer(), signer)
    envelope = parse_envelope(json.dumps(body))
    assert envelope.signed
    assert envelope.body["signature"] == body["signature"]
    assert check_party_signature(envelope.body, [key_of(signer)], RECEIVED) == signer.kid

    header_b64, empty, signature_b64 = str(body["signature"]).split(".")
    assert empty == ""
    header = json.loads(base64.urlsafe_b64decode(header_b64 + "=="))
    assert header == {"alg": signer.alg, "kid": signer.kid, "typ": ENVELOPE_TYP}
    # The outside library gets the payload re-attached: JCS of the envelope without signature.
    payload = base64.urlsafe_b64encode(signing_input(body)).rstrip(b"=").decode()
    token = outside_jws.JWS()
    token.deserialize(f"{header_b64}.{payload}.{signature_b64}")
    token.allowed_algs = ["Ed25519" if signer.alg == "Ed25519" else "ES256", "EdDSA"]
    token.verify(outside_jwk.JWK(**signer.public_jwk()))
    assert token.payload == canonical_bytes(unsigned(body))


def test_the_signed_bytes_leave_the_signature_out_and_a_new_one_replaces_the_old() -> None:
    once = sign_envelope(offer(), ES256)
    twice = sign_envelope(once, ES256)
    assert signing_input(once) == signing_input(twice) == canonical_bytes(offer())
    assert once["signature"] != twice["signature"]  # ES256 draws a nonce per signature
    assert check_party_signature(twice, [key_of(ES256)], RECEIVED) == ES256.kid


def tampered(body: dict[str, object]) -> dict[str, object]:
    payload = dict(body["payload"])  # type: ignore[call-overload]
    payload["price"] = 299
    return {**body, "payload": payload}


def other_agents(body: dict[str, object]) -> dict[str, object]:
    return sign_envelope({**body, "sender": {"role": "buyer", "agent_id": "buyer-002"}}, ED25519)


@pytest.mark.parametrize(
    ("change", "keys", "says"),
    [
        (tampered, [key_of(ED25519)], "does not verify"),
        (lambda b: b, [key_of(ES256)], "is not a key agent 'buyer-001' registered"),
        (lambda b: b, [key_of(ED25519, "buyer-002")], "is not a key agent 'buyer-001'"),
        (other_agents, [key_of(ED25519)], "is not a key agent 'buyer-002'"),
        (
            lambda b: b,
            [key_of(ED25519, registered_at=RECEIVED + timedelta(seconds=1))],
            "was registered only at",
        ),
        (
            lambda b: b,
            [key_of(ED25519, retired_at=RECEIVED - timedelta(seconds=1))],
            "was retired at",
        ),
        (lambda b: b, [key_of(ED25519, retired_at=RECEIVED)], "was retired at"),
        (lambda b: {**b, "signature": "not.a.jws"}, [key_of(ED25519)], "malformed"),
        (lambda b: unsigned(b), [key_of(ED25519)], "no signature"),
    ],
    ids=[
        "tampered",
        "unknown-kid",
        "kid-of-another-agent",
        "signed-as-another-agent",
        "registered-after",
        "retired-before",
        "retired-at-that-moment",
        "malformed",
        "unsigned",
    ],
)
def test_a_signature_that_does_not_stand_for_its_sender_is_refused(
    change, keys: list[PartyKey], says: str
) -> None:
    body = change(sign_envelope(offer(), ED25519))
    with pytest.raises(BadSignature, match=says) as refused:
        check_party_signature(body, keys, RECEIVED)
    assert (refused.value.code, refused.value.status) == ("bad_signature", 422)


def test_a_key_is_registered_public_named_by_its_thumbprint() -> None:
    jwk = {k: v for k, v in ES256.public_jwk().items() if k in ("kty", "crv", "x", "y")}
    assert registrable_key(jwk) == ES256.public_jwk()
    assert registrable_key(ED25519.public_jwk())["kid"] == ED25519.kid


@pytest.mark.parametrize(
    ("jwk", "refusal", "says"),
    [
        (ED25519.private_jwk(), PrivateKeySent, "private member"),
        ({**ES256.public_jwk(), "d": "x"}, PrivateKeySent, "d"),
        ("a string", BadPartyKey, "a JSON object"),
        ({"kty": "RSA", "n": "AQAB", "e": "AQAB"}, BadPartyKey, "only OKP and EC"),
        ({**ED25519.public_jwk(), "crv": "X25519"}, BadPartyKey, "curve"),
        ({**ED25519.public_jwk(), "x": "AAAA"}, BadPartyKey, "usable"),
        ({**ES256.public_jwk(), "y": ES256.public_jwk()["x"]}, BadPartyKey, "usable"),
        ({**ED25519.public_jwk(), "kid": "mine"}, BadPartyKey, "'kid' should be"),
        ({**ED25519.public_jwk(), "alg": "ES256"}, BadPartyKey, "'alg' should be"),
        ({**ED25519.public_jwk(), "use": "enc"}, BadPartyKey, "'use' should be"),
    ],
    ids=[
        "private",
        "private-member",
        "not-an-object",
        "rsa",
        "x25519",
        "short-x",
        "off-curve",
        "kid",
        "alg",
        "use",
    ],
)
def test_a_key_that_cannot_be_registered_is_refused_with_its_code(
    jwk: object, refusal: type[Exception], says: str
) -> None:
    with pytest.raises(refusal, match=says) as refused:
        registrable_key(jwk)
    assert refused.value.status == 400  # type: ignore[attr-defined]


def test_only_a_party_signs_and_a_signature_is_a_bounded_string() -> None:
    verdict = {
        **offer("arbiter", "arbiter"),
        "message_id": "sess-1/v1",
        "type": "session.close",
        "payload": {"reason": "deadline", "detail": "", "round": 1},
    }
    with pytest.raises(SchemaInvalid) as refused:
        parse_envelope(
            json.dumps({**verdict, "signature": sign_envelope(offer(), ED25519)["signature"]})
        )
    assert any(e.field == "$.signature" for e in refused.value.errors)
    for bad in (None, 7, "x" * 1025):
        with pytest.raises(SchemaInvalid) as refused:
            parse_envelope(json.dumps({**offer(), "signature": bad}))
        assert [e.field for e in refused.value.errors] == ["$.signature"]
