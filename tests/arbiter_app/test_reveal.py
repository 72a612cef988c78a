"""Revealing constraints after the end (docs/protocol.md §10): the reveal must open the party's
commitment, comes once, only after the end, only from a party."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from django.core.cache import cache

from arbiter_app.models import Session
from oanp.agents.vaults import BuyerVault
from oanp.wire.commitments import encode_salt
from tests.support.factories.agents import Agent, ClientNegotiation, make_agent, post

pytestmark = pytest.mark.django_db

SESSION = "sess-sfo-jfk"
REVEAL = f"/oanp/v0.1/sessions/{SESSION}/reveal"
#: What the buyer of factories.sfo_jfk_agents committed to, known here without its agent.
BUYER_REVEAL = {
    "constraints": BuyerVault(
        true_ceiling=Decimal(420), budget_cap=Decimal(400), urgency="medium"
    ).constraints(),
    "salt": encode_salt(b"\x01" * 32),
}


@pytest.fixture(autouse=True)
def _fresh_throttle() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def running(client: Any, buyer: Agent, merchant: Agent) -> ClientNegotiation:
    run = ClientNegotiation(client, buyer, merchant)
    run.open()
    run.run_until("offer.counter")
    return run


@pytest.fixture
def ended(running: ClientNegotiation) -> ClientNegotiation:
    running.finish()
    assert Session.objects.get(session_id=SESSION).phase == "AGREED"
    return running


def reveals() -> str:
    return Session.objects.get(session_id=SESSION).reveals


def refused(client: Any, agent: Agent | None, body: Any, status: int, code: str) -> None:
    before = reveals()
    response = post(client, agent, body, path=REVEAL)
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/problem+json"
    assert json.loads(response.content)["code"] == code
    assert reveals() == before


def test_each_party_opens_its_commitment_after_the_end(
    client: Any, ended: ClientNegotiation
) -> None:
    assert ended.buyer.reveal() == BUYER_REVEAL
    for key, agent in ((ended.buyer_key, ended.buyer), (ended.merchant_key, ended.merchant)):
        response = post(client, key, agent.reveal(), path=REVEAL)
        assert response.status_code == 200, response.content
        assert json.loads(response.content) == {
            "session_id": SESSION,
            "role": key.role,
            "opens": True,
            "weak_commitment": False,
            "breaches": [],
        }
    summary = json.loads(
        client.get(f"/oanp/v0.1/sessions/{SESSION}", headers=ended.buyer_key.headers).content
    )
    assert summary["buyer"]["revealed"] is True
    assert summary["merchant"]["revealed"] is True
    stored = json.loads(reveals())
    assert stored["buyer"]["constraints"] == BUYER_REVEAL["constraints"]


def test_revealing_before_the_end_is_too_early(
    client: Any, running: ClientNegotiation, buyer: Agent
) -> None:
    refused(client, buyer, BUYER_REVEAL, 409, "reveal_too_early")


def test_a_merchant_that_left_before_it_committed_has_nothing_to_reveal(
    client: Any, buyer: Agent, merchant: Agent
) -> None:
    run = ClientNegotiation(client, buyer, merchant)
    run.open()
    withdraw = {
        "oanp_version": "0.1",
        "message_id": "merchant-leaves",
        "session_id": SESSION,
        "timestamp": "2026-04-28T14:00:00Z",
        "sender": {"role": "merchant", "agent_id": merchant.agent_id},
        "type": "session.close",
        "payload": {"reason": "withdrawn", "constraints_commit": "sha256:" + "c" * 64},
    }
    assert post(client, merchant, withdraw).status_code == 201
    assert Session.objects.get(session_id=SESSION).close_reason == "withdrawn_by_merchant"
    merchant_reveal = {"constraints": {"floor_price": 280}, "salt": encode_salt(b"\x02" * 32)}
    refused(client, merchant, merchant_reveal, 409, "nothing_committed")
    # The buyer, who committed at open, still may.
    assert post(client, buyer, BUYER_REVEAL, path=REVEAL).status_code == 200


def test_revealing_twice_is_refused(client: Any, ended: ClientNegotiation, buyer: Agent) -> None:
    assert post(client, buyer, BUYER_REVEAL, path=REVEAL).status_code == 200
    refused(client, buyer, BUYER_REVEAL, 409, "already_revealed")


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({**BUYER_REVEAL, "salt": encode_salt(b"\x09" * 32)}, id="wrong-salt"),
        pytest.param(
            {**BUYER_REVEAL, "constraints": {**BUYER_REVEAL["constraints"], "true_ceiling": 421}},
            id="wrong-ceiling",
        ),
        pytest.param(
            {"constraints": {"floor_price": 280, "ideal_price": 400}, "salt": BUYER_REVEAL["salt"]},
            id="the-other-sides-shape",
        ),
    ],
)
def test_a_reveal_that_does_not_open_the_commitment(
    client: Any, ended: ClientNegotiation, buyer: Agent, body: dict[str, Any]
) -> None:
    refused(client, buyer, body, 422, "reveal_mismatch")
    # The buyer may still reveal correctly afterwards.
    assert post(client, buyer, BUYER_REVEAL, path=REVEAL).status_code == 200


def test_a_missing_salt_does_not_open_a_salted_commitment(
    client: Any, ended: ClientNegotiation, buyer: Agent
) -> None:
    # salt may be null only for the reference 0x commitment; this one is salted.
    refused(client, buyer, {"constraints": BUYER_REVEAL["constraints"]}, 422, "reveal_mismatch")


def test_a_party_cannot_reveal_with_the_other_partys_values(
    client: Any, ended: ClientNegotiation, merchant: Agent
) -> None:
    refused(client, merchant, BUYER_REVEAL, 422, "reveal_mismatch")


def test_a_non_party_sees_no_session(client: Any, ended: ClientNegotiation) -> None:
    stranger = make_agent("buyer-003", "buyer")
    refused(client, stranger, BUYER_REVEAL, 404, "unknown_session")
    refused(client, None, BUYER_REVEAL, 401, "unauthorized")


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"\xff\xfe", "malformed_json"),
        (b"{", "malformed_json"),
        (b"[]", "schema_invalid"),
        ({"salt": BUYER_REVEAL["salt"]}, "schema_invalid"),
        ({**BUYER_REVEAL, "salt": 7}, "schema_invalid"),
        ({**BUYER_REVEAL, "note": "trust me"}, "schema_invalid"),
        ({**BUYER_REVEAL, "constraints": "420"}, "schema_invalid"),
    ],
)
def test_a_malformed_reveal_is_a_bad_request(
    client: Any, ended: ClientNegotiation, buyer: Agent, body: Any, code: str
) -> None:
    refused(client, buyer, body, 400, code)


def test_an_oversize_reveal_is_refused(client: Any, ended: ClientNegotiation, buyer: Agent) -> None:
    padded = {**BUYER_REVEAL, "constraints": {**BUYER_REVEAL["constraints"], "pad": "x" * 70_000}}
    refused(client, buyer, padded, 413, "envelope_too_large")


def test_a_reveal_that_shows_a_broken_limit_is_kept_as_evidence(
    client: Any, running: ClientNegotiation, buyer: Agent
) -> None:
    # Round 2: the buyer offers 430, above its own ceiling of 420. Its agent would never do
    # that, so the envelope is edited by hand; the arbiter cannot know until the reveal.
    running.run_until("offer.propose", 340)
    key, propose = running.outbox.popleft()
    over = {**propose, "payload": {**propose["payload"], "price": 430}}
    assert post(client, key, over).status_code == 201
    running.catch_up()
    running.finish()
    assert Session.objects.get(session_id=SESSION).ended_at is not None
    response = post(client, buyer, BUYER_REVEAL, path=REVEAL)
    assert response.status_code == 200, response.content
    answer = json.loads(response.content)
    assert answer["opens"] is True
    assert len(answer["breaches"]) == 1
    assert "430" in answer["breaches"][0]
    assert json.loads(reveals())["buyer"]["breaches"] == answer["breaches"]
