"""The MCP agent's terms view comes from the session summary: where the issues stand, and the
terms an accept repeats, are the summary's (only the guardrails, on the agent's turn, read the
session's log, for the standing prices the summary does not carry)."""

from __future__ import annotations

import json
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from oanp.net.mcp_agent import McpAgent
from tests.support.factories.sessions import (
    BUYER_COMMIT,
    MERCHANT_COMMIT,
    SESSION,
    Session,
    counter,
    envelope,
    negotiating,
    propose,
)
from tests.support.factories.terms import ISSUES

FAST, SLOW = {"delivery_days": 3, "support": "premium"}, {"delivery_days": 9, "support": "none"}


def terms_log(offered: bool = True) -> list[dict[str, Any]]:
    """A terms session's log at round 2, where the buyer offered 320 fast and the merchant
    380 slow, or (not ``offered``) at round 1, before either offered."""
    session = Session(profile="terms/v0.1", issues=ISSUES)
    session.feed(envelope("session.ack", {"constraints_commit": MERCHANT_COMMIT}))
    offers = (
        ("offer.propose", 320, FAST, BUYER_COMMIT),
        ("offer.counter", 380, SLOW, MERCHANT_COMMIT),
    )
    for kind, price, terms, commit in offers if offered else ():
        payload = {"round": 1, "price": price, "constraints_commit": commit, "terms": terms}
        session.feed(envelope(kind, payload))
    return session.log()


def price_log() -> list[dict[str, Any]]:
    session = negotiating()
    session.feed(propose(1, 320))
    session.feed(counter(1, 380))
    return session.log()


class SummaryOnly:
    """An arbiter client that answers the summary it is given (and, for the guardrails, a log
    the machine wrote), and takes submissions."""

    def __init__(self, summary: dict[str, Any], log: list[dict[str, Any]] | None = None) -> None:
        self.answer = summary
        self.entries = terms_log() if log is None else log
        self.submitted: list[dict[str, Any]] = []

    def summary(self, session_id: str) -> dict[str, Any]:
        assert session_id == SESSION
        return self.answer

    def log(self, session_id: str) -> list[dict[str, Any]]:
        assert session_id == SESSION
        return self.entries

    def submit(self, body: bytes) -> Any:
        self.submitted.append(json.loads(body))
        return SimpleNamespace(entry={}, arbiter=[], session=self.answer, repeated=False)


def summary(profile: str = "terms/v0.1", **extra: Any) -> dict[str, Any]:
    return {
        "session_id": SESSION,
        "state": "NEGOTIATING",
        "round": 2,
        "turn": "buyer",
        "final_answer": False,
        "currency": "USD",
        "max_rounds": 5,
        "profile": profile,
        "outcome": None,
        **extra,
    }


STANDING = {"issues": ISSUES, "buyer": FAST, "merchant": SLOW, "issues_open": 2}


def mcp_agent(client: SummaryOnly, role: str) -> McpAgent:
    made = McpAgent(client, agent_id=f"{role}-001", role=role, state_path=None)  # type: ignore[arg-type]
    made.remember(SESSION, BUYER_COMMIT)
    return made


@pytest.mark.parametrize(
    ("role", "yours", "theirs"), [("buyer", FAST, SLOW), ("merchant", SLOW, FAST)]
)
def test_the_terms_view_is_the_summary_s_terms_seen_from_each_side(
    role: str, yours: dict[str, Any], theirs: dict[str, Any]
) -> None:
    # A log where nobody has offered yet: the standing terms can only be the summary's.
    view = mcp_agent(SummaryOnly(summary(terms=STANDING), terms_log(offered=False)), role).turn(
        SESSION
    )
    assert view["terms"] == {
        "issues": ISSUES,
        "yours": yours,
        "theirs": theirs,
        "issues_open": 2,
    }


def test_an_accept_without_terms_repeats_the_other_side_s_from_the_summary() -> None:
    client = SummaryOnly(summary(terms=STANDING))
    mcp_agent(client, "buyer").offer(SESSION, "offer.accept", 2, Decimal(380))
    (sent,) = client.submitted
    assert sent["payload"]["terms"] == SLOW


def test_an_accept_in_a_terms_session_whose_summary_lacks_the_terms_asks_for_them() -> None:
    client = SummaryOnly(summary())  # an arbiter from before the summary's terms
    with pytest.raises(ToolError, match="name the terms you accept"):
        mcp_agent(client, "buyer").offer(SESSION, "offer.accept", 2, Decimal(380))
    assert client.submitted == []
    mcp_agent(client, "buyer").offer(SESSION, "offer.accept", 2, Decimal(380), terms=SLOW)
    assert client.submitted[0]["payload"]["terms"] == SLOW


def test_a_price_only_session_has_no_terms_view() -> None:
    view = mcp_agent(SummaryOnly(summary("default/v0.1"), price_log()), "buyer").turn(SESSION)
    assert "terms" not in view


class InboxOnly:
    """A client whose inbox opens empty, counting how often it is opened."""

    def __init__(self) -> None:
        self.opened = 0

    def inbox(self) -> Any:
        self.opened += 1
        return iter(())


def test_the_inbox_is_followed_from_the_servers_start_not_from_the_first_wait() -> None:
    """An inbox starts at the arbiter's live head: opened at the first wait, it would miss every
    session opened between the server's start and that wait."""
    client = InboxOnly()
    made = McpAgent(client, agent_id="merchant-001", role="merchant", state_path=None)  # type: ignore[arg-type]
    made.follow_inbox()
    assert client.opened == 1
    assert made.wait(None, 0) == {"events": []}
    assert client.opened == 1  # the wait reads the stream opened at the start
