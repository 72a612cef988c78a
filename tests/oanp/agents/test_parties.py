from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from itertools import count, pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oanp.agents.parties import (
    AgentStateError,
    Agreed,
    BeyondLimit,
    BuyerAgent,
    Closed,
    InvalidMove,
    MerchantAgent,
    Renege,
)
from oanp.agents.strategies import (
    ACCEPT,
    Boulware,
    Conceder,
    Decision,
    Linear,
    Offer,
    ReferenceBuyer,
    ReferenceMerchant,
    Situation,
    Strategy,
    TimeDependent,
    TitForTat,
    in_own_favour,
)
from oanp.agents.vaults import BuyerVault, MerchantVault
from oanp.wire.canonical import read_json
from oanp.wire.commitments import commit, encode_salt, reference_commit, verify_reveal
from oanp.wire.envelope import envelope_from_json
from oanp.wire.money import fits_currency

D = Decimal
NOW = datetime(2026, 4, 28, 14, 0, tzinfo=UTC)
ITEM = {"route": "SFO-JFK", "date": "2026-04-28"}
SESSION_ID = "s-demo"
BUYER_ID, MERCHANT_ID = "buyer-001", "merchant-001"
BUYER_SALT = encode_salt(bytes(range(32)))
MERCHANT_SALT = encode_salt(bytes(range(32, 64)))
ENVELOPE_KEYS = {
    "oanp_version",
    "message_id",
    "session_id",
    "timestamp",
    "sender",
    "type",
    "payload",
}
Envelope = dict[str, Any]


def demo_buyer_vault() -> BuyerVault:
    return BuyerVault(true_ceiling=D(420), budget_cap=D(400), urgency="medium")


def demo_merchant_vault() -> MerchantVault:
    return MerchantVault(floor_price=D(280), ideal_price=D(400))


def message_ids(prefix: str) -> Callable[[], str]:
    numbers = count(1)
    return lambda: f"{prefix}-{next(numbers)}"


def buyer(
    strategy: Strategy | None = None, vault: BuyerVault | None = None, salt: str = BUYER_SALT
) -> BuyerAgent:
    return BuyerAgent(
        agent_id=BUYER_ID,
        vault=vault or demo_buyer_vault(),
        strategy=strategy or ReferenceBuyer(),
        salt=salt,
        new_message_id=message_ids("b"),
    )


def merchant(
    strategy: Strategy | None = None,
    vault: MerchantVault | None = None,
    salt: str = MERCHANT_SALT,
) -> MerchantAgent:
    return MerchantAgent(
        agent_id=MERCHANT_ID,
        vault=vault or demo_merchant_vault(),
        strategy=strategy or ReferenceMerchant(),
        salt=salt,
        new_message_id=message_ids("m"),
    )


def open_session(agent: BuyerAgent, **overrides: Any) -> Envelope:
    arguments: dict[str, Any] = {
        "session_id": SESSION_ID,
        "merchant_agent_id": MERCHANT_ID,
        "item": ITEM,
        "currency": "USD",
        "now": NOW,
        "max_rounds": 5,
    }
    return agent.open(**(arguments | overrides))


def arbiter(kind: str, payload: dict[str, Any], message_id: str) -> Envelope:
    return {
        "oanp_version": "0.1",
        "message_id": message_id,
        "session_id": SESSION_ID,
        "timestamp": "2026-04-28T14:00:00Z",
        "sender": {"role": "arbiter", "agent_id": "arbiter-test"},
        "type": kind,
        "payload": payload,
    }


@dataclass
class Referee:
    """Just enough of the arbiter (docs/protocol.md §5) to drive two agents: it checks turns,
    rounds and accepts, and fabricates minimal verdicts, agreements and closes."""

    max_rounds: int = 0
    round: int = 0
    buyer_moved: bool = False
    standing: dict[str, Any] = field(default_factory=dict)
    ids: Iterator[int] = field(default_factory=lambda: count(1))

    def _say(self, kind: str, payload: dict[str, Any]) -> Envelope:
        return arbiter(kind, payload, f"arbiter:{next(self.ids)}")

    def after(self, envelope: Envelope) -> list[Envelope]:
        kind, payload, role = envelope["type"], envelope["payload"], envelope["sender"]["role"]
        if kind == "session.open":
            self.max_rounds = payload["max_rounds"]
        elif kind == "session.ack":
            self.round = 1
        elif kind == "session.close":
            return [self._say("session.close", {"reason": f"withdrawn_by_{role}"})]
        if not kind.startswith("offer."):
            return []
        assert payload["round"] == self.round, "a move for the wrong round"
        assert self.buyer_moved == (role == "merchant"), "a move out of turn"
        self.buyer_moved = role == "buyer"
        verdict = self._say("round.verdict", {"round": self.round, "status": "fair"})
        if kind == "offer.accept":
            other = "merchant" if role == "buyer" else "buyer"
            assert payload["price"] == self.standing.get(other), "accept of a price not standing"
            return [verdict, self._say("session.agree", {"final_price": payload["price"]})]
        self.standing[role] = payload["price"]
        if kind == "offer.propose":
            return []
        if self.round == self.max_rounds:
            return [verdict, self._say("session.close", {"reason": "max_rounds_reached"})]
        self.round += 1
        return [verdict]


def run_session(b: BuyerAgent, m: MerchantAgent, first: Envelope) -> list[Envelope]:
    """Log every envelope in order, the arbiter's right after what caused it, and feed each
    one to both agents; their answers are submitted in turn."""
    referee, log = Referee(), []
    submitted: deque[Envelope] = deque([first])
    while submitted:
        envelope = submitted.popleft()
        for entry in [envelope, *referee.after(envelope)]:
            log.append(entry)
            for agent in (b, m):
                submitted.extend(agent.receive(entry, NOW))
    return log


def demo_run() -> tuple[BuyerAgent, MerchantAgent, list[Envelope]]:
    b, m = buyer(), merchant()
    return b, m, run_session(b, m, open_session(b))


def moves(log: list[Envelope]) -> list[tuple[str, str, Any]]:
    return [
        (e["sender"]["role"], e["type"], e["payload"].get("price"))
        for e in log
        if e["type"].startswith("offer.")
    ]


def party_envelopes(log: list[Envelope]) -> list[Envelope]:
    return [e for e in log if e["sender"]["role"] != "arbiter"]


# The published trace --------------------------------------------------------------------------


def test_reference_agents_reproduce_the_published_sfo_jfk_trace() -> None:
    b, m, log = demo_run()
    assert [e["type"] for e in log] == [
        "session.open",
        "session.ack",
        "offer.propose",
        "offer.counter",
        "round.verdict",
        "offer.propose",
        "offer.accept",
        "round.verdict",
        "session.agree",
    ]
    assert moves(log) == [
        ("buyer", "offer.propose", 320),
        ("merchant", "offer.counter", 370),
        ("buyer", "offer.propose", 340),
        ("merchant", "offer.accept", 340),
    ]
    assert [e["payload"].get("round") for e in log if e["type"].startswith("offer.")] == [
        1,
        1,
        2,
        2,
    ]
    assert b.outcome == m.outcome == Agreed(D(340))
    assert b.finished
    assert m.finished


def test_party_envelopes_are_schema_valid_and_carry_the_given_clock() -> None:
    _, _, log = demo_run()
    sent = party_envelopes(log)
    for envelope in sent:
        assert set(envelope) == ENVELOPE_KEYS
        assert envelope["oanp_version"] == "0.1"
        assert envelope["session_id"] == SESSION_ID
        assert envelope["timestamp"] == "2026-04-28T14:00:00Z"
        # The project's strict parser is the arbiter's door: what it refuses, agents must not send.
        envelope_from_json(read_json(json.dumps(envelope)))
    assert [e["message_id"] for e in sent] == ["b-1", "m-1", "b-2", "m-2", "b-3", "m-3"]
    assert sent[0]["sender"] == {"role": "buyer", "agent_id": BUYER_ID}
    assert sent[1]["sender"] == {"role": "merchant", "agent_id": MERCHANT_ID}


def test_open_payload_names_the_merchant_item_and_terms() -> None:
    envelope = open_session(buyer())
    assert envelope["type"] == "session.open"
    assert envelope["payload"] == {
        "merchant_agent_id": MERCHANT_ID,
        "item": ITEM,
        "currency": "USD",
        "max_rounds": 5,
        "profile": "default/v0.1",
        "constraints_commit": commit(demo_buyer_vault().constraints(), ITEM, 5, BUYER_SALT),
    }


def test_open_carries_optional_timers_when_given() -> None:
    envelope = open_session(
        buyer(),
        response_window_s=60,
        deadline=NOW + timedelta(hours=1),
        profile="strict/v0.1",
    )
    payload = envelope["payload"]
    assert payload["response_window_s"] == 60
    assert payload["deadline"] == "2026-04-28T15:00:00Z"
    assert payload["profile"] == "strict/v0.1"


def test_every_party_message_repeats_its_own_commitment() -> None:
    b, m, log = demo_run()
    expected = {
        "buyer": commit(demo_buyer_vault().constraints(), ITEM, 5, BUYER_SALT),
        "merchant": commit(demo_merchant_vault().constraints(), ITEM, 5, MERCHANT_SALT),
    }
    for envelope in party_envelopes(log):
        role = envelope["sender"]["role"]
        assert envelope["payload"]["constraints_commit"] == expected[role]
    assert (b.commitment, m.commitment) == (expected["buyer"], expected["merchant"])


def test_a_reveal_opens_the_commitment_and_shows_honest_prices() -> None:
    b, m, log = demo_run()
    for agent, role in ((b, "buyer"), (m, "merchant")):
        own = [
            (e["payload"]["round"], D(e["payload"]["price"]))
            for e in log
            if e["sender"]["role"] == role and e["type"].startswith("offer.")
        ]
        body = agent.reveal()
        breaches = verify_reveal(
            agent.commitment or "",
            role=role,
            constraints=body["constraints"],
            salt=body["salt"],
            item=ITEM,
            max_rounds=5,
            prices=own,
        )
        assert breaches == []


def test_no_reveal_before_the_session_ended() -> None:
    b = buyer()
    with pytest.raises(AgentStateError):
        b.reveal()
    open_session(b)
    with pytest.raises(AgentStateError):
        b.reveal()


# Vaults and secrecy -----------------------------------------------------------------------


def test_constraints_are_the_reference_shape() -> None:
    # The public docs' golden vector proves the buyer commits over the reference's object.
    assert reference_commit(demo_buyer_vault().constraints(), ITEM, 5) == "0xfd6b8b899c3e4309"
    assert demo_merchant_vault().constraints() == {"floor_price": 280, "ideal_price": 400}
    assert MerchantVault(floor_price=D("279.5"), ideal_price=D(400)).constraints() == {
        "floor_price": 279.5,
        "ideal_price": 400,
    }


def test_no_limit_crosses_the_wire() -> None:
    _, _, log = demo_run()
    wire = json.dumps(party_envelopes(log))
    assert "420" not in wire
    assert "280" not in wire


def test_reprs_are_sealed() -> None:
    b, m, _ = demo_run()
    secrets = ("420", "400", "280", "medium")
    for shown in (repr(b), str(b), repr(m), repr(demo_buyer_vault()), str(demo_merchant_vault())):
        assert not any(secret in shown for secret in secrets), shown
    assert repr(demo_buyer_vault()) == "BuyerVault(<sealed>)"
    assert repr(demo_merchant_vault().limits()) == "Limits(<sealed>)"


@pytest.mark.parametrize(
    "build",
    [
        lambda: BuyerVault(true_ceiling=D(420), budget_cap=D(421)),
        lambda: BuyerVault(true_ceiling=D(-420), budget_cap=D(400)),
        lambda: BuyerVault(true_ceiling=D("NaN"), budget_cap=D(400)),
        lambda: BuyerVault(true_ceiling=420.0, budget_cap=D(400)),  # type: ignore[arg-type]
        lambda: MerchantVault(floor_price=D(401), ideal_price=D(400)),
        lambda: MerchantVault(floor_price=D(0), ideal_price=D(400)),
    ],
)
def test_vaults_refuse_incoherent_limits_without_naming_them(build: Callable[[], object]) -> None:
    with pytest.raises(ValueError, match="must") as raised:
        build()
    assert not any(number in str(raised.value) for number in ("420", "421", "401", "400"))


def test_vaults_are_frozen() -> None:
    vault = demo_buyer_vault()
    with pytest.raises(AttributeError):
        vault.true_ceiling = D(1)  # type: ignore[misc]


# Guards -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scripted:
    """A deliberately broken strategy: it plays a fixed move per round, checking nothing."""

    by_round: dict[int, Decision]

    def decide(self, situation: Situation) -> Decision:
        return self.by_round[situation.round]


def test_buyer_guard_refuses_an_offer_above_its_ceiling() -> None:
    b = buyer(Scripted({1: Offer(D("420.01"))}))
    with pytest.raises(BeyondLimit, match="ceiling") as raised:
        run_session(b, merchant(), open_session(b))
    assert "420 " not in str(raised.value)


def test_merchant_guard_refuses_a_counter_below_its_floor() -> None:
    b = buyer()
    with pytest.raises(BeyondLimit, match="floor"):
        run_session(b, merchant(Scripted({1: Offer(D("279.99"))})), open_session(b))


def test_guard_refuses_to_accept_a_price_beyond_the_limit() -> None:
    b = buyer(Scripted({1: Offer(D(250))}))
    with pytest.raises(BeyondLimit, match="accept"):
        run_session(b, merchant(Scripted({1: ACCEPT})), open_session(b))


def test_buyer_guard_refuses_to_renege() -> None:
    b = buyer(Scripted({1: Offer(D(330)), 2: Offer(D(320))}))
    with pytest.raises(Renege):
        run_session(b, merchant(), open_session(b))


def test_merchant_guard_refuses_to_renege() -> None:
    b = buyer()
    with pytest.raises(Renege):
        run_session(b, merchant(Scripted({1: Offer(D(370)), 2: Offer(D(380))})), open_session(b))


@pytest.mark.parametrize("move", [ACCEPT, Offer(D("320.001")), Offer(D(0))])
def test_guard_refuses_moves_the_arbiter_must_refuse(move: Decision) -> None:
    b = buyer(Scripted({1: move}))
    with pytest.raises(InvalidMove):
        run_session(b, merchant(), open_session(b))


def test_a_guarded_move_leaves_the_agent_in_its_session() -> None:
    b = buyer(Scripted({1: Offer(D(500))}))
    m = merchant()
    ack = m.receive(open_session(b), NOW)[0]
    with pytest.raises(BeyondLimit):
        b.receive(ack, NOW)
    assert b.outcome is None
    assert not b.finished


# Following the stream -----------------------------------------------------------------------


def test_buyer_proposes_after_the_ack_and_merchant_answers_each_propose_once() -> None:
    b, m = buyer(), merchant()
    opening = open_session(b)
    assert b.receive(opening, NOW) == []
    (ack,) = m.receive(opening, NOW)
    assert ack["type"] == "session.ack"
    (propose,) = b.receive(ack, NOW)
    assert (propose["type"], propose["payload"]["round"]) == ("offer.propose", 1)
    (counter,) = m.receive(propose, NOW)
    assert counter["type"] == "offer.counter"
    # Redelivery (an SSE stream resumed after a reconnect) must not make it answer twice.
    assert m.receive(propose, NOW) == []


def test_merchant_ignores_sessions_that_do_not_name_it() -> None:
    m = merchant()
    elsewhere = open_session(buyer(), merchant_agent_id="merchant-002")
    assert m.receive(elsewhere, NOW) == []
    assert m.commitment is None


def test_agents_ignore_other_sessions() -> None:
    b, m = buyer(), merchant()
    opening = open_session(b)
    (ack,) = m.receive(opening, NOW)
    assert b.receive(ack | {"session_id": "s-other"}, NOW) == []


@pytest.mark.parametrize(
    "verdict",
    [
        {"round": 1, "status": "violated"},
        {"round": 5, "status": "fair"},
    ],
)
def test_buyer_stays_silent_after_a_violated_or_final_verdict(verdict: dict[str, Any]) -> None:
    b, m = buyer(), merchant()
    opening = open_session(b)
    (ack,) = m.receive(opening, NOW)
    b.receive(ack, NOW)
    assert b.receive(arbiter("round.verdict", verdict, "arbiter:9"), NOW) == []


def test_buyer_answers_a_stuck_verdict_with_the_next_round() -> None:
    b, m = buyer(), merchant()
    opening = open_session(b)
    (ack,) = m.receive(opening, NOW)
    (propose,) = b.receive(ack, NOW)
    for entry in (propose, *m.receive(propose, NOW)):
        b.receive(entry, NOW)
    verdict = arbiter("round.verdict", {"round": 1, "status": "fair_but_stuck"}, "arbiter:1")
    (next_move,) = b.receive(verdict, NOW)
    assert next_move["payload"]["round"] == 2


def test_after_agreement_agents_send_nothing() -> None:
    b, m, _ = demo_run()
    late = arbiter("round.verdict", {"round": 2, "status": "fair"}, "arbiter:late")
    assert b.receive(late, NOW) == []
    assert m.receive(late, NOW) == []
    with pytest.raises(AgentStateError):
        b.withdraw(NOW)


def test_no_zone_of_agreement_ends_at_max_rounds_with_the_buyer_at_its_ceiling() -> None:
    b = buyer(Linear(), BuyerVault(true_ceiling=D(250), budget_cap=D(200)))
    m = merchant(Boulware())
    log = run_session(b, m, open_session(b))
    assert log[-1]["type"] == "session.close"
    # The last counter is above its ceiling: the buyer's final answer is to withdraw.
    assert b.outcome == m.outcome == Closed("withdrawn_by_buyer")
    assert (log[-2]["type"], log[-2]["sender"]["role"]) == ("session.close", "buyer")
    proposes = [p for role, kind, p in moves(log) if kind == "offer.propose"]
    counters = [p for role, kind, p in moves(log) if kind == "offer.counter"]
    assert proposes[-1] == 250  # time-dependent buyers name their ceiling in the last round
    assert min(counters) == 280


def test_two_tit_for_tat_agents_reach_agreement() -> None:
    # Without the minimum concession both would mirror the other's stillness until round 20.
    b = buyer(TitForTat())
    log = run_session(b, merchant(TitForTat()), open_session(b, max_rounds=20))
    assert isinstance(b.outcome, Agreed)
    assert len([e for e in log if e["type"] == "round.verdict"]) < 20


def test_withdrawal_closes_the_session_for_both() -> None:
    b, m = buyer(), merchant()
    opening = open_session(b)
    (ack,) = m.receive(opening, NOW)
    for entry in (opening, ack):
        b.receive(entry, NOW)
    withdrawal = b.withdraw(NOW)
    assert withdrawal["type"] == "session.close"
    assert withdrawal["payload"] == {"reason": "withdrawn", "constraints_commit": b.commitment}
    close = arbiter("session.close", {"reason": "withdrawn_by_buyer"}, "arbiter:1")
    for agent in (b, m):
        assert agent.receive(withdrawal, NOW) == []
        assert agent.finished
        assert agent.outcome is None
        assert agent.receive(close, NOW) == []
        assert agent.outcome == Closed("withdrawn_by_buyer")


def test_misuse_is_refused() -> None:
    b = buyer()
    with pytest.raises(AgentStateError):
        b.withdraw(NOW)
    with pytest.raises(ValueError, match="timezone"):
        open_session(b, now=datetime(2026, 4, 28, 14, 0))
    with pytest.raises(ValueError, match="currency"):
        open_session(b, currency="XXX")
    open_session(b)
    with pytest.raises(AgentStateError):
        open_session(b)


# Properties ---------------------------------------------------------------------------------

amounts = st.decimals(min_value=D(1), max_value=D(10) ** 6, places=2)
buyer_strategies = st.sampled_from(
    [ReferenceBuyer(), Boulware(), Linear(), Conceder(), TitForTat()]
)
merchant_strategies = st.sampled_from(
    [ReferenceMerchant(), Boulware(), Linear(), Conceder(), TitForTat()]
)


@settings(deadline=None, max_examples=150)
@given(
    buyer_limits=st.lists(amounts, min_size=2, max_size=2).map(sorted),
    merchant_limits=st.lists(amounts, min_size=2, max_size=2).map(sorted),
    buyer_strategy=buyer_strategies,
    merchant_strategy=merchant_strategies,
    currency=st.sampled_from(["USD", "JPY", "KWD"]),
    max_rounds=st.integers(1, 20),
)
def test_any_pairing_ends_within_both_limits(
    buyer_limits: list[Decimal],
    merchant_limits: list[Decimal],
    buyer_strategy: Strategy,
    merchant_strategy: Strategy,
    currency: str,
    max_rounds: int,
) -> None:
    budget_cap, ceiling = buyer_limits
    floor, ideal = merchant_limits
    b = buyer(buyer_strategy, BuyerVault(true_ceiling=ceiling, budget_cap=budget_cap))
    m = merchant(merchant_strategy, MerchantVault(floor_price=floor, ideal_price=ideal))

    log = run_session(b, m, open_session(b, currency=currency, max_rounds=max_rounds))

    for envelope in party_envelopes(log):
        envelope_from_json(read_json(json.dumps(envelope)))
    prices = {
        role: [D(str(p)) for r, kind, p in moves(log) if r == role and kind != "offer.accept"]
        for role in ("buyer", "merchant")
    }
    assert all(a <= b for a, b in pairwise(prices["buyer"]))
    assert all(a >= b for a, b in pairwise(prices["merchant"]))
    assert all(p <= ceiling for p in prices["buyer"])
    assert all(p >= floor for p in prices["merchant"])
    assert all(fits_currency(p, currency) for p in prices["buyer"] + prices["merchant"])
    assert b.outcome == m.outcome is not None
    if isinstance(b.outcome, Agreed):
        assert floor <= b.outcome.price <= ceiling
    elif isinstance(buyer_strategy, TimeDependent):
        # Its last propose is its ceiling, which a merchant's last word takes if it can.
        assert in_own_favour("buyer", ceiling, currency) < floor
