"""The buyer's final answer over HTTP (docs/protocol.md §5): the last counter waits for it."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from arbiter_app import services
from arbiter_app.models import Entry
from oanp.audit.invariants import audit_log
from tests.support.api import Parties, problem
from tests.support.factories.agents import Agent

pytestmark = pytest.mark.django_db

SESSION = "sess-final-answer"
COMMITS = {"buyer": "sha256:" + "b" * 64, "merchant": "sha256:" + "c" * 64}


@pytest.fixture
def parties(client: Any, buyer: Agent, merchant: Agent) -> Parties:
    return Parties(client, buyer, merchant, SESSION, COMMITS)


@pytest.fixture
def at_final_answer(parties: Parties) -> dict[str, Any]:
    """Round 2 of 2: the buyer proposed 310, the merchant's last counter is 390."""
    opened = parties.open(max_rounds=2)
    assert opened.status_code == 201, opened.content
    for kind, role, round_, price in [
        ("session.ack", "merchant", None, None),
        ("offer.propose", "buyer", 1, 300),
        ("offer.counter", "merchant", 1, 400),
        ("offer.propose", "buyer", 2, 310),
        ("offer.counter", "merchant", 2, 390),
    ]:
        fields = {} if round_ is None else {"round": round_, "price": price}
        answer = parties.send(kind, role, **fields)
        assert answer.status_code == 201, answer.content
    body = json.loads(answer.content)
    assert body["arbiter"] == []  # no verdict: the round waits for the final answer
    session = body["session"]
    assert (session["state"], session["round"], session["turn"], session["final_answer"]) == (
        "NEGOTIATING",
        2,
        "buyer",
        True,
    )
    return session


def test_the_buyer_accepts_the_last_counter(
    parties: Parties, at_final_answer: dict[str, Any]
) -> None:
    answer = parties.send("offer.accept", "buyer", round=2, price=390)
    assert answer.status_code == 201, answer.content
    body = json.loads(answer.content)
    assert [e["envelope"]["type"] for e in body["arbiter"]] == ["round.verdict", "session.agree"]
    assert body["session"]["outcome"] == {
        "result": "agreed",
        "final_price": 390,
        "close_reason": None,
    }
    assert body["session"]["final_answer"] is False
    assert audit_log(parties.log(), None).results["I2"].problems == []


@pytest.mark.parametrize(
    ("kind", "role", "fields", "status", "code"),
    [
        ("offer.propose", "buyer", {"round": 2, "price": 320}, 409, "out_of_turn"),
        ("offer.counter", "merchant", {"round": 2, "price": 380}, 409, "out_of_turn"),
        ("offer.accept", "merchant", {"round": 2, "price": 310}, 409, "out_of_turn"),
        ("offer.accept", "buyer", {"round": 2, "price": 380}, 422, "price_not_standing"),
        ("offer.accept", "buyer", {"round": 3, "price": 390}, 422, "wrong_round"),
    ],
)
def test_nothing_else_is_in_turn_and_a_refusal_changes_nothing(
    parties: Parties,
    at_final_answer: dict[str, Any],
    kind: str,
    role: str,
    fields: dict[str, Any],
    status: int,
    code: str,
) -> None:
    before = Entry.objects.count()
    answer = parties.send(kind, role, **fields)
    problem(answer, status, code)
    assert Entry.objects.count() == before


def test_no_final_answer_in_its_window_judges_the_round_and_closes(
    parties: Parties, at_final_answer: dict[str, Any]
) -> None:
    due = at_final_answer["timers"]["turn_deadline"]
    services.expire_due_sessions(now=timezone.now() + timedelta(seconds=301))
    log = parties.log()
    assert [e["envelope"]["type"] for e in log[-2:]] == ["round.verdict", "session.close"]
    assert log[-1]["envelope"]["payload"]["reason"] == "max_rounds_reached"
    assert due is not None
    assert audit_log(log, None).ok
    late = parties.send("offer.accept", "buyer", round=2, price=390)
    problem(late, 409, "timer_expired")
