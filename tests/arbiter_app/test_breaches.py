"""I3 and I4 breaches over HTTP: the breaching envelope is accepted as evidence, the round is
judged violated, the arbiter closes the session, and the log still verifies offline."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from arbiter_app.models import Session
from oanp.audit import verify_log
from tests.support.factories.agents import Agent, ClientNegotiation, post

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_throttle")]

OTHER_COMMIT = "sha256:" + "ab" * 32


@pytest.fixture
def negotiation(client: Any, buyer: Agent, merchant: Agent) -> ClientNegotiation:
    run = ClientNegotiation(client, buyer, merchant)
    run.open()
    return run


def edited(envelope: dict[str, Any], message_id: str, **payload: Any) -> dict[str, Any]:
    changed = copy.deepcopy(envelope)
    changed["message_id"] = message_id
    changed["payload"].update(payload)
    return changed


def breach(
    run: ClientNegotiation, key: Agent, envelope: dict[str, Any], reason: str
) -> list[dict[str, Any]]:
    """Post the breaching envelope; check the answer, the log's tail and the offline audit."""
    before = len(run.log())
    response = post(run.client, key, envelope)
    assert response.status_code == 201, response.content
    answer = json.loads(response.content)
    assert answer["entry"]["envelope"]["message_id"] == envelope["message_id"]
    assert [e["envelope"]["type"] for e in answer["arbiter"]] == ["round.verdict", "session.close"]

    log = run.log()
    tail = [e["envelope"] for e in log[before:]]
    assert [e["type"] for e in tail] == [envelope["type"], "round.verdict", "session.close"]
    assert tail[0]["payload"] == envelope["payload"]  # the evidence, exactly as sent
    verdict, close = tail[1]["payload"], tail[2]["payload"]
    assert verdict["status"] == "violated"
    assert verdict["rationale"] == reason
    assert verdict["round"] == envelope["payload"]["round"]
    assert "fail" in verdict["checks"].values()
    assert close["reason"] == reason
    assert tail[1]["sender"]["role"] == tail[2]["sender"]["role"] == "arbiter"

    summary = answer["session"]
    assert summary["state"] == "CLOSED"
    assert summary["outcome"] == {"result": "closed", "final_price": None, "close_reason": reason}
    row = Session.objects.get(session_id=run.session_id)
    assert row.close_reason == reason
    # The row counts the verdicts as they were appended: the violation among them.
    statuses = [
        e["envelope"]["payload"]["status"] for e in log if e["envelope"]["type"] == "round.verdict"
    ]
    assert row.violated_rounds == statuses.count("violated") == 1
    assert (row.fair_rounds, row.stuck_rounds) == (
        statuses.count("fair"),
        statuses.count("fair_but_stuck"),
    )

    jwks = json.loads(run.client.get("/.well-known/jwks.json").content)
    report = verify_log(log, jwks)
    assert report.ok, report.summary()
    return log


def test_a_buyer_move_under_another_commitment_is_commitment_mismatch(
    negotiation: ClientNegotiation, buyer: Agent
) -> None:
    propose = negotiation.run_until("offer.propose", 320)
    assert propose["payload"]["constraints_commit"] != OTHER_COMMIT
    bad = edited(propose, "b-r1-other-commit", constraints_commit=OTHER_COMMIT)
    log = breach(negotiation, buyer, bad, "commitment_mismatch")
    assert log[-1]["envelope"]["payload"]["round"] == 1


def test_a_merchant_counter_under_another_commitment_is_commitment_mismatch(
    negotiation: ClientNegotiation, merchant: Agent
) -> None:
    counter = negotiation.run_until("offer.counter", 370)
    # The buyer's commitment is a real one, just not the merchant's own.
    buyers = negotiation.buyer.commitment
    breach(
        negotiation,
        merchant,
        edited(counter, "m-r1-buyers-commit", constraints_commit=buyers),
        "commitment_mismatch",
    )


def test_an_accept_under_another_commitment_is_commitment_mismatch(
    negotiation: ClientNegotiation, merchant: Agent
) -> None:
    accept = negotiation.run_until("offer.accept", 340)
    breach(
        negotiation,
        merchant,
        edited(accept, "m-r2-accept-other", constraints_commit=OTHER_COMMIT),
        "commitment_mismatch",
    )
    assert not [e for e in negotiation.log() if e["envelope"]["type"] == "session.agree"]


def test_a_buyer_lowering_its_price_has_reneged(
    negotiation: ClientNegotiation, buyer: Agent
) -> None:
    propose = negotiation.run_until("offer.propose", 340)
    assert propose["payload"]["round"] == 2
    log = breach(negotiation, buyer, edited(propose, "b-r2-lower", price=300), "buyer_reneged")
    prices = [
        e["envelope"]["payload"]["price"] for e in log if e["envelope"]["type"] == "offer.propose"
    ]
    assert prices == [320, 300]


def test_a_merchant_raising_its_price_has_reneged(
    negotiation: ClientNegotiation, merchant: Agent
) -> None:
    negotiation.run_until("offer.propose", 340)
    negotiation.step()
    accept = negotiation.peek()[1]
    assert accept["type"] == "offer.accept"
    counter = edited(accept, "m-r2-higher", price=380)
    counter["type"] = "offer.counter"
    breach(negotiation, merchant, counter, "merchant_reneged")


def test_a_closed_session_refuses_the_next_move(
    negotiation: ClientNegotiation, buyer: Agent
) -> None:
    propose = negotiation.run_until("offer.propose", 340)
    breach(negotiation, buyer, edited(propose, "b-r2-lower", price=300), "buyer_reneged")
    retry = post(negotiation.client, buyer, edited(propose, "b-r2-retry"))
    assert retry.status_code == 409
    assert json.loads(retry.content)["code"] == "session_terminal"
