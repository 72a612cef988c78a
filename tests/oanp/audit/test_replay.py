"""A replay, ``oanp.audit.replay``: at every step k its checklist is what the offline auditor
reports for the first k entries (``audit_log`` and ``verify_log`` on ``entries[:k]``), for the
example logs, the factories' logs and machine-written logs of any course; and what it shows besides
(round, phase, standing prices, verdicts) for the published session, derived by hand."""

from __future__ import annotations

import copy
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oanp.audit import verify_log
from oanp.audit.invariants import audit_log
from oanp.audit.replay import Frame, replay
from oanp.audit.walk import LogAudit
from oanp.wire.canonical import JsonObject
from oanp.wire.envelope import Envelope
from oanp.wire.errors import ProtocolError
from tests.oanp.agents.test_tradeoffs import play
from tests.oanp.wire.test_settlement import Settling
from tests.support.factories.logs import (
    THREE_SESSIONS,
    caught_renege_log,
    jwks,
    session_log,
)
from tests.support.factories.sessions import (
    JWKS,
    Session,
    accept,
    counter,
    negotiating,
    propose,
    withdraw,
)
from tests.support.factories.terms import DECLARED, terms_agents

VECTORS = Path(__file__).resolve().parents[3] / "docs" / "vectors"
Log = list[JsonObject]


def checklist(audit: LogAudit) -> list[dict[str, Any]]:
    """The auditor's report in the shape of a frame's checklist."""
    return [
        {
            "invariant": r.invariant,
            "status": r.status.value,
            "problems": list(r.problems),
            "notes": list(r.notes),
        }
        for r in audit.results.values()
    ]


def assert_matches_the_auditor(log: Log, keys: Any) -> list[Frame]:
    frames = replay(log, keys)
    assert [f.step for f in frames] == list(range(1, len(log) + 1))
    for k, frame in enumerate(frames, start=1):
        shown = frame.as_json()["checks"]
        assert shown == checklist(audit_log(log[:k], keys)), f"step {k}"
        report = verify_log(log[:k], keys)
        assert shown == checklist(report.audits[0]), f"step {k}"
        assert frame.outcome == report.audits[0].outcome, f"step {k}"
        # Step k is computed from the first k entries: the rest of the log changes nothing.
        assert replay(log[:k], keys)[-1] == frame, f"step {k}"
    return frames


def example_logs() -> list[Any]:
    """Every log docs/vectors holds, with the key set it is audited with."""
    session = json.loads((VECTORS / "session.json").read_text())
    cases = [pytest.param(session["entries"], session["jwks"], id="session")]
    bundle = json.loads((VECTORS / "bundle-extended.json").read_text())
    cases += [
        pytest.param(s["log"], bundle["jwks"], id=f"bundle-{s['session_id']}")
        for s in bundle["sessions"]
    ]
    cases += [
        pytest.param(c["input"]["entries"], c["input"]["jwks"], id=f"bad-{c['name']}")
        for c in json.loads((VECTORS / "bad.json").read_text())
        if c["kind"] == "log"
    ]
    return cases


@pytest.mark.parametrize(("log", "keys"), example_logs())
def test_every_step_of_an_example_log_is_the_auditors(log: Log, keys: Any) -> None:
    assert_matches_the_auditor(log, keys)


def final_answer_lapsed() -> Log:
    session = negotiating(max_rounds=2)
    for move in (propose(1, 300), counter(1, 400), propose(2, 310), counter(2, 390)):
        session.feed(move)
    due = session.negotiation.next_deadline()
    assert due is not None
    session.entries.extend(session.negotiation.expire(due))
    return session.log()


def withdrawn() -> Log:
    session = negotiating()
    session.feed(propose(1, 300))
    session.feed(withdraw("merchant"))
    return session.log()


def settled() -> Log:
    s = Settling()
    s.propose(320)
    s.counter(370)
    s.reveal("buyer")
    s.reveal("merchant")
    return s.session.log()


FACTORY_LOGS = {
    **{s.session_id: (lambda s=s: session_log(s)) for s in THREE_SESSIONS},
    "caught-renege": caught_renege_log,
    "final-answer-lapsed": final_answer_lapsed,
    "withdrawn": withdrawn,
    "settled": settled,
}


@pytest.mark.parametrize("make", FACTORY_LOGS.values(), ids=FACTORY_LOGS.keys())
def test_every_step_of_a_factory_log_is_the_auditors(make: Any) -> None:
    assert_matches_the_auditor(make(), jwks())


def test_without_keys_an_agreement_fails_i6_as_for_the_auditor() -> None:
    frames = assert_matches_the_auditor(session_log(), None)
    assert frames[-1].checks[5].status == "fail"


def test_a_log_that_stops_being_readable_stops_at_i2_from_there() -> None:
    log = session_log()
    broken = copy.deepcopy(log)
    broken[4]["envelope"] = {"type": "not an envelope"}
    frames = assert_matches_the_auditor(broken, jwks())
    assert frames[3].entry.type == "offer.counter"
    assert (frames[4].entry.type, frames[4].entry.seq) == (None, 5)
    assert frames[5].entry.type == "offer.propose"
    assert all(f.checks[1].status == "fail" for f in frames[4:])


def test_the_published_session_step_by_step() -> None:
    """docs/protocol.md's SFO→JFK session: 320/370, a fair verdict, 340 accepted, agreed."""
    session = json.loads((VECTORS / "session.json").read_text())
    frames = replay(session["entries"], session["jwks"])
    shown = [
        (
            f.entry.type,
            f.entry.role,
            f.round,
            f.phase,
            f.buyer_price,
            f.merchant_price,
            len(f.offers),
            [(v.round, v.status, v.rationale) for v in f.verdicts],
        )
        for f in frames
    ]
    d = Decimal
    opening = [(1, "fair", "opening_moves")]
    both = [*opening, (2, "fair", "agreement")]
    assert shown == [
        ("session.open", "buyer", 0, "OPENING", None, None, 0, []),
        ("session.ack", "merchant", 1, "NEGOTIATING", None, None, 0, []),
        ("offer.propose", "buyer", 1, "NEGOTIATING", d(320), None, 1, []),
        ("offer.counter", "merchant", 1, "EVALUATING", d(320), d(370), 2, []),
        ("round.verdict", "arbiter", 2, "NEGOTIATING", d(320), d(370), 2, opening),
        ("offer.propose", "buyer", 2, "NEGOTIATING", d(340), d(370), 3, opening),
        ("offer.accept", "merchant", 2, "EVALUATING", d(340), d(340), 4, opening),
        ("round.verdict", "arbiter", 2, "EVALUATING", d(340), d(340), 4, both),
        ("session.agree", "arbiter", 2, "AGREED", d(340), d(340), 4, both),
    ]
    # The counter ends round 1 and owes its verdict, the accept owes its verdict and the
    # agreement: a log cut there fails what it owes, and the next entry settles it.
    failing = [[c.invariant for c in f.checks if c.status == "fail"] for f in frames]
    assert failing == [[], [], [], ["I5"], [], [], ["I5", "I6"], ["I6"], []]
    assert [c.status for c in frames[-1].checks] == ["pass"] * 7
    assert frames[0].checks[5].status == "n/a"
    assert (frames[-1].outcome, frames[-1].entry.price) == ("agreed", d(340))
    verdict = frames[4].verdicts[0]
    assert (verdict.seq, verdict.buyer_price, verdict.merchant_price, verdict.spread) == (
        5,
        d(320),
        d(370),
        d(50),
    )
    assert frames[4].entry.received_at == session["entries"][4]["received_at"]


def test_a_frame_as_json_keeps_the_logs_prices_and_reads_back() -> None:
    frames = replay(session_log(), jwks())
    document = json.loads(json.dumps([f.as_json() for f in frames]))
    last = document[-1]
    assert last["standing"] == {"buyer": 340, "merchant": 340}
    assert [o["price"] for o in last["offers"]] == [320, 370, 340, 340]
    assert last["verdicts"][0] == {
        "seq": 5,
        "round": 1,
        "status": "fair",
        "rationale": "opening_moves",
        "buyer_price": 320,
        "merchant_price": 370,
        "spread": 50,
        "issues_open": None,
    }
    assert last["terms"] is None
    assert last["entry"]["type"] == "session.agree"


def test_an_empty_log_has_no_frames() -> None:
    assert replay([], jwks()) == []


# Any course a session can take ------------------------------------------------------------

# Each example audits every prefix of its log twice over, signatures included: on a loaded
# machine one may take longer than hypothesis's default deadline without anything wrong.

#: What the party in turn does: a price of its own (often), an accept of the other side's
#: standing price, or a withdrawal (rarely, as it ends the session). A move out of turn or a
#: lowered proposal is the machine's to refuse or to log as evidence.
MOVES = st.lists(
    st.tuples(
        st.sampled_from(["price"] * 6 + ["accept", "withdraw"]),
        st.integers(min_value=200, max_value=500),
    ),
    max_size=14,
)


def move(session: Session, kind: str, price: int) -> Envelope:
    state = session.negotiation.state
    role = state.turn.value if state.turn is not None else "buyer"
    if kind == "withdraw":
        return withdraw(role)
    if kind == "accept":
        standing = state.merchant_price if role == "buyer" else state.buyer_price
        return accept(role, state.round, standing if standing is not None else price)
    return (propose if role == "buyer" else counter)(state.round, price)


@settings(deadline=None)
@given(moves=MOVES, max_rounds=st.integers(min_value=1, max_value=4))
def test_every_step_of_any_machine_written_log_is_the_auditors(
    moves: list[tuple[str, int]], max_rounds: int
) -> None:
    """What the machine logs, a caught renege included, replays as the auditor audits its
    every prefix."""
    session = negotiating(max_rounds=max_rounds)
    for kind, price in moves:
        try:
            session.feed(move(session, kind, price))
        except ProtocolError:
            continue
    assert_matches_the_auditor(session.log(), JWKS)


@settings(deadline=None)
@given(data=st.data())
def test_every_step_of_a_tampered_log_is_the_auditors(data: st.DataObject) -> None:
    """An edited entry breaks the chain from there: each prefix shows the breaks it holds."""
    log = session_log()
    position = data.draw(st.integers(min_value=0, max_value=len(log) - 1))
    edited = copy.deepcopy(log)
    edited[position]["received_at"] = "2030-01-01T00:00:00Z"
    assert_matches_the_auditor(edited, jwks())


def test_frames_of_a_terms_session_carry_each_sides_standing_terms_and_issues_open():
    log = play(*terms_agents())
    frames = replay(log, JWKS)
    standing: dict[str, Any] = {}
    for entry, frame in zip(log, frames, strict=True):
        envelope = entry["envelope"]
        if envelope["type"].startswith("offer."):
            standing[envelope["sender"]["role"]] = envelope["payload"]["terms"]
        shown = frame.as_json()["terms"]
        assert shown["buyer"] == standing.get("buyer")
        assert shown["merchant"] == standing.get("merchant")
        # Every issue is open until both have offered; then those their terms differ on.
        apart = (
            len(DECLARED)
            if len(standing) < 2
            else sum(standing["buyer"][i.name] != standing["merchant"][i.name] for i in DECLARED)
        )
        assert shown["issues_open"] == apart
    verdicts = [e["envelope"]["payload"] for e in log if e["envelope"]["type"] == "round.verdict"]
    assert [v["issues_open"] for v in frames[-1].as_json()["verdicts"]] == [
        v["issues_open"] for v in verdicts
    ]
    assert frames[-1].as_json()["terms"]["issues_open"] == 0


def test_frames_of_a_session_without_issues_carry_no_terms():
    assert all(frame.terms is None for frame in replay(session_log(), JWKS))
