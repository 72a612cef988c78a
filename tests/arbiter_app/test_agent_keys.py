"""§12 over HTTP: an agent registers, lists and retires the keys it signs with; a signed
session's every party entry carries its signature, which an outside JOSE library verifies with
the keys the API publishes; a signature that does not stand for its sender, or none where the
owner requires one, is refused 422 and logs nothing; an envelope signed again and sent again is a
replay."""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from django.test import Client
from django.utils import timezone
from jwcrypto import jwk as outside_jwk
from jwcrypto import jws as outside_jws

from arbiter_app import selectors, services
from arbiter_app.models import AgentKey, Entry, Session
from oanp.audit import verify_bundle_stream
from oanp.net import cli
from oanp.wire.party_signatures import sign_envelope, signing_input
from oanp.wire.signing import SigningKey
from tests.support.factories.agents import (
    SFO_JFK_ITEM,
    Agent,
    ClientNegotiation,
    make_agent,
    now,
    post,
)

pytestmark = pytest.mark.django_db

AGENT_KEYS = "/oanp/v0.1/agent-keys"
BUYER_KEY = SigningKey.from_ed25519_seed(bytes(range(32)))
MERCHANT_KEY = SigningKey(ec.derive_private_key(11, ec.SECP256R1()))


@pytest.fixture
def buyer() -> Agent:
    return make_agent("buyer-001", "buyer")


@pytest.fixture
def merchant() -> Agent:
    return make_agent("merchant-sfo", "merchant")


def register(client: Client, agent: Agent, jwk: Any) -> Any:
    return post(client, agent, jwk, AGENT_KEYS)


def keys_of(client: Client, asker: Agent, agent_id: str) -> list[dict[str, Any]]:
    response = client.get(f"/oanp/v0.1/agents/{agent_id}/keys", headers=asker.headers)
    assert response.status_code == 200, response.content
    return response.json()["keys"]


def signed_negotiation(client: Client, buyer: Agent, merchant: Agent) -> ClientNegotiation:
    for agent, key in ((buyer, BUYER_KEY), (merchant, MERCHANT_KEY)):
        assert register(client, agent, key.public_jwk()).status_code == 201
    signers = {buyer.agent_id: BUYER_KEY, merchant.agent_id: MERCHANT_KEY}
    return ClientNegotiation(client, buyer, merchant, "sess-signed", "s-", signers=signers)


def problem(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content
    body = response.json()
    assert body["code"] == code
    return body


def test_an_agent_registers_lists_and_retires_its_keys(client: Client, buyer, merchant) -> None:
    registered = register(client, buyer, BUYER_KEY.public_jwk())
    assert registered.status_code == 201
    assert registered.json()["kid"] == BUYER_KEY.kid
    again = register(client, buyer, {k: BUYER_KEY.public_jwk()[k] for k in ("kty", "crv", "x")})
    assert again.status_code == 200
    assert again.json()["registered_at"] == registered.json()["registered_at"]

    # Any agent's key reads any agent's keys: they are public, for checking signatures.
    (listed,) = keys_of(client, merchant, buyer.agent_id)
    assert listed == {
        **BUYER_KEY.public_jwk(),
        "registered_at": registered.json()["registered_at"],
        "retired_at": None,
    }
    assert keys_of(client, merchant, "nobody") == []

    retired = post(client, buyer, b"", f"{AGENT_KEYS}/{BUYER_KEY.kid}/retire")
    assert retired.status_code == 200
    assert retired.json()["retired_at"] is not None
    assert keys_of(client, buyer, buyer.agent_id)[0]["retired_at"] == retired.json()["retired_at"]
    # Registered again, a retired key stays retired, and the answer says so.
    again = register(client, buyer, BUYER_KEY.public_jwk())
    assert again.status_code == 200
    assert again.json()["retired_at"] == retired.json()["retired_at"]
    # Retiring is once: the first moment stands.
    twice = post(client, buyer, b"", f"{AGENT_KEYS}/{BUYER_KEY.kid}/retire")
    assert twice.json()["retired_at"] == retired.json()["retired_at"]
    # Another agent cannot retire it, nor name a kid it never registered.
    problem(
        post(client, merchant, b"", f"{AGENT_KEYS}/{BUYER_KEY.kid}/retire"),
        404,
        "unknown_agent_key",
    )


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (json.dumps(BUYER_KEY.private_jwk()), 400, "private_key_sent"),
        (json.dumps({**BUYER_KEY.public_jwk(), "kid": "mine"}), 400, "bad_party_key"),
        (json.dumps({"kty": "RSA", "n": "AQAB", "e": "AQAB"}), 400, "bad_party_key"),
        (json.dumps([BUYER_KEY.public_jwk()]), 400, "bad_party_key"),
        ('{"kty": "OKP", "kty": "OKP"}', 400, "malformed_json"),
        ("not json", 400, "malformed_json"),
    ],
    ids=["private", "wrong-kid", "rsa", "a-list", "duplicate-member", "not-json"],
)
def test_a_key_that_cannot_be_registered_is_refused_and_nothing_is_kept(
    client: Client, buyer, body: str, status: int, code: str
) -> None:
    problem(register(client, buyer, body), status, code)
    assert not AgentKey.objects.exists()


def test_registering_needs_a_live_key(client: Client) -> None:
    problem(
        client.post(
            AGENT_KEYS, data=json.dumps(BUYER_KEY.public_jwk()), content_type="application/json"
        ),
        401,
        "unauthorized",
    )


def test_every_party_entry_of_a_signed_session_verifies_with_an_outside_library(
    client: Client, buyer, merchant
) -> None:
    negotiation = signed_negotiation(client, buyer, merchant)
    negotiation.open()
    log = negotiation.finish()
    assert log[-1]["envelope"]["type"] == "session.agree"
    published = {
        agent.agent_id: {k["kid"]: k for k in keys_of(client, buyer, agent.agent_id)}
        for agent in (buyer, merchant)
    }
    party_entries = [e for e in log if e["envelope"]["sender"]["role"] != "arbiter"]
    assert len(party_entries) >= 5
    for entry in party_entries:
        envelope = entry["envelope"]
        header_b64, _, signature_b64 = envelope["signature"].split(".")
        header = json.loads(base64.urlsafe_b64decode(header_b64 + "=="))
        key = published[envelope["sender"]["agent_id"]][header["kid"]]
        payload = base64.urlsafe_b64encode(signing_input(envelope)).rstrip(b"=").decode()
        token = outside_jws.JWS()
        token.deserialize(f"{header_b64}.{payload}.{signature_b64}")
        token.allowed_algs = [header["alg"]]
        token.verify(
            outside_jwk.JWK(
                **{k: v for k, v in key.items() if k not in ("registered_at", "retired_at")}
            )
        )
    assert not any("signature" in e["envelope"] for e in log if e not in party_entries)


def next_signed(negotiation: ClientNegotiation) -> tuple[Agent, dict[str, Any]]:
    key, envelope = negotiation.peek()
    return key, sign_envelope(envelope, negotiation.signers[key.agent_id])


def refused_and_nothing_logged(client: Client, key: Agent, body: Any, code: str) -> None:
    before = Entry.objects.count()
    problem(post(client, key, body), 422, code)
    assert Entry.objects.count() == before


def test_a_signature_that_does_not_stand_for_its_sender_is_refused(
    client: Client, buyer, merchant
) -> None:
    negotiation = signed_negotiation(client, buyer, merchant)
    negotiation.open()
    key, signed = next_signed(negotiation)  # the merchant's ack
    tampered = {
        **signed,
        "payload": {**signed["payload"], "constraints_commit": "sha256:" + "b" * 64},
    }
    refused_and_nothing_logged(client, key, tampered, "bad_signature")
    # Signed with the buyer's key: a kid the merchant never registered.
    as_buyer = sign_envelope(signed, BUYER_KEY)
    refused_and_nothing_logged(client, key, as_buyer, "bad_signature")
    malformed = {**signed, "signature": "e30..AAAA"}
    refused_and_nothing_logged(client, key, malformed, "bad_signature")

    services.retire_agent_key(agent_id=merchant.agent_id, kid=MERCHANT_KEY.kid)
    body = problem(post(client, key, signed), 422, "bad_signature")
    assert "retired" in body["detail"]
    assert Entry.objects.filter(session__session_id="sess-signed").count() == 1


def test_an_owner_may_require_signatures(client: Client, buyer, merchant) -> None:
    signed_negotiation(client, buyer, merchant)  # the keys registered
    services.require_signatures(agent_id=buyer.agent_id, required=True)
    unsigned = ClientNegotiation(client, buyer, merchant, "sess-unsigned", "u-")
    opening = unsigned.buyer.open(
        session_id="sess-unsigned",
        merchant_agent_id=merchant.agent_id,
        item=SFO_JFK_ITEM,
        currency="USD",
        now=now(),
    )
    refused_and_nothing_logged(client, buyer, opening, "signature_required")
    assert post(client, buyer, sign_envelope(opening, BUYER_KEY)).status_code == 201

    services.require_signatures(agent_id=buyer.agent_id, required=False)
    ClientNegotiation(client, buyer, merchant, "sess-other", "o-").open()  # unsigned, taken


def test_an_envelope_signed_again_and_sent_again_is_a_replay(
    client: Client, buyer, merchant
) -> None:
    negotiation = signed_negotiation(client, buyer, merchant)
    negotiation.open()
    key, envelope = negotiation.peek()  # the merchant's ack, signed with ES256 each time
    first = post(client, key, sign_envelope(envelope, MERCHANT_KEY))
    assert first.status_code == 201
    logged = Entry.objects.count()
    again = post(client, key, sign_envelope(envelope, MERCHANT_KEY))
    assert again.status_code == 200
    assert again.json() == first.json()
    assert Entry.objects.count() == logged
    # Unsigned, the same envelope is the same move too.
    assert post(client, key, envelope).status_code == 200


def test_a_requirement_set_mid_session_holds_from_the_next_envelope(
    client: Client, buyer, merchant
) -> None:
    negotiation = ClientNegotiation(client, buyer, merchant, "sess-mid", "m-")
    negotiation.open()  # unsigned: nothing required yet
    assert register(client, merchant, MERCHANT_KEY.public_jwk()).status_code == 201
    services.require_signatures(agent_id=merchant.agent_id, required=True)
    key, ack = negotiation.peek()
    refused_and_nothing_logged(client, key, ack, "signature_required")
    assert post(client, key, sign_envelope(ack, MERCHANT_KEY)).status_code == 201


def test_keys_are_read_only_for_an_agent_id(client: Client, buyer) -> None:
    response = client.get("/oanp/v0.1/agents/no%20such%20id/keys", headers=buyer.headers)
    assert problem(response, 400, "schema_invalid")["errors"][0]["field"] == "agent_id"


def test_an_export_and_a_downloaded_log_carry_the_keys_their_signatures_need(
    client: Client, buyer, merchant, tmp_path
) -> None:
    negotiation = signed_negotiation(client, buyer, merchant)
    negotiation.open()
    negotiation.finish()
    ClientNegotiation(client, buyer, merchant, "sess-plain", "p-").open()  # unsigned

    out = io.BytesIO()
    writer = selectors.audit_bundle_writer(out, sessions=Session.objects.order_by("session_id"))
    for _, log in selectors.logs_of(Session.objects.order_by("session_id")):
        writer.add(log)
    writer.finish(created_at=timezone.now())
    bundle = json.loads(out.getvalue())
    assert set(bundle["party_keys"]) == {buyer.agent_id, merchant.agent_id}
    report = verify_bundle_stream(io.StringIO(out.getvalue().decode()))
    assert report.ok, [c.line() for c in report.checks if not c.ok]
    assert report.signed_entries == report.signed_valid > 0

    session = Session.objects.get(session_id="sess-signed")
    path = tmp_path / "log.json"
    path.write_text(selectors.log_text(session, with_keys=True), encoding="utf-8")
    lines = io.StringIO()
    assert cli.verify(path, jwks_path=None, since_path=None, out=lines) == 0
    assert f"signed entries: {report.signed_entries}/{report.signed_entries} valid" in (
        lines.getvalue()
    )
