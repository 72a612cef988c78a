"""Every JSON number, however spelled, sent to the arbiter: a value it takes, or a 400 naming
the field, never a 500 and never a change to the record (docs/protocol.md §2, §10, §14.9).

The envelope, reveal and callback endpoints each read a body holding one fuzzed literal
(:mod:`tests.support.numbers`), checked against :func:`~tests.support.numbers.reading`. An
envelope stamped on a leap second is taken and logged as it was sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import pytest
from django.core.cache import cache
from django.db import transaction
from hypothesis import HealthCheck, example, given, settings

from arbiter_app.models import AgentCallback, Entry, Session
from oanp.agents.vaults import BuyerVault
from oanp.wire.canonical import ZERO_HASH, canonical_bytes, json_value, read_json, tagged_sha256
from oanp.wire.commitments import encode_salt
from tests.support.api import COMMITS, problem
from tests.support.factories.agents import Agent, ClientNegotiation, post
from tests.support.factories.sessions import ITEM, envelope_json
from tests.support.numbers import (
    FIELD_MESSAGES,
    LANDMARKS,
    NOT_NUMBERS,
    is_json_number,
    number_spellings,
    reading,
)

pytestmark = pytest.mark.django_db

FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
MARK = '"@@number@@"'
SESSION = "sess-sfo-jfk"
REVEAL = f"/oanp/v0.1/sessions/{SESSION}/reveal"
CALLBACK = "/oanp/v0.1/callback"
#: What the buyer of the published example committed to (tests/arbiter_app/test_reveal.py).
BUYER_CONSTRAINTS = BuyerVault(
    true_ceiling=Decimal(420), budget_cap=Decimal(400), urgency="medium"
).constraints()
BUYER_SALT = encode_salt(b"\x01" * 32)


@pytest.fixture(autouse=True)
def _no_throttle(settings: Any) -> Iterator[None]:
    settings.OANP_RATE_LIMIT_PER_MINUTE = 1_000_000
    cache.clear()
    yield
    cache.clear()


def spelled(document: Any, literal: str) -> str:
    text = json.dumps(document)
    assert text.count(MARK) == 1
    return text.replace(MARK, literal)


def landmarks(test: Any) -> Any:
    for literal in (*LANDMARKS, *NOT_NUMBERS):
        test = example(literal=literal)(test)
    return test


def records() -> tuple[Any, ...]:
    sessions = tuple(
        Session.objects.order_by("session_id").values_list(
            "session_id", "head_hash", "state", "reveals"
        )
    )
    callbacks = tuple(AgentCallback.objects.values_list("agent_id", "url"))
    return sessions, Entry.objects.count(), callbacks


@contextmanager
def rolled_back() -> Iterator[None]:
    """Whatever the request keeps is undone after, so every example meets the same record."""
    with transaction.atomic():
        yield
        transaction.set_rollback(True)


def refused_at(response: Any, field: str | None, literal: str) -> None:
    """A 400 for ``literal``: ``malformed_json`` when it is not a JSON number, else
    ``schema_invalid`` naming ``field`` (with :func:`reading`'s reason when ``field`` is given
    and the literal is a number nothing hashes)."""
    if not is_json_number(literal):
        problem(response, 400, "malformed_json")
        return
    answer = problem(response, 400, "schema_invalid")
    if field is not None:
        reason = reading(literal)
        assert isinstance(reason, str)
        assert answer["errors"] == [{"field": field, "message": FIELD_MESSAGES[reason]}]


# POST /oanp/v0.1/envelopes ------------------------------------------------------------------


@FUZZ
@landmarks
@given(literal=number_spellings())
def test_an_opening_takes_any_number_in_its_item_or_names_it(
    client: Any, buyer: Agent, merchant: Agent, literal: str
) -> None:
    payload = {
        "merchant_agent_id": merchant.agent_id,
        "item": {**ITEM, "seats": json.loads(MARK)},
        "currency": "USD",
        "constraints_commit": COMMITS["buyer"],
    }
    opening = envelope_json(
        "session.open", payload, role="buyer", agent=buyer.agent_id, session_id="sess-numbers"
    )
    with rolled_back():
        before = records()
        response = post(client, buyer, spelled(opening, literal))
        expected = reading(literal) if is_json_number(literal) else None
        if expected is None or isinstance(expected, str):
            refused_at(response, "$.payload.item.seats", literal)
            assert records() == before
            return
        assert response.status_code == 201, response.content
        logged = json.loads(response.content)["entry"]["envelope"]
        assert logged["payload"]["item"]["seats"] == expected


@pytest.fixture
def negotiation(client: Any, buyer: Agent, merchant: Agent) -> ClientNegotiation:
    """Opened and acknowledged: the buyer's round-1 propose is next."""
    run = ClientNegotiation(client, buyer, merchant)
    run.open()
    run.run_until("offer.propose", 320)
    return run


@FUZZ
@landmarks
@example(literal="320.000")
@given(literal=number_spellings())
def test_a_price_however_spelled_is_taken_or_refused_at_the_price(
    client: Any, negotiation: ClientNegotiation, literal: str
) -> None:
    key, propose = negotiation.peek()
    text = spelled(
        {**propose, "payload": {**propose["payload"], "price": json.loads(MARK)}}, literal
    )
    with rolled_back():
        before = records()
        response = post(client, key, text)
        if response.status_code == 201:
            assert is_json_number(literal)
            assert "e" not in literal.lower()  # §3: no exponent
            logged = json.loads(response.content)["entry"]["envelope"]
            assert logged["payload"]["price"] == reading(literal)
            return
        assert records() == before
        if response.status_code == 422:
            assert isinstance(reading(literal), int | float)  # a number, past the schema
            return
        refused_at(response, None, literal)
        if is_json_number(literal):
            fields = [e["field"] for e in json.loads(response.content)["errors"]]
            assert fields == ["$.payload.price"]


# PUT /oanp/v0.1/callback ----------------------------------------------------------------------


@FUZZ
@landmarks
@given(literal=number_spellings())
def test_a_callback_body_holding_any_number_is_a_bad_request(
    client: Any, buyer: Agent, literal: str
) -> None:
    for body, field in (
        ({"url": "https://agent.example/hooks/oanp", "seats": json.loads(MARK)}, "url"),
        ({"url": json.loads(MARK)}, "url"),
    ):
        before = records()
        response = client.put(
            CALLBACK,
            data=spelled(body, literal),
            content_type="application/json",
            headers=buyer.headers,
        )
        if is_json_number(literal):
            answer = problem(response, 400, "schema_invalid")
            assert [e["field"] for e in answer["errors"]] == [field]
        else:
            problem(response, 400, "malformed_json")
        assert records() == before


# POST /oanp/v0.1/sessions/{id}/reveal ---------------------------------------------------------


@pytest.fixture
def ended(client: Any, buyer: Agent, merchant: Agent) -> ClientNegotiation:
    run = ClientNegotiation(client, buyer, merchant)
    run.open()
    run.finish()
    assert Session.objects.get(session_id=SESSION).phase == "AGREED"
    return run


@FUZZ
@landmarks
@example(literal="4.2e2")
@example(literal="420.000")
@given(literal=number_spellings())
def test_a_reveal_takes_any_number_in_its_constraints_or_names_it(
    client: Any, ended: ClientNegotiation, buyer: Agent, literal: str
) -> None:
    """A ceiling of 420 however spelled opens the commitment (numbers are hashed by value);
    any other number is a mismatch, and a number nothing hashes is refused at its field."""
    constraints = {**BUYER_CONSTRAINTS, "true_ceiling": json.loads(MARK)}
    body = spelled({"constraints": constraints, "salt": BUYER_SALT}, literal)
    with rolled_back():
        before = records()
        response = post(client, buyer, body, path=REVEAL)
        expected = reading(literal) if is_json_number(literal) else None
        if expected is None or isinstance(expected, str):
            refused_at(response, "$.constraints.true_ceiling", literal)
        elif expected == 420:
            assert response.status_code == 200, response.content
            assert json.loads(response.content)["opens"] is True
            return
        else:
            problem(response, 422, "reveal_mismatch")
        assert records() == before


# Leap seconds -----------------------------------------------------------------------------------


def test_an_envelope_stamped_on_a_leap_second_is_logged_as_sent(
    client: Any, buyer: Agent, merchant: Agent
) -> None:
    payload = {
        "merchant_agent_id": merchant.agent_id,
        "item": ITEM,
        "currency": "USD",
        "constraints_commit": COMMITS["buyer"],
    }
    sent = envelope_json(
        "session.open", payload, role="buyer", agent=buyer.agent_id, session_id="sess-leap"
    )
    sent["timestamp"] = "2016-12-31T23:59:60.5Z"
    text = json.dumps(sent)
    response = post(client, buyer, text)
    assert response.status_code == 201, response.content
    entry = json.loads(response.content)["entry"]
    assert entry["envelope"] == sent
    # The hash covers the envelope exactly as it was sent, second 60 and all.
    hashed = {
        "seq": 1,
        "received_at": entry["received_at"],
        "envelope": json_value(read_json(text)),
        "prev_hash": ZERO_HASH,
    }
    assert b'"timestamp":"2016-12-31T23:59:60.5Z"' in canonical_bytes(hashed)
    assert entry["entry_hash"] == tagged_sha256(canonical_bytes(hashed))
    stored = Entry.objects.get(session__session_id="sess-leap", seq=1)
    assert json.loads(stored.envelope)["timestamp"] == "2016-12-31T23:59:60.5Z"
    assert stored.entry_hash == entry["entry_hash"]
