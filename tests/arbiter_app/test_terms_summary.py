"""The session summary of a terms/v0.1 session carries the terms standing on each side and the
issues open (docs/protocol.md §14.3, §16), as the OpenAPI document describes them; a
price-only session's summary has no such member."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from openapi_schema_validator import OAS30Validator

from tests.support.factories.agents import Agent, make_agent, post
from tests.support.factories.sessions import BUYER, ITEM, MERCHANT, envelope_json
from tests.support.factories.terms import ISSUES

pytestmark = pytest.mark.django_db

COMMITS = {"buyer": "sha256:" + "b" * 64, "merchant": "sha256:" + "c" * 64}


@pytest.fixture
def keys() -> dict[str, Agent]:
    return {"buyer": make_agent(BUYER, "buyer"), "merchant": make_agent(MERCHANT, "merchant")}


@pytest.fixture(scope="module")
def summary_schema(django_db_blocker: Any) -> OAS30Validator:
    with django_db_blocker.unblock():
        document = json.loads(Client().get("/oanp/v0.1/openapi.json").content)
    schema = {"$ref": "#/components/schemas/SessionSummary", "components": document["components"]}
    return OAS30Validator(schema)


class Session:
    """One session driven through the HTTP API, its summary read after every move."""

    def __init__(
        self, client: Any, keys: dict[str, Agent], schema: OAS30Validator, session_id: str
    ) -> None:
        self.client, self.keys, self.schema, self.session_id = client, keys, schema, session_id

    def send(self, kind: str, role: str, **payload: Any) -> dict[str, Any]:
        """Submit one envelope; the summary read afterwards, checked against the answer's
        and the OpenAPI document."""
        payload.setdefault("constraints_commit", COMMITS[role])
        body = envelope_json(kind, payload, role=role, session_id=self.session_id)
        response = post(self.client, self.keys[role], body)
        assert response.status_code == 201, response.content
        summary = self.summary()
        assert response.json()["session"] == summary
        return summary

    def summary(self) -> dict[str, Any]:
        response = self.client.get(
            f"/oanp/v0.1/sessions/{self.session_id}", headers=self.keys["buyer"].headers
        )
        assert response.status_code == 200, response.content
        summary: dict[str, Any] = response.json()
        self.schema.validate(summary)
        return summary

    def open(self, **extra: Any) -> dict[str, Any]:
        return self.send(
            "session.open", "buyer", merchant_agent_id=MERCHANT, item=ITEM, currency="USD", **extra
        )


def terms(days: int, support: str) -> dict[str, Any]:
    return {"delivery_days": days, "support": support}


def standing(buyer: Any, merchant: Any, still_open: int) -> dict[str, Any]:
    return {"issues": ISSUES, "buyer": buyer, "merchant": merchant, "issues_open": still_open}


def test_the_summary_follows_the_terms_standing_until_the_agreement(
    client: Any, keys: dict[str, Agent], summary_schema: OAS30Validator
) -> None:
    session = Session(client, keys, summary_schema, "sess-terms-summary")
    opened = session.open(profile="terms/v0.1", issues=ISSUES)
    assert opened["terms"] == standing(None, None, 2)
    assert session.send("session.ack", "merchant")["terms"] == standing(None, None, 2)

    fast, slow = terms(3, "premium"), terms(9, "none")
    proposed = session.send("offer.propose", "buyer", round=1, price=320, terms=fast)
    assert proposed["terms"] == standing(fast, None, 2)
    countered = session.send("offer.counter", "merchant", round=1, price=380, terms=slow)
    assert countered["round"] == 2
    # The buyer's round-1 offer stands until it proposes again.
    assert countered["terms"] == standing(fast, slow, 2)

    # The buyer gives in on delivery: one issue left open.
    closer = terms(9, "standard")
    proposed = session.send("offer.propose", "buyer", round=2, price=340, terms=closer)
    assert proposed["terms"] == standing(closer, slow, 1)
    # The merchant meets it on support: none open.
    countered = session.send("offer.counter", "merchant", round=2, price=360, terms=closer)
    assert countered["terms"] == standing(closer, closer, 0)
    assert countered["outcome"] is None

    agreed = session.send("offer.accept", "buyer", round=3, price=360, terms=closer)
    assert agreed["state"] == "AGREED"
    assert agreed["terms"] == standing(closer, closer, 0)
    assert agreed["outcome"] == {
        "result": "agreed",
        "final_price": 360,
        "close_reason": None,
        "final_terms": closer,
    }
    log = client.get(
        f"/oanp/v0.1/sessions/{session.session_id}/log", headers=keys["buyer"].headers
    ).json()["entries"]
    assert log[-1]["envelope"]["payload"]["agreement"]["final_terms"] == closer


def test_a_terms_session_closed_unagreed_has_no_final_terms(
    client: Any, keys: dict[str, Agent], summary_schema: OAS30Validator
) -> None:
    session = Session(client, keys, summary_schema, "sess-terms-closed")
    session.open(profile="terms/v0.1", issues=ISSUES)
    session.send("session.ack", "merchant")
    session.send("offer.propose", "buyer", round=1, price=320, terms=terms(3, "premium"))
    closed = session.send("session.close", "merchant", reason="withdrawn")
    assert closed["state"] == "CLOSED"
    assert closed["terms"] == standing(terms(3, "premium"), None, 2)
    assert closed["outcome"] == {
        "result": "closed",
        "final_price": None,
        "close_reason": "withdrawn_by_merchant",
        "final_terms": None,
    }


def test_a_price_only_summary_has_no_terms(
    client: Any, keys: dict[str, Agent], summary_schema: OAS30Validator
) -> None:
    session = Session(client, keys, summary_schema, "sess-price-summary")
    summaries = [
        session.open(),
        session.send("session.ack", "merchant"),
        session.send("offer.propose", "buyer", round=1, price=320),
        session.send("offer.counter", "merchant", round=1, price=380),
        session.send("offer.accept", "buyer", round=2, price=380),
    ]
    for summary in summaries:
        assert "terms" not in summary
    assert summaries[-1]["outcome"] == {
        "result": "agreed",
        "final_price": 380,
        "close_reason": None,
    }
