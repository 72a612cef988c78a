"""Envelopes a test writes itself, sent to the arbiter's HTTP API, and the problem answers the
API refuses them with (docs/protocol.md §14).

Where :class:`~tests.support.factories.agents.ClientNegotiation` has reference agents write a
session's envelopes, :class:`Parties` posts whatever the test writes, fields the parser refuses
included, each under its sender's key.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from arbiter_app.models import Entry, Session
from oanp.wire.commitments import commit, encode_salt
from tests.support.factories.agents import Agent, post, read_log
from tests.support.factories.sessions import ITEM, envelope_json

PROBLEM = "application/problem+json"

#: The limits each party commits to where a session may settle by reveal: the published
#: example's ceiling and floor, each under its own salt.
CONSTRAINTS = {"buyer": {"true_ceiling": 420}, "merchant": {"floor_price": 280}}
SALTS = {"buyer": encode_salt(b"\x01" * 32), "merchant": encode_salt(b"\x02" * 32)}
#: Their salted commitments, for the SFO→JFK item in five rounds.
COMMITS = {role: commit(CONSTRAINTS[role], ITEM, 5, SALTS[role]) for role in CONSTRAINTS}


@dataclass(frozen=True)
class Parties:
    """A buyer and a merchant with API keys, sending one session's envelopes through Django's
    test client. Every envelope carries its sender's ``commits[role]`` as its
    ``constraints_commit``, unless its payload names one."""

    client: Any
    buyer_key: Agent
    merchant_key: Agent
    session_id: str
    commits: dict[str, str]

    def key(self, role: str) -> Agent:
        return self.buyer_key if role == "buyer" else self.merchant_key

    def send(self, kind: str, role: str, **payload: Any) -> Any:
        """``role``'s envelope of ``kind`` with ``payload``, posted: the API's answer."""
        payload.setdefault("constraints_commit", self.commits[role])
        key = self.key(role)
        body = envelope_json(
            kind, payload, role=role, agent=key.agent_id, session_id=self.session_id
        )
        return post(self.client, key, body)

    def open(self, **fields: Any) -> Any:
        """The buyer's session.open: the SFO→JFK item, in USD, from the merchant; ``fields``
        besides."""
        return self.send(
            "session.open",
            "buyer",
            merchant_agent_id=self.merchant_key.agent_id,
            item=ITEM,
            currency="USD",
            **fields,
        )

    def log(self) -> list[dict[str, Any]]:
        """The session's log, as the buyer reads it from the API."""
        return read_log(self.client, self.buyer_key, self.session_id)


def problem(response: Any, status: int, code: str) -> dict[str, Any]:
    """The body of ``response``, which must be a problem+json refusal with ``status`` and the
    stable ``code`` (its type URI ending in the code)."""
    assert response.status_code == status, response.content
    assert response["Content-Type"] == PROBLEM
    body: dict[str, Any] = json.loads(response.content)
    assert (body["status"], body["code"]) == (status, code), body
    assert body["type"].endswith("/" + code)
    return body


def entry_hashes() -> list[str]:
    """Every entry's hash on the record, of every session: what a refusal must leave alone."""
    return list(Entry.objects.values_list("entry_hash", flat=True))


def records() -> tuple[Any, ...]:
    """Everything a refusal must leave alone: every session's head and state, every entry."""
    sessions = tuple(
        Session.objects.order_by("session_id").values_list(
            "session_id", "phase", "round", "head_seq", "head_hash", "state", "reveals"
        )
    )
    return sessions, Entry.objects.count()


def refused(client: Any, agent: Agent | None, body: Any, status: int, code: str) -> dict[str, Any]:
    """Post ``body``, expect the refusal, and check it changed nothing."""
    before = records()
    answer = problem(post(client, agent, body), status, code)
    assert records() == before
    return answer


def variant(envelope: dict[str, Any], message_id: str, **payload: Any) -> dict[str, Any]:
    """A copy of ``envelope`` under a new message id, with payload fields replaced."""
    changed = copy.deepcopy(envelope)
    changed["message_id"] = message_id
    changed["payload"].update(payload)
    return changed
