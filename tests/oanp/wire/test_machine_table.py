"""Property: every (state, message) pair transitions as the table says, or is refused and
changes nothing; every state survives a snapshot; every log the machine writes passes the
offline auditor."""

from __future__ import annotations

import itertools
import json
from datetime import timedelta

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from oanp.audit.invariants import audit_log
from oanp.wire.errors import ProtocolError
from oanp.wire.log import chain_breaks
from oanp.wire.snapshot import dump_state, load_state
from oanp.wire.state import MOVE_EXITS, TRANSITIONS, Phase
from tests.support.factories.sessions import BUYER_COMMIT, JWKS, MERCHANT_COMMIT, Session, envelope

PARTY_TYPES = [
    "session.ack",
    "offer.propose",
    "offer.counter",
    "offer.accept",
    "session.close",
    "session.open",
    "round.verdict",
]
LIKELY = {
    ("OPENING", "merchant"): ["session.ack"] * 8 + ["session.close"],
    ("NEGOTIATING", "buyer"): ["offer.propose"] * 6 + ["offer.accept"] * 2 + ["session.close"],
    ("NEGOTIATING", "merchant"): ["offer.counter"] * 6 + ["offer.accept"] * 2,
}
PRICES = [100, 250, 299.99, 300, 320, 340, 340.5, 370, 400, 420.001]
ids = itertools.count()


def draw_envelope(data, session):
    state = session.negotiation.state
    # Mostly plausible moves, so sessions get deep; anything at all now and then.
    if data.draw(st.integers(0, 9)) == 0 or state.turn is None:
        role = data.draw(st.sampled_from(["buyer", "merchant"]))
        kind = data.draw(st.sampled_from(PARTY_TYPES))
    else:
        role = state.turn.value
        kind = data.draw(st.sampled_from(LIKELY[(state.phase.value, role)]))
    own = BUYER_COMMIT if role == "buyer" else MERCHANT_COMMIT
    commit = data.draw(st.sampled_from([own] * 30 + ["sha256:" + "f" * 64]))
    round_ = data.draw(st.sampled_from([state.round] * 6 + [state.round + 1, 1]))
    used = sorted(state.message_ids)
    reuse = used and data.draw(st.integers(0, 20)) == 0
    message_id = data.draw(st.sampled_from(used)) if reuse else f"p{next(ids)}"
    if kind in ("session.ack",):
        payload = {"constraints_commit": commit}
    elif kind == "session.close":
        payload = {"reason": "withdrawn", "constraints_commit": commit}
    elif kind == "session.open":
        payload = {
            "merchant_agent_id": "merchant-sfo",
            "item": {},
            "currency": "USD",
            "constraints_commit": commit,
        }
    elif kind == "round.verdict":
        payload = {
            "round": max(round_, 1),
            "status": "fair",
            "rationale": "agreement",
            "checks": {"I1": "pass"},
        }
    else:
        standing = state.merchant_price if role == "buyer" else state.buyer_price
        prices = [*PRICES, *([float(standing)] * 6 if standing is not None else [])]
        payload = {
            "round": max(round_, 1),
            "price": data.draw(st.sampled_from(prices)),
            "constraints_commit": commit,
        }
    return envelope(kind, payload, role=role, message_id=message_id)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(["default/v0.1", "strict/v0.1"]), st.integers(1, 6))
def test_every_move_follows_the_table_or_changes_nothing(data, profile, max_rounds):
    session = Session(profile=profile, max_rounds=max_rounds, response_window_s=60)
    for _ in range(data.draw(st.integers(1, 40))):
        negotiation = session.negotiation
        before = negotiation.state
        if data.draw(st.integers(0, 40)) == 0:
            due = negotiation.next_deadline()
            at = session.now + timedelta(seconds=data.draw(st.sampled_from([1, 59, 60, 61])))
            expired = negotiation.expire(at)
            session.entries.extend(expired)
            assert bool(expired) == (due is not None and at >= due)
            continue
        env = draw_envelope(data, session)
        try:
            caused = session.feed(env)
        except ProtocolError:
            assert negotiation.state == before
            continue
        move = TRANSITIONS[(before.phase, before.turn, env.role, env.type)]
        after = negotiation.state
        assert load_state(json.loads(json.dumps(dump_state(after)))) == after
        assert after.phase in MOVE_EXITS[move]
        assert after.phase is not Phase.EVALUATING
        assert caused[0].envelope == env.body
        assert caused[0].seq == before.head.seq + 1
        assert all(e.envelope["sender"]["role"] == "arbiter" for e in caused[1:])
        if after.terminal:
            assert caused[-1].type in ("session.agree", "session.close")
        if after.phase is Phase.NEGOTIATING:
            assert after.round <= after.max_rounds
    state = session.negotiation.state
    event(f"ended {state.phase.value} {state.close_reason or ''} after round {state.round}")
    log = session.log()
    assert chain_breaks(log) == []
    audit = audit_log(log, JWKS)
    assert audit.ok, {k: r.problems for k, r in audit.results.items() if r.problems}
