"""Settlement by simultaneous reveal over HTTP (docs/protocol.md §5): each refusal's code,
and a log that nothing refused ever changes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from arbiter_app.models import Entry
from oanp.commitments import commit, encode_salt, reference_commit
from oanp.invariants import audit_log
from tests.support.factories.agents import make_agent, post, read_log
from tests.support.factories.sessions import BUYER, ITEM, MERCHANT, envelope_json

pytestmark = pytest.mark.django_db

SESSION = "sess-settle-http"
CONSTRAINTS = {"buyer": {"true_ceiling": 420}, "merchant": {"floor_price": 280}}
SALTS = {"buyer": encode_salt(b"\x01" * 32), "merchant": encode_salt(b"\x02" * 32)}
COMMITS = {role: commit(CONSTRAINTS[role], ITEM, 5, SALTS[role]) for role in CONSTRAINTS}


@pytest.fixture
def keys() -> dict[str, Any]:
    return {"buyer": make_agent(BUYER, "buyer"), "merchant": make_agent(MERCHANT, "merchant")}


def send(client: Any, keys: dict[str, Any], kind: str, role: str, **payload: Any) -> Any:
    payload.setdefault("constraints_commit", COMMITS[role])
    body = envelope_json(kind, payload, role=role, session_id=SESSION)
    return post(client, keys[role], body)


def opened(client: Any, keys: dict[str, Any], **extra: Any) -> Any:
    return send(
        client,
        keys,
        "session.open",
        "buyer",
        merchant_agent_id=MERCHANT,
        item=ITEM,
        currency="USD",
        **extra,
    )


def reveal(client: Any, keys: dict[str, Any], role: str, **changes: Any) -> Any:
    fields = {"round": 2, "constraints": CONSTRAINTS[role], "salt": SALTS[role], **changes}
    return send(client, keys, "settle.reveal", role, **fields)


def to_round_two(client: Any, keys: dict[str, Any], **extra: Any) -> None:
    assert opened(client, keys, **extra).status_code == 201
    assert send(client, keys, "session.ack", "merchant").status_code == 201
    assert send(client, keys, "offer.propose", "buyer", round=1, price=320).status_code == 201
    assert send(client, keys, "offer.counter", "merchant", round=1, price=370).status_code == 201


def problem(response: Any) -> tuple[int, str]:
    return response.status_code, json.loads(response.content)["code"]


def test_two_reveals_settle_at_the_midpoint(client: Any, keys: dict[str, Any]) -> None:
    to_round_two(client, keys, settlement="reveal")
    first = reveal(client, keys, "buyer")
    assert first.status_code == 201, first.content
    session = json.loads(first.content)["session"]
    assert (session["state"], session["turn"]) == ("SETTLING", "merchant")
    second = json.loads(reveal(client, keys, "merchant").content)
    assert [e["envelope"]["type"] for e in second["arbiter"]] == ["round.verdict", "session.agree"]
    agreement = second["arbiter"][-1]["envelope"]["payload"]["agreement"]
    assert agreement["final_price"] == 350
    assert agreement["settlement"] == {"rule": "midpoint/v0.1", "ceiling": 420, "floor": 280}
    assert audit_log(read_log(client, keys["buyer"], SESSION), None).results["I2"].problems == []


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
    client: Any,
    keys: dict[str, Any],
    settlement: str | None,
    changes: dict[str, Any],
    role: str,
    expected: tuple[int, str],
) -> None:
    extra = {} if settlement is None else {"settlement": settlement}
    to_round_two(client, keys, **extra)
    before = list(Entry.objects.values_list("entry_hash", flat=True))
    assert problem(reveal(client, keys, role, **changes)) == expected
    assert list(Entry.objects.values_list("entry_hash", flat=True)) == before


def test_an_unsalted_commitment_cannot_ask_for_settlement(
    client: Any, keys: dict[str, Any]
) -> None:
    weak = reference_commit(CONSTRAINTS["buyer"], ITEM, 5)
    refused = opened(client, keys, settlement="reveal", constraints_commit=weak)
    assert problem(refused) == (422, "weak_commitment")
    assert not Entry.objects.exists()
    assert opened(client, keys, settlement="reveal").status_code == 201
    weak_ack = send(
        client,
        keys,
        "session.ack",
        "merchant",
        constraints_commit=reference_commit(CONSTRAINTS["merchant"], ITEM, 5),
    )
    assert problem(weak_ack) == (422, "weak_commitment")
    assert Entry.objects.count() == 1


def test_an_unknown_settlement_rule_is_a_schema_error(client: Any, keys: dict[str, Any]) -> None:
    refused = opened(client, keys, settlement="split")
    assert problem(refused) == (400, "schema_invalid")
    fields = [e["field"] for e in json.loads(refused.content)["errors"]]
    assert fields == ["$.payload.settlement"]
