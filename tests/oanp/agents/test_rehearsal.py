"""``rehearse``: two in-process agents and the arbiter's machine, no transport. Both agents see
the one shared stream in log order, their answers are fed back in the order they came, refusals
propagate, and a session that will not end fails loudly. ``sfo_jfk_agents`` gives the
published session's agents, repeatably."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest

from oanp.agents import rehearsal
from oanp.agents.rehearsal import Rehearsal, rehearse, sfo_jfk_agents
from oanp.audit.invariants import audit_log
from oanp.wire.commitments import commit, encode_salt
from oanp.wire.errors import ProtocolError
from oanp.wire.log import Entry
from oanp.wire.state import Arbiter, Phase
from tests.support.factories.logs import (
    ARBITER_ID,
    JWKS_URI,
    SteppingClock,
    arbiter_key,
    counter_ids,
    jwks,
)

ITEM = {"route": "SFO-JFK", "date": "2026-04-28"}


class Spy:
    """Passes every call to ``agent``, recording what it was shown and, in ``answered`` (which
    spies may share), the message ids it answered with."""

    def __init__(self, agent: Any, answered: list[str]) -> None:
        self.agent = agent
        self.seen: list[Mapping[str, Any]] = []
        self.answered = answered

    def __getattr__(self, name: str) -> Any:
        return getattr(self.agent, name)

    def receive(self, envelope: Mapping[str, Any], now: datetime) -> list[Any]:
        self.seen.append(envelope)
        answers = self.agent.receive(envelope, now)
        self.answered += [a["message_id"] for a in answers]
        return answers


class Silent:
    """A merchant that never answers."""

    def receive(self, envelope: Mapping[str, Any], now: datetime) -> list[Any]:
        return []


def agents(**kwargs: Any):
    return sfo_jfk_agents(
        buyer_id="buyer-001",
        merchant_id="merchant-sfo",
        new_message_id=counter_ids("msg"),
        **kwargs,
    )


def run(buyer, merchant, **kwargs: Any) -> Rehearsal:
    clock = SteppingClock()
    opening = buyer.open(
        session_id="sess-rehearsal",
        merchant_agent_id="merchant-sfo",
        item=ITEM,
        currency="USD",
        now=clock(),
    )
    arbiter = Arbiter(ARBITER_ID, arbiter_key(), JWKS_URI)
    return rehearse(
        buyer=buyer, merchant=merchant, arbiter=arbiter, opening=opening, clock=clock, **kwargs
    )


def summary(entries: list[Entry]) -> list[tuple[str, str, object]]:
    return [
        (e.envelope["sender"]["role"], e.type, e.envelope["payload"].get("price")) for e in entries
    ]


def test_the_sfo_jfk_agents_settle_at_340_in_two_rounds():
    result = run(*agents())
    assert summary(result.entries) == [
        ("buyer", "session.open", None),
        ("merchant", "session.ack", None),
        ("buyer", "offer.propose", 320),
        ("merchant", "offer.counter", 370),
        ("arbiter", "round.verdict", None),
        ("buyer", "offer.propose", 340),
        ("merchant", "offer.accept", 340),
        ("arbiter", "round.verdict", None),
        ("arbiter", "session.agree", None),
    ]
    state = result.negotiation.state
    assert (state.phase, state.round, state.final_price) == (Phase.AGREED, 2, Decimal(340))


def test_the_rehearsal_returns_the_machines_own_log():
    result = run(*agents())
    assert [e.seq for e in result.entries] == list(range(1, 10))
    assert result.negotiation.state.head.entry_hash == result.entries[-1].entry_hash
    assert audit_log([e.as_json() for e in result.entries], jwks()).ok


def test_both_agents_see_the_whole_stream_in_log_order():
    buyer, merchant = (Spy(a, []) for a in agents())
    result = run(buyer, merchant)
    stream = [e.envelope for e in result.entries]
    assert buyer.seen == stream
    assert merchant.seen == stream


def test_answers_are_logged_in_the_order_they_were_given():
    answered: list[str] = []
    buyer, merchant = (Spy(a, answered) for a in agents())
    result = run(buyer, merchant)
    logged = [e.envelope["message_id"] for e in result.entries[1:]]
    assert [m for m in logged if not m.startswith("arbiter:")] == answered
    assert len(answered) == 5


def test_on_entry_sees_each_entry_once_as_it_is_logged():
    shown: list[Entry] = []
    result = run(*agents(), on_entry=shown.append)
    assert shown == result.entries
    assert all(a is b for a, b in zip(shown, result.entries, strict=True))


def test_the_clock_is_read_for_every_feed_and_every_entry_shown():
    result = run(*agents())
    seconds = [int(e.received_at[-3:-1]) for e in result.entries]
    # 00 is the buyer's open; then each feed stamps its entries, and each entry shown to the
    # agents takes one more reading. An accept's verdict and agreement share its stamp.
    assert seconds == [1, 3, 5, 7, 7, 10, 12, 12, 12]


def test_a_session_nobody_answers_ends_by_its_timer():
    buyer, _ = agents()
    result = run(buyer, Silent())
    assert [e.type for e in result.entries] == ["session.open", "session.close"]
    assert result.negotiation.state.phase is Phase.CLOSED
    assert result.negotiation.state.close_reason == "response_timeout"


def test_a_refusal_propagates():
    class Eager:
        """A merchant that counters before it has joined: out of turn."""

        def __init__(self, merchant: Any) -> None:
            self.merchant = merchant

        def receive(self, envelope: Mapping[str, Any], now: datetime) -> list[Any]:
            answers = self.merchant.receive(envelope, now)
            for answer in answers:
                answer["type"] = "offer.counter"
                answer["payload"] = {**answer["payload"], "round": 1, "price": 370}
            return answers

    buyer, merchant = agents()
    with pytest.raises(ProtocolError) as refused:
        run(buyer, Eager(merchant))
    assert refused.value.code == "out_of_turn"


def test_a_session_that_will_not_end_fails_loudly(monkeypatch):
    # The SFO→JFK session needs five party envelopes after the open.
    monkeypatch.setattr(rehearsal, "MAX_ENVELOPES", 4)
    with pytest.raises(RuntimeError, match="no end after 4 envelopes"):
        run(*agents())


def test_the_guard_leaves_room_for_the_longest_session():
    # 20 rounds of propose and counter, the ack and a final accept.
    assert rehearsal.MAX_ENVELOPES >= 1 + 2 * 20 + 1


def test_nothing_is_fed_once_the_session_has_ended():
    class Chatty(Spy):
        """A buyer that repeats its last move, under a new id, after the agreement."""

        def receive(self, envelope: Mapping[str, Any], now: datetime) -> list[Any]:
            answers = super().receive(envelope, now)
            if envelope["type"] == "session.agree":
                answers.append(dict(self.last, message_id="late-1"))
            self.last = answers[-1] if answers else self.last
            return answers

    buyer, merchant = agents()
    chatty = Chatty(buyer, [])
    chatty.last = {}
    # Fed, the late envelope would raise session_terminal: the rehearsal stops before it.
    result = run(chatty, merchant)
    assert chatty.last["message_id"] == "late-1"
    assert [e.type for e in result.entries][-1] == "session.agree"
    assert len(result.entries) == 9


# sfo_jfk_agents -----------------------------------------------------------------------------


def test_the_agents_commit_to_the_published_limits_with_the_fixed_salts():
    buyer, merchant = agents()
    result = run(buyer, merchant)
    opened, acked = (e.envelope["payload"]["constraints_commit"] for e in result.entries[:2])
    assert opened == commit(
        {"budget_cap": 400, "true_ceiling": 420, "urgency": "medium"},
        ITEM,
        5,
        encode_salt(b"\x01" * 32),
    )
    assert acked == commit(
        {"floor_price": 280, "ideal_price": 400}, ITEM, 5, encode_salt(b"\x02" * 32)
    )
    assert (buyer.agent_id, merchant.agent_id) == ("buyer-001", "merchant-sfo")


def test_the_same_agents_rehearse_the_same_bytes():
    first = [e.entry_hash for e in run(*agents()).entries]
    second = [e.entry_hash for e in run(*agents()).entries]
    assert first == second


def test_fresh_salts_change_the_commitments_but_not_the_prices():
    fixed = run(*agents())
    salted = run(*agents(buyer_salt=b"\x03" * 32, merchant_salt=b"\x04" * 32))
    assert summary(salted.entries) == summary(fixed.entries)
    for position in (0, 1):
        assert (
            salted.entries[position].envelope["payload"]["constraints_commit"]
            != fixed.entries[position].envelope["payload"]["constraints_commit"]
        )


def test_the_agents_mint_message_ids_with_the_given_function():
    result = run(*agents())
    party_ids = [
        e.envelope["message_id"]
        for e in result.entries
        if e.envelope["sender"]["role"] != "arbiter"
    ]
    assert party_ids == [f"msg-{n:04d}" for n in range(1, 7)]
