"""Every refusal of docs/protocol.md §14: its status, its stable code, problem+json, and a log
left exactly as it was. Then the order of the machine's checks, where two faults meet in one
request; the edge's, up to the rate limit, are test_edge's."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from arbiter_app import services
from arbiter_app.models import AgentCredential, Entry, Session
from tests.support.api import problem, records, refused, variant
from tests.support.factories.agents import (
    ENVELOPES,
    Agent,
    ClientNegotiation,
    make_agent,
    now,
    post,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_throttle")]

SESSION = "sess-sfo-jfk"


@pytest.fixture
def third_buyer(db: None) -> Agent:
    return make_agent("buyer-003", "buyer")


# 401 -----------------------------------------------------------------------------------------


def test_no_key_is_unauthorized_and_creates_no_session(client: Any, buyer: Agent) -> None:
    run = ClientNegotiation(client, buyer, make_agent("merchant-sfo", "merchant"))
    opening = run.buyer.open(
        session_id="sess-new",
        merchant_agent_id="merchant-sfo",
        item={"route": "SFO-JFK"},
        currency="USD",
        now=now(),
    )
    before = records()
    response = post(client, None, opening)
    problem(response, 401, "unauthorized")
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert records() == before
    assert not Session.objects.filter(session_id="sess-new").exists()


@pytest.mark.parametrize(
    "header",
    [
        "Bearer oanp_000000000000_not-a-key",
        "Bearer not-even-shaped-like-a-key",
        "Basic dXNlcjpwYXNz",
        "Bearer ",
    ],
)
def test_an_unknown_key_is_unauthorized(
    client: Any, negotiation: ClientNegotiation, header: str
) -> None:
    _, propose = negotiation.peek()
    before = records()
    response = client.post(
        ENVELOPES,
        data=json.dumps(propose),
        content_type="application/json",
        headers={"Authorization": header},
    )
    problem(response, 401, "unauthorized")
    assert records() == before


def test_a_revoked_key_is_unauthorized(client: Any, negotiation: ClientNegotiation) -> None:
    key, propose = negotiation.peek()
    credential = AgentCredential.objects.get(agent_id=key.agent_id)
    services.revoke_credential(credential=credential)
    refused(client, key, propose, 401, "unauthorized")
    problem(client.get(f"/oanp/v0.1/sessions/{SESSION}", headers=key.headers), 401, "unauthorized")


# 403 -----------------------------------------------------------------------------------------


def test_another_agents_key_is_a_sender_mismatch(
    client: Any, negotiation: ClientNegotiation, merchant: Agent, third_buyer: Agent
) -> None:
    _, propose = negotiation.peek()
    refused(client, merchant, propose, 403, "sender_mismatch")
    refused(client, third_buyer, propose, 403, "sender_mismatch")


def test_a_key_of_the_same_agent_id_in_another_role_is_a_sender_mismatch(
    client: Any, negotiation: ClientNegotiation
) -> None:
    _, propose = negotiation.peek()
    impostor = make_agent("buyer-001", "merchant")
    refused(client, impostor, propose, 403, "sender_mismatch")


def test_a_registered_buyer_is_not_a_party_of_someone_elses_session(
    client: Any, negotiation: ClientNegotiation, third_buyer: Agent
) -> None:
    _, propose = negotiation.peek()
    intruding = variant(propose, "intruder-1")
    intruding["sender"]["agent_id"] = third_buyer.agent_id
    refused(client, third_buyer, intruding, 403, "not_a_party")


def test_another_merchant_is_not_a_party(client: Any, negotiation: ClientNegotiation) -> None:
    other = make_agent("merchant-lax", "merchant")
    _, propose = negotiation.peek()
    counter = variant(propose, "other-merchant-1", price=360)
    counter["type"] = "offer.counter"
    counter["sender"] = {"role": "merchant", "agent_id": other.agent_id}
    refused(client, other, counter, 403, "not_a_party")


# 404 -----------------------------------------------------------------------------------------


def test_an_unknown_session_is_not_found(
    client: Any, negotiation: ClientNegotiation, buyer: Agent
) -> None:
    _, propose = negotiation.peek()
    elsewhere = variant(propose, "elsewhere-1")
    elsewhere["session_id"] = "sess-nowhere"
    refused(client, buyer, elsewhere, 404, "unknown_session")
    assert not Session.objects.filter(session_id="sess-nowhere").exists()


@pytest.mark.parametrize("tail", ["", "/log"])
def test_a_session_is_invisible_to_a_non_party(
    client: Any, negotiation: ClientNegotiation, third_buyer: Agent, tail: str
) -> None:
    path = f"/oanp/v0.1/sessions/{SESSION}{tail}"
    problem(client.get(path, headers=third_buyer.headers), 404, "unknown_session")
    problem(
        client.get(f"/oanp/v0.1/sessions/sess-nowhere{tail}", headers=third_buyer.headers),
        404,
        "unknown_session",
    )
    assert client.get(path, headers=negotiation.buyer_key.headers).status_code == 200


def test_the_summary_needs_a_key(client: Any, negotiation: ClientNegotiation) -> None:
    problem(client.get(f"/oanp/v0.1/sessions/{SESSION}/log"), 401, "unauthorized")


@pytest.mark.parametrize("key", [False, True])
def test_a_browser_gets_the_problem_as_json_not_an_html_page(
    client: Any, negotiation: ClientNegotiation, third_buyer: Agent, key: bool
) -> None:
    """What a browser asks for (HTML first) still gets problem+json, and its body is that."""
    headers = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    if key:
        headers |= third_buyer.headers
    answer = client.get(f"/oanp/v0.1/sessions/{SESSION}", headers=headers)
    problem(answer, 404 if key else 401, "unknown_session" if key else "unauthorized")
    assert not answer.content.lstrip().startswith(b"<")


# 409 -----------------------------------------------------------------------------------------


def test_a_move_out_of_turn_is_a_conflict(
    client: Any, negotiation: ClientNegotiation, merchant: Agent
) -> None:
    _, propose = negotiation.peek()
    counter = variant(propose, "early-counter", price=370)
    counter["type"] = "offer.counter"
    counter["sender"] = {"role": "merchant", "agent_id": merchant.agent_id}
    counter["payload"]["constraints_commit"] = negotiation.merchant.commitment
    refused(client, merchant, counter, 409, "out_of_turn")


def test_a_propose_before_the_ack_is_out_of_turn(
    client: Any, buyer: Agent, merchant: Agent
) -> None:
    run = ClientNegotiation(client, buyer, merchant)
    run.open()
    assert run.peek()[1]["type"] == "session.ack"
    propose = {
        **run.peek()[1],
        "message_id": "too-soon",
        "sender": {"role": "buyer", "agent_id": buyer.agent_id},
        "type": "offer.propose",
        "payload": {"round": 1, "price": 300, "constraints_commit": run.buyer.commitment},
    }
    refused(client, buyer, propose, 409, "out_of_turn")


def test_a_move_in_a_terminal_session_is_a_conflict(
    client: Any, negotiation: ClientNegotiation, buyer: Agent
) -> None:
    _, propose = negotiation.peek()
    negotiation.finish()
    assert Session.objects.get(session_id=SESSION).phase == "AGREED"
    late = variant(propose, "after-the-end", round=3, price=350)
    refused(client, buyer, late, 409, "session_terminal")


def test_a_reused_session_id_is_a_conflict(
    client: Any, negotiation: ClientNegotiation, buyer: Agent, third_buyer: Agent
) -> None:
    opening = json.loads(Entry.objects.get(seq=1).envelope)
    stolen = variant(opening, "open-again")
    stolen["sender"]["agent_id"] = third_buyer.agent_id
    refused(client, third_buyer, stolen, 409, "session_exists")
    # The same buyer, with a new message id, cannot open it twice either.
    refused(client, buyer, variant(opening, "open-twice"), 409, "session_exists")


def test_a_reused_message_id_with_another_body_is_a_conflict(
    client: Any, negotiation: ClientNegotiation, buyer: Agent, merchant: Agent
) -> None:
    _, propose = negotiation.peek()
    opening_id = json.loads(Entry.objects.get(seq=1).envelope)["message_id"]
    refused(client, buyer, variant(propose, opening_id), 409, "message_id_reused")
    negotiation.step()
    # The same id with one changed byte of the body.
    refused(
        client, buyer, variant(propose, propose["message_id"], price=321), 409, "message_id_reused"
    )
    # The merchant reusing the buyer's message id.
    counter = variant(propose, propose["message_id"], price=370)
    counter["type"] = "offer.counter"
    counter["sender"] = {"role": "merchant", "agent_id": merchant.agent_id}
    counter["payload"]["constraints_commit"] = negotiation.merchant.commitment
    refused(client, merchant, counter, 409, "message_id_reused")


def test_a_replay_returns_the_first_answer_and_changes_nothing(
    client: Any, negotiation: ClientNegotiation, buyer: Agent
) -> None:
    key, propose = negotiation.peek()
    first = negotiation.step()
    assert first.status_code == 201
    negotiation.finish()  # the session moves on; a replay still answers as it did then
    before = records()
    again = post(client, key, propose)
    assert again.status_code == 200
    assert again["Content-Type"] == "application/json"
    assert again.content == first.content
    assert records() == before
    # Key order and whitespace are not the body: the canonical envelope is.
    reordered = json.dumps(dict(reversed(list(propose.items()))), indent=2)
    assert post(client, key, reordered).content == first.content
    assert records() == before


def test_a_replayed_open_returns_the_first_answer(
    client: Any, buyer: Agent, merchant: Agent
) -> None:
    run = ClientNegotiation(client, buyer, merchant)
    first = run.open()
    opening = json.loads(Entry.objects.get(seq=1).envelope)
    before = records()
    again = post(client, buyer, opening)
    assert (again.status_code, again.content) == (200, first.content)
    assert records() == before


# 413 -----------------------------------------------------------------------------------------


def test_a_body_over_64_kib_is_too_large(client: Any, negotiation: ClientNegotiation) -> None:
    key, propose = negotiation.peek()
    text = json.dumps(propose)
    padded = text[:-1] + " " * (64 * 1024 - len(text) + 1) + "}"
    assert len(padded.encode()) == 64 * 1024 + 1
    refused(client, key, padded, 413, "envelope_too_large")
    refused(client, key, b"\x00" * (1024 * 1024), 413, "envelope_too_large")


def test_a_body_of_exactly_64_kib_is_read(client: Any, negotiation: ClientNegotiation) -> None:
    key, propose = negotiation.peek()
    text = json.dumps(propose)
    padded = text[:-1] + " " * (64 * 1024 - len(text)) + "}"
    assert len(padded.encode()) == 64 * 1024
    assert post(client, key, padded).status_code == 201


# 400 -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00garbage", "malformed_json"),
        (b"", "malformed_json"),
        (b'{"oanp_version": "0.1", "message_id": "\xff\xfe"}', "malformed_json"),
        (b'{"a": 1, "a": 2}', "malformed_json"),
        (b'{"price": NaN}', "malformed_json"),
        (b"[1, 2, 3]", "schema_invalid"),
        (b'"session.open"', "schema_invalid"),
        (b"null", "schema_invalid"),
    ],
)
def test_unreadable_bodies_are_bad_requests(
    client: Any, negotiation: ClientNegotiation, body: bytes, code: str
) -> None:
    key, _ = negotiation.peek()
    refused(client, key, body, 400, code)


def test_unknown_and_missing_fields_are_named(client: Any, negotiation: ClientNegotiation) -> None:
    key, propose = negotiation.peek()
    bad = copy.deepcopy(propose)
    bad["note"] = "please accept"
    bad["payload"]["discount"] = 10
    del bad["payload"]["price"]
    bad["payload"]["round"] = "one"
    answer = refused(client, key, bad, 400, "schema_invalid")
    fields = {e["field"] for e in answer["errors"]}
    assert fields == {"$.note", "$.payload.discount", "$.payload.price", "$.payload.round"}
    assert all(e["message"] for e in answer["errors"])


@pytest.mark.parametrize(
    ("price", "field"),
    [("3.4e2", "$.payload.price"), ("0", "$.payload.price"), ("-5", "$.payload.price")],
)
def test_bad_price_spellings_are_schema_invalid(
    client: Any, negotiation: ClientNegotiation, price: str, field: str
) -> None:
    key, propose = negotiation.peek()
    text = json.dumps({**propose, "payload": {**propose["payload"], "price": "PRICE"}})
    answer = refused(client, key, text.replace('"PRICE"', price), 400, "schema_invalid")
    assert [e["field"] for e in answer["errors"]] == [field]


# 422 -----------------------------------------------------------------------------------------


def test_a_wrong_round_is_unprocessable(client: Any, negotiation: ClientNegotiation) -> None:
    key, propose = negotiation.peek()
    refused(client, key, variant(propose, "round-two-early", round=2), 422, "wrong_round")


@pytest.mark.parametrize("price", [339.999, 340.001])
def test_too_many_decimals_for_usd(client: Any, negotiation: ClientNegotiation, price: Any) -> None:
    key, propose = negotiation.peek()
    refused(client, key, variant(propose, "fine-price", price=price), 422, "price_precision")
    assert post(client, key, variant(propose, "cents", price=339.99)).status_code == 201


def test_any_decimals_for_jpy(client: Any, buyer: Agent, merchant: Agent) -> None:
    run = ClientNegotiation(client, buyer, merchant, session_id="sess-yen")
    run.open(currency="JPY", item={"route": "HND-ITM"})
    key, propose = run.peek()
    assert propose["type"] == "session.ack"
    run.step()
    key, propose = run.peek()
    assert propose["type"] == "offer.propose"
    refused(client, key, variant(propose, "half-yen", price=340.5), 422, "price_precision")


def test_accepting_a_price_that_is_not_standing(
    client: Any, negotiation: ClientNegotiation, merchant: Agent
) -> None:
    accept = negotiation.run_until("offer.accept", 340)
    assert negotiation.peek()[0] == merchant
    refused(client, merchant, variant(accept, "accept-less", price=330), 422, "price_not_standing")
    # A buyer accepting anything but the standing counter (370) is refused the same way.
    buyer_accept = variant(accept, "buyer-accept", round=2, price=360)
    buyer_accept["sender"] = {"role": "buyer", "agent_id": negotiation.buyer_key.agent_id}
    buyer_accept["payload"]["constraints_commit"] = negotiation.buyer.commitment
    # It is the merchant's turn in round 2 now, so the buyer is out of turn first.
    refused(client, negotiation.buyer_key, buyer_accept, 409, "out_of_turn")


def test_a_buyer_accepting_a_price_the_merchant_never_named(
    client: Any, negotiation: ClientNegotiation, buyer: Agent
) -> None:
    propose = negotiation.run_until("offer.propose", 340)
    accept = variant(propose, "buyer-accept", price=360)
    accept["type"] = "offer.accept"
    refused(client, buyer, accept, 422, "price_not_standing")
    accept["payload"]["price"] = 370
    assert post(client, buyer, accept).status_code == 201


def verdict_from(agent: Agent, session_id: str) -> dict[str, Any]:
    return {
        "oanp_version": "0.1",
        "message_id": "self-judged",
        "session_id": session_id,
        "timestamp": "2026-04-28T14:00:00Z",
        "sender": {"role": agent.role, "agent_id": agent.agent_id},
        "type": "round.verdict",
        "payload": {
            "round": 1,
            "status": "fair",
            "rationale": "opening_moves",
            "buyer_price": 320,
            "merchant_price": 370,
            "spread": 50,
            "checks": {"I1": "pass"},
        },
    }


def test_a_role_may_only_send_its_own_types(
    client: Any, negotiation: ClientNegotiation, buyer: Agent, merchant: Agent
) -> None:
    _, propose = negotiation.peek()
    counter = variant(propose, "buyer-counter")
    counter["type"] = "offer.counter"
    refused(client, buyer, counter, 422, "role_may_not_send")
    refused(client, buyer, verdict_from(buyer, SESSION), 422, "role_may_not_send")
    refused(client, merchant, verdict_from(merchant, SESSION), 422, "role_may_not_send")
    merchant_propose = variant(propose, "merchant-propose")
    merchant_propose["sender"] = {"role": "merchant", "agent_id": merchant.agent_id}
    refused(client, merchant, merchant_propose, 422, "role_may_not_send")


def test_a_merchant_cannot_open_a_session(client: Any, buyer: Agent, merchant: Agent) -> None:
    run = ClientNegotiation(client, buyer, merchant, session_id="sess-by-merchant")
    opening = run.buyer.open(
        session_id="sess-by-merchant",
        merchant_agent_id="merchant-sfo",
        item={"route": "SFO-JFK"},
        currency="USD",
        now=now(),
    )
    opening["sender"] = {"role": "merchant", "agent_id": merchant.agent_id}
    refused(client, merchant, opening, 422, "role_may_not_send")
    assert not Session.objects.filter(session_id="sess-by-merchant").exists()


def test_opening_with_an_unregistered_merchant(client: Any, buyer: Agent) -> None:
    run = ClientNegotiation(client, buyer, Agent("merchant-ghost", "merchant", "none"))
    opening = run.buyer.open(
        session_id="sess-ghost",
        merchant_agent_id="merchant-ghost",
        item={"route": "SFO-JFK"},
        currency="USD",
        now=now(),
    )
    refused(client, buyer, opening, 422, "unknown_merchant")
    assert not Session.objects.filter(session_id="sess-ghost").exists()
    # A buyer of that id does not make it a merchant.
    make_agent("merchant-ghost", "buyer")
    refused(client, buyer, opening, 422, "unknown_merchant")


# The machine's order, where two faults meet in one request ----------------------------------------


def test_not_a_party_comes_before_a_type_the_role_may_not_send(
    client: Any, negotiation: ClientNegotiation, third_buyer: Agent
) -> None:
    refused(client, third_buyer, verdict_from(third_buyer, SESSION), 403, "not_a_party")
    _, propose = negotiation.peek()
    counter = variant(propose, "intruder-counter")
    counter["type"] = "offer.counter"
    counter["sender"]["agent_id"] = third_buyer.agent_id
    refused(client, third_buyer, counter, 403, "not_a_party")


def test_an_unknown_session_comes_before_a_type_the_role_may_not_send(
    client: Any, buyer: Agent
) -> None:
    refused(client, buyer, verdict_from(buyer, "sess-nowhere"), 404, "unknown_session")


def test_a_type_the_role_may_not_send_comes_before_the_idempotency_check(
    client: Any, negotiation: ClientNegotiation, buyer: Agent
) -> None:
    _, propose = negotiation.peek()
    negotiation.step()
    counter = copy.deepcopy(propose)
    counter["type"] = "offer.counter"
    refused(client, buyer, counter, 422, "role_may_not_send")


def test_a_replay_is_answered_even_in_a_terminal_session(
    client: Any, negotiation: ClientNegotiation, buyer: Agent
) -> None:
    _, propose = negotiation.peek()
    first = negotiation.step()
    negotiation.finish()
    again = post(client, buyer, propose)
    assert (again.status_code, again.content) == (200, first.content)
    refused(
        client, buyer, variant(propose, propose["message_id"], price=1), 409, "message_id_reused"
    )


def test_out_of_turn_comes_before_a_wrong_round(
    client: Any, negotiation: ClientNegotiation, merchant: Agent
) -> None:
    _, propose = negotiation.peek()
    counter = variant(propose, "early-and-wrong", round=4, price=370)
    counter["type"] = "offer.counter"
    counter["sender"] = {"role": "merchant", "agent_id": merchant.agent_id}
    counter["payload"]["constraints_commit"] = negotiation.merchant.commitment
    refused(client, merchant, counter, 409, "out_of_turn")


def test_a_terminal_session_comes_before_a_wrong_round_or_price(
    client: Any, negotiation: ClientNegotiation, buyer: Agent
) -> None:
    _, propose = negotiation.peek()
    negotiation.finish()
    refused(client, buyer, variant(propose, "late", round=9, price=1.234), 409, "session_terminal")
