"""Snapshots: a session's state as JSON and back. Every state a session passes through comes
back equal after a trip through JSON text, prices never pass through a float, and a machine
resumed from a snapshot goes on exactly as the one that wrote it."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oanp.wire.envelope import Role
from oanp.wire.errors import ProtocolError
from oanp.wire.log import Head
from oanp.wire.machine import Negotiation
from oanp.wire.profiles import Reason
from oanp.wire.snapshot import SNAPSHOT_VERSION, dump_state, load_state
from oanp.wire.state import Phase, SessionState
from tests.support.factories.sessions import (
    ARBITER,
    T0,
    Session,
    accept,
    ack,
    counter,
    negotiating,
    propose,
    withdraw,
)


def through_json(state: SessionState) -> SessionState:
    """What a store gives back: the snapshot written as JSON text and read again."""
    return load_state(json.loads(json.dumps(dump_state(state))))


def states_of(session: Session, moves) -> list[SessionState]:
    """Every state ``session`` passes through while fed ``moves``."""
    states = [session.negotiation.state]
    for move in moves:
        session.feed(move)
        states.append(session.negotiation.state)
    return states


def agreed() -> list[SessionState]:
    session = Session()
    return states_of(
        session,
        [ack(), propose(1, 320), counter(1, 370), propose(2, 340), accept("merchant", 2, 340)],
    )


def stalled() -> list[SessionState]:
    moves = [ack()]
    for round_ in (1, 2, 3):
        moves += [propose(round_, Decimal("300.5")), counter(round_, Decimal("400.25"))]
    return states_of(Session(profile="strict/v0.1", currency="USD"), moves)


def reneged() -> list[SessionState]:
    session = Session(currency="KWD")
    return states_of(
        session, [ack(), propose(1, Decimal("320.125")), counter(1, 370), propose(2, 300)]
    )


def withdrawn() -> list[SessionState]:
    return states_of(Session(), [ack(), propose(1, 320), withdraw("merchant")])


def timed() -> list[SessionState]:
    deadline = "2026-04-28T15:30:00.125Z"
    session = Session(deadline=deadline, response_window_s=60)
    states = states_of(session, [ack(), propose(1, 320)])
    session.negotiation.expire(session.now + timedelta(seconds=60))
    return [*states, session.negotiation.state]


def terminated() -> list[SessionState]:
    session = negotiating()
    session.negotiation.terminate(T0 + timedelta(seconds=5), "operator says stop")
    return [session.negotiation.state]


HISTORIES = {
    "agreed": agreed,
    "stalled": stalled,
    "reneged": reneged,
    "withdrawn": withdrawn,
    "timed": timed,
    "terminated": terminated,
}


@pytest.mark.parametrize("history", HISTORIES.values(), ids=list(HISTORIES))
def test_every_state_of_a_session_survives_a_trip_through_json(history):
    for state in history():
        assert through_json(state) == state


def test_the_histories_reach_every_phase_and_close_reason_they_are_meant_to():
    # So the round trips above really covered terminal states with every optional field set.
    finals = {name: history()[-1] for name, history in HISTORIES.items()}
    assert {name: (s.phase, s.close_reason) for name, s in finals.items()} == {
        "agreed": (Phase.AGREED, None),
        "stalled": (Phase.CLOSED, Reason.STALLED),
        "reneged": (Phase.CLOSED, Reason.BUYER_RENEGED),
        "withdrawn": (Phase.CLOSED, Reason.WITHDRAWN_BY_MERCHANT),
        "timed": (Phase.CLOSED, Reason.RESPONSE_TIMEOUT),
        "terminated": (Phase.CLOSED, Reason.OPERATOR_TERMINATED),
    }
    assert finals["agreed"].final_price == Decimal(340)
    assert finals["timed"].deadline is not None


def test_a_snapshot_is_plain_json_with_prices_as_strings():
    state = stalled()[-1]
    document = dump_state(state)
    assert json.loads(json.dumps(document)) == document
    assert document["v"] == SNAPSHOT_VERSION == 1
    assert document["phase"] == "CLOSED"
    assert document["close_reason"] == "stalled"
    assert document["turn"] is None
    # Decimals as their own text, trailing zeros kept: no price is ever a float.
    assert document["buyer_price"] == "300.5"
    assert document["merchant_price"] == "400.25"
    assert document["last_spread"] == "99.75"
    assert document["opened_at"] == "2026-04-28T14:00:00Z"
    assert document["head"] == {"seq": state.head.seq, "entry_hash": state.head.entry_hash}
    assert document["message_ids"] == sorted(state.message_ids)
    assert set(document) == {"v"} | {f.name for f in dataclasses.fields(SessionState)}


def test_a_snapshot_keeps_a_price_exactly_as_written():
    state = dataclasses.replace(agreed()[-1], final_price=Decimal("340.10"))
    document = dump_state(state)
    assert document["final_price"] == "340.10"
    assert str(through_json(state).final_price) == "340.10"


def test_a_resumed_session_goes_on_exactly_as_the_original():
    original = negotiating()
    original.feed(propose(1, 320))
    original.feed(counter(1, 370))
    resumed = Negotiation(through_json(original.negotiation.state), ARBITER)
    now = original.now + timedelta(seconds=1)
    move = propose(2, 340)
    expected = original.negotiation.feed(move, received_at=now)
    got = resumed.feed(move, received_at=now)
    assert [e.as_json() for e in got] == [e.as_json() for e in expected]
    assert resumed.state == original.negotiation.state


def test_a_resumed_session_still_refuses_a_message_id_it_logged():
    original = negotiating()
    seen = propose(1, 320)
    original.feed(seen)
    resumed = Negotiation(through_json(original.negotiation.state), ARBITER)
    with pytest.raises(ProtocolError) as refused:
        resumed.feed(seen, received_at=original.now + timedelta(seconds=1))
    assert refused.value.code == "message_id_reused"


@pytest.mark.parametrize("version", [None, 0, 2, "1"])
def test_another_snapshot_version_is_refused(version):
    document = dump_state(agreed()[-1])
    if version is None:
        del document["v"]
    else:
        document["v"] = version
    with pytest.raises(ValueError, match=f"snapshot version {version!r} is not 1"):
        load_state(document)


def test_a_snapshot_missing_a_field_is_refused():
    document = dump_state(agreed()[-1])
    del document["merchant_commit"]
    with pytest.raises(KeyError, match="merchant_commit"):
        load_state(document)


def test_a_snapshot_stored_before_later_fields_existed_takes_their_defaults():
    original = agreed()[-1]
    document = dump_state(original)
    for later in ("final_answer", "settlement", "revealed_ceiling", "revealed_floor"):
        del document[later]
    state = load_state(document)
    assert (state.final_answer, state.settlement, state.revealed_ceiling) == (False, None, None)
    assert state == original


def test_a_field_it_cannot_represent_exactly_is_refused():
    # A float price would round-trip as another decimal: refuse rather than store it.
    state = dataclasses.replace(agreed()[-1], final_price=339.99)
    with pytest.raises(TypeError, match="cannot snapshot float"):
        dump_state(state)


# Any state, not only those the machine reached ---------------------------------------------

ids = st.text("ABCDEFGHJKMNPQRSTVWXYZ0123456789-", min_size=1, max_size=26)
moments = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
amounts = st.decimals(min_value=Decimal("0.001"), max_value=Decimal(10**12), places=3)
spreads = st.decimals(min_value=-(10**12), max_value=10**12, places=4)
commits = st.text("0123456789abcdef", min_size=64, max_size=64).map("sha256:".__add__)

states = st.builds(
    SessionState,
    session_id=ids,
    phase=st.sampled_from(Phase),
    round=st.integers(0, 20),
    turn=st.none() | st.sampled_from(Role),
    buyer_agent_id=ids,
    merchant_agent_id=ids,
    item=st.dictionaries(st.text(max_size=8), st.text(max_size=8) | st.integers(0, 10**6)),
    currency=st.sampled_from(["USD", "JPY", "KWD"]),
    max_rounds=st.integers(1, 20),
    profile=st.sampled_from(["default/v0.1", "strict/v0.1"]),
    response_window_s=st.integers(10, 3600),
    deadline=st.none() | moments,
    buyer_commit=commits,
    merchant_commit=st.none() | commits,
    opened_at=moments,
    buyer_price=st.none() | amounts,
    previous_buyer_price=st.none() | amounts,
    merchant_price=st.none() | amounts,
    last_spread=st.none() | spreads,
    stuck_rounds=st.integers(0, 20),
    turn_deadline=st.none() | moments,
    head=st.builds(Head, st.integers(0, 200), commits),
    message_ids=st.frozensets(ids, max_size=6),
    final_price=st.none() | amounts,
    close_reason=st.none() | st.sampled_from(Reason),
    final_answer=st.booleans(),
    settlement=st.none() | st.just("reveal"),
    revealed_ceiling=st.none() | amounts,
    revealed_floor=st.none() | amounts,
)


@given(states)
def test_any_state_survives_a_trip_through_json(state):
    back = through_json(state)
    assert back == state
    # Equal is not enough for decimals (340 == 340.00): the digits must be the same too.
    for name in (
        "buyer_price",
        "merchant_price",
        "last_spread",
        "final_price",
        "revealed_ceiling",
        "revealed_floor",
    ):
        assert str(getattr(back, name)) == str(getattr(state, name))
