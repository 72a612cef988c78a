"""Multi-issue terms over HTTP (docs/protocol.md §11): every refusal with its code and an
unchanged log, an agreement whose signed terms verify, and the ACP handoff carrying them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from arbiter_app import services
from arbiter_app.models import Entry, Handoff
from oanp.audit import verify_log
from oanp.wire.canonical import canonical_bytes
from tests.support.api import COMMITS, CONSTRAINTS, SALTS, Parties, entry_hashes, problem
from tests.support.factories.agents import Agent
from tests.support.factories.sessions import MERCHANT
from tests.support.factories.terms import ISSUES

pytestmark = pytest.mark.django_db

SESSION = "sess-terms-http"


@pytest.fixture
def parties(client: Any, buyer: Agent, merchant: Agent) -> Parties:
    return Parties(client, buyer, merchant, SESSION, COMMITS)


def opened(parties: Parties, **extra: Any) -> Any:
    fields = {"profile": "terms/v0.1", "issues": ISSUES, **extra}
    return parties.open(**{k: v for k, v in fields.items() if v is not None})


def terms(days: int, support: str) -> dict[str, Any]:
    return {"delivery_days": days, "support": support}


def countered(parties: Parties, **extra: Any) -> None:
    """Round 1 played: the buyer at 320 in 3 days with premium support, the merchant at 380
    in 9 days with none; round 2, the buyer's turn."""
    assert opened(parties, **extra).status_code == 201
    assert parties.send("session.ack", "merchant").status_code == 201
    proposed = parties.send("offer.propose", "buyer", round=1, price=320, terms=terms(3, "premium"))
    assert proposed.status_code == 201, proposed.content
    answered = parties.send("offer.counter", "merchant", round=1, price=380, terms=terms(9, "none"))
    assert answered.status_code == 201, answered.content


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        pytest.param({"issues": None}, (400, "schema_invalid"), id="terms-without-issues"),
        pytest.param({"profile": None}, (400, "schema_invalid"), id="issues-without-terms"),
        pytest.param({"issues": [{"name": "x"}]}, (400, "schema_invalid"), id="malformed"),
        pytest.param({"issues": ISSUES * 5}, (400, "schema_invalid"), id="too-many"),
    ],
)
def test_a_refused_open_writes_nothing(
    parties: Parties, extra: dict[str, Any], expected: tuple[int, str]
) -> None:
    problem(opened(parties, **extra), *expected)
    assert not Entry.objects.exists()


@pytest.mark.parametrize(
    ("kind", "role", "payload", "expected"),
    [
        pytest.param(
            "offer.propose",
            "buyer",
            {"price": 330, "terms": {"delivery_days": 3}},
            (422, "bad_terms"),
            id="missing-issue",
        ),
        pytest.param(
            "offer.propose",
            "buyer",
            {"price": 330, "terms": {**terms(3, "premium"), "colour": "red"}},
            (422, "bad_terms"),
            id="undeclared-issue",
        ),
        pytest.param(
            "offer.propose",
            "buyer",
            {"price": 330, "terms": terms(45, "premium")},
            (422, "bad_terms"),
            id="out-of-range",
        ),
        pytest.param(
            "offer.propose",
            "buyer",
            {"price": 330, "terms": {"delivery_days": 3.5, "support": "premium"}},
            (422, "bad_terms"),
            id="too-many-decimals",
        ),
        pytest.param(
            "offer.propose",
            "buyer",
            {"price": 330, "terms": terms(3, "gold")},
            (422, "bad_terms"),
            id="not-an-option",
        ),
        pytest.param("offer.propose", "buyer", {"price": 330}, (422, "bad_terms"), id="no-terms"),
        pytest.param(
            "offer.propose",
            "buyer",
            {"price": 330, "terms": [3, "premium"]},
            (400, "schema_invalid"),
            id="terms-not-an-object",
        ),
        pytest.param(
            "offer.accept",
            "buyer",
            {"price": 380, "terms": terms(3, "none")},
            (422, "terms_not_standing"),
            id="accept-other-terms",
        ),
        pytest.param(
            "offer.accept",
            "buyer",
            {"price": 370, "terms": terms(9, "none")},
            (422, "price_not_standing"),
            id="accept-other-price",
        ),
        pytest.param(
            "settle.reveal",
            "buyer",
            {"constraints": CONSTRAINTS["buyer"], "salt": SALTS["buyer"]},
            (422, "not_settleable"),
            id="settle-with-issues-open",
        ),
    ],
)
def test_a_refused_move_changes_nothing(
    parties: Parties,
    kind: str,
    role: str,
    payload: dict[str, Any],
    expected: tuple[int, str],
) -> None:
    countered(parties, settlement="reveal")
    before = entry_hashes()
    problem(parties.send(kind, role, round=2, **payload), *expected)
    assert entry_hashes() == before


def test_terms_in_a_price_only_session_are_refused(parties: Parties) -> None:
    assert opened(parties, profile=None, issues=None).status_code == 201
    assert parties.send("session.ack", "merchant").status_code == 201
    before = entry_hashes()
    refused = parties.send("offer.propose", "buyer", round=1, price=320, terms=terms(3, "premium"))
    problem(refused, 422, "bad_terms")
    assert entry_hashes() == before


@pytest.mark.usefixtures("private_allowed")
def test_an_agreement_signs_the_terms_and_hands_them_to_checkout(parties: Parties) -> None:
    services.configure_handoff(
        merchant_agent_id=MERCHANT, endpoint="http://127.0.0.1:9/acp", api_key="acp_live_1"
    )
    countered(parties)
    # A trade-off, not a retraction: more money, slower delivery, standard support.
    traded = parties.send("offer.propose", "buyer", round=2, price=350, terms=terms(6, "standard"))
    assert traded.status_code == 201, traded.content
    final = parties.send("offer.accept", "merchant", round=2, price=350, terms=terms(6, "standard"))
    assert final.status_code == 201, final.content
    agreement = json.loads(final.content)["arbiter"][-1]["envelope"]["payload"]["agreement"]
    assert agreement["final_terms"] == terms(6, "standard")
    log = parties.log()
    jwks = json.loads(parties.client.get("/.well-known/jwks.json").content)
    report = verify_log(log, jwks)
    assert report.ok, [c.line() for c in report.checks if not c.ok]
    verdicts = [e["envelope"]["payload"] for e in log if e["envelope"]["type"] == "round.verdict"]
    assert [v["issues_open"] for v in verdicts] == [2, 0]
    metadata = json.loads(Handoff.objects.get(session__session_id=SESSION).body)["metadata"]
    assert metadata["oanp_terms"] == canonical_bytes(terms(6, "standard")).decode()
