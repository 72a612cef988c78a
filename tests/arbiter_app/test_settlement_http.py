"""Settlement by simultaneous reveal over HTTP (docs/protocol.md §5): each refusal's code,
and a log that nothing refused ever changes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from arbiter_app.models import Entry
from oanp.audit.invariants import audit_log
from oanp.wire.commitments import reference_commit
from tests.support.api import COMMITS, CONSTRAINTS, SALTS, Parties, entry_hashes, problem
from tests.support.factories.agents import Agent
from tests.support.factories.sessions import ITEM

pytestmark = pytest.mark.django_db

SESSION = "sess-settle-http"


@pytest.fixture
def parties(client: Any, buyer: Agent, merchant: Agent) -> Parties:
    return Parties(client, buyer, merchant, SESSION, COMMITS)


def reveal(parties: Parties, role: str, **changes: Any) -> Any:
    fields = {"round": 2, "constraints": CONSTRAINTS[role], "salt": SALTS[role], **changes}
    return parties.send("settle.reveal", role, **fields)


def to_round_two(parties: Parties, **extra: Any) -> None:
    assert parties.open(**extra).status_code == 201
    assert parties.send("session.ack", "merchant").status_code == 201
    assert parties.send("offer.propose", "buyer", round=1, price=320).status_code == 201
    assert parties.send("offer.counter", "merchant", round=1, price=370).status_code == 201


def test_two_reveals_settle_at_the_midpoint(parties: Parties) -> None:
    to_round_two(parties, settlement="reveal")
    first = reveal(parties, "buyer")
    assert first.status_code == 201, first.content
    session = json.loads(first.content)["session"]
    assert (session["state"], session["turn"]) == ("SETTLING", "merchant")
    second = json.loads(reveal(parties, "merchant").content)
    assert [e["envelope"]["type"] for e in second["arbiter"]] == ["round.verdict", "session.agree"]
    agreement = second["arbiter"][-1]["envelope"]["payload"]["agreement"]
    assert agreement["final_price"] == 350
    assert agreement["settlement"] == {"rule": "midpoint/v0.1", "ceiling": 420, "floor": 280}
    assert audit_log(parties.log(), None).results["I2"].problems == []


@pytest.mark.parametrize(
    ("settlement", "changes", "role", "expected"),
    [
        pytest.param(None, {}, "buyer", (422, "settlement_not_enabled"), id="not-enabled"),
        pytest.param(
            "reveal",
            {"constraints": {"budget_cap": 400}},
            "buyer",
            (422, "not_settleable"),
            id="no-limit",
        ),
        pytest.param("reveal", {"round": 1}, "buyer", (422, "wrong_round"), id="wrong-round"),
        pytest.param("reveal", {}, "merchant", (409, "out_of_turn"), id="out-of-turn"),
        pytest.param(
            "reveal", {"salt": 7}, "buyer", (400, "schema_invalid"), id="salt-not-a-string"
        ),
    ],
)
def test_a_refused_reveal_changes_nothing(
    parties: Parties,
    settlement: str | None,
    changes: dict[str, Any],
    role: str,
    expected: tuple[int, str],
) -> None:
    extra = {} if settlement is None else {"settlement": settlement}
    to_round_two(parties, **extra)
    before = entry_hashes()
    problem(reveal(parties, role, **changes), *expected)
    assert entry_hashes() == before


def test_an_unsalted_commitment_cannot_ask_for_settlement(parties: Parties) -> None:
    weak = reference_commit(CONSTRAINTS["buyer"], ITEM, 5)
    refused = parties.open(settlement="reveal", constraints_commit=weak)
    problem(refused, 422, "weak_commitment")
    assert not Entry.objects.exists()
    assert parties.open(settlement="reveal").status_code == 201
    weak_ack = parties.send(
        "session.ack",
        "merchant",
        constraints_commit=reference_commit(CONSTRAINTS["merchant"], ITEM, 5),
    )
    problem(weak_ack, 422, "weak_commitment")
    assert Entry.objects.count() == 1


def test_an_unknown_settlement_rule_is_a_schema_error(parties: Parties) -> None:
    refused = parties.open(settlement="split")
    body = problem(refused, 400, "schema_invalid")
    fields = [e["field"] for e in body["errors"]]
    assert fields == ["$.payload.settlement"]
