"""The arbiter's state machine: the published trace, every refusal, evidence, timers."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from oanp.audit.invariants import audit_log
from oanp.wire.canonical import canonical_bytes
from oanp.wire.envelope import Role, format_timestamp
from oanp.wire.errors import MessageIdSeen, ProtocolError
from oanp.wire.machine import Negotiation
from oanp.wire.profiles import Reason
from oanp.wire.signing import AGREEMENT_TYP, verify_detached
from oanp.wire.state import Phase
from tests.support.factories.sessions import (
    ARBITER,
    BUYER,
    BUYER_COMMIT,
    JWKS,
    MERCHANT,
    MERCHANT_COMMIT,
    SESSION,
    T0,
    Session,
    accept,
    ack,
    counter,
    envelope,
    negotiating,
    opening,
    propose,
    withdraw,
)


def payload(entry):
    return entry.envelope["payload"]


def test_the_published_sfo_jfk_trace():
    session = negotiating()
    session.feed(propose(1, 320))
    verdict_1 = session.feed(counter(1, 370))[-1]
    session.feed(propose(2, 340))
    closing = session.feed(accept("merchant", 2, 340))

    assert payload(verdict_1) == {
        "round": 1,
        "status": "fair",
        "rationale": "opening_moves",
        "buyer_price": 320,
        "merchant_price": 370,
        "spread": 50,
        "checks": {"I1": "pass", "I2": "pass", "I3": "pass", "I4": "pass", "I5": "pass"},
    }
    assert [e.type for e in closing] == ["offer.accept", "round.verdict", "session.agree"]
    assert payload(closing[1])["status"] == "fair"
    assert payload(closing[1])["rationale"] == "agreement"
    agree = payload(closing[2])
    assert agree["final_price"] == 340
    assert agree["session_digest"] == closing[1].entry_hash
    assert agree["agreement"]["log_length"] == closing[1].seq == 8
    signed = verify_detached(
        agree["signature"], canonical_bytes(agree["agreement"]), JWKS, typ=AGREEMENT_TYP
    )
    assert signed.kid == ARBITER.signer.kid
    state = session.negotiation.state
    assert (state.phase, state.round, state.final_price) == (Phase.AGREED, 2, Decimal(340))
    assert audit_log(session.log(), JWKS).ok


def test_later_rounds_are_judged_by_the_spread():
    session = negotiating()
    for round_, (bid, ask) in enumerate([(300, 400), (320, 380), (320, 380)], start=1):
        session.feed(propose(round_, bid))
        verdict = session.feed(counter(round_, ask))[-1]
    rationales = [payload(e)["rationale"] for e in session.entries if e.type == "round.verdict"]
    assert rationales == ["opening_moves", "spread_narrowed", "spread_unchanged"]
    assert payload(verdict)["status"] == "fair_but_stuck"


def test_buyer_accepts_the_standing_counter_from_round_two():
    session = negotiating()
    session.feed(propose(1, 300))
    session.feed(counter(1, 350))
    new = session.feed(accept("buyer", 2, 350))
    assert [e.type for e in new] == ["offer.accept", "round.verdict", "session.agree"]
    assert session.negotiation.state.final_price == Decimal(350)


def _at_final_answer(**open_overrides: Any) -> Session:
    """Round 2 of 2: the merchant's last counter (390) stands, the buyer's final answer due."""
    session = negotiating(max_rounds=2, **open_overrides)
    session.feed(propose(1, 300))
    session.feed(counter(1, 400))
    session.feed(propose(2, 310))
    last = session.feed(counter(2, 390))
    assert [e.type for e in last] == ["offer.counter"]  # the round's verdict waits
    state = session.negotiation.state
    assert (state.phase, state.turn, state.final_answer) == (Phase.NEGOTIATING, Role.BUYER, True)
    return session


def test_the_final_answer_accepts_the_last_counter():
    session = _at_final_answer()
    done = session.feed(accept("buyer", 2, 390))
    assert [e.type for e in done] == ["offer.accept", "round.verdict", "session.agree"]
    assert (payload(done[1])["status"], payload(done[1])["rationale"]) == ("fair", "agreement")
    assert payload(done[-1])["final_price"] == 390
    assert not audit_log(session.log(), None).results["I2"].problems


@pytest.mark.parametrize(
    ("envelope", "code"),
    [
        pytest.param(lambda: propose(2, 320), "out_of_turn", id="a-propose"),
        pytest.param(lambda: propose(3, 320), "out_of_turn", id="a-next-round"),
        pytest.param(lambda: counter(2, 380), "out_of_turn", id="another-counter"),
        pytest.param(lambda: accept("merchant", 2, 310), "out_of_turn", id="merchant-accept"),
        pytest.param(lambda: accept("buyer", 2, 380), "price_not_standing", id="another-price"),
        pytest.param(lambda: accept("buyer", 1, 390), "wrong_round", id="wrong-round"),
    ],
)
def test_nothing_but_the_accept_or_a_withdrawal_is_in_turn(envelope: Any, code: str):
    session = _at_final_answer()
    before = session.negotiation.state
    with pytest.raises(ProtocolError) as refused:
        session.feed(envelope())
    assert refused.value.code == code
    assert session.negotiation.state == before


@pytest.mark.parametrize("role", ["buyer", "merchant"])
def test_a_withdrawal_in_the_final_answer_closes_without_a_verdict(role: str):
    session = _at_final_answer()
    done = session.feed(withdraw(role))
    assert [e.type for e in done] == ["session.close", "session.close"]
    assert payload(done[-1])["reason"] == f"withdrawn_by_{role}"
    assert "round.verdict" not in session.types()[-3:]


def test_without_a_final_answer_the_window_judges_the_round_and_closes():
    session = _at_final_answer()
    window_end = session.negotiation.next_deadline()
    assert window_end == session.now + timedelta(seconds=300)
    assert session.negotiation.expire(window_end - timedelta(seconds=1)) == []
    closed = session.negotiation.expire(window_end)
    assert [e.type for e in closed] == ["round.verdict", "session.close"]
    verdict = payload(closed[0])
    assert (verdict["round"], verdict["status"], verdict["rationale"]) == (
        2,
        "fair",
        "spread_narrowed",
    )
    assert (verdict["buyer_price"], verdict["merchant_price"], verdict["spread"]) == (310, 390, 80)
    assert payload(closed[1]) == {
        "reason": "max_rounds_reached",
        "detail": "the buyer gave no final answer within 300 s",
        "round": 2,
    }
    session.entries.extend(closed)
    assert audit_log(session.log(), None).ok
    # An accept that comes after the window closed gets the timer's answer.
    with pytest.raises(ProtocolError) as refused:
        session.negotiation.feed(accept("buyer", 2, 390), received_at=window_end)
    assert refused.value.code == "timer_expired"


def test_the_deadline_in_the_final_answer_closes_without_a_verdict():
    session = _at_final_answer(deadline=format_timestamp(T0 + timedelta(seconds=60)))
    closed = session.negotiation.expire(T0 + timedelta(seconds=60))
    assert [e.type for e in closed] == ["session.close"]
    assert payload(closed[0])["reason"] == "deadline_expired"


def test_strict_profile_closes_a_stalled_session():
    session = negotiating(profile="strict/v0.1")
    session.feed(propose(1, 300))
    session.feed(counter(1, 400))
    session.feed(propose(2, 300))
    assert session.feed(counter(2, 400))[-1].type == "round.verdict"  # one stuck round
    session.feed(propose(3, 300))
    last = session.feed(counter(3, 400))
    assert payload(last[-1])["reason"] == "stalled"
    assert session.negotiation.state.close_reason is Reason.STALLED


def test_default_profile_tolerates_stalling():
    session = negotiating()
    for round_ in (1, 2, 3):
        session.feed(propose(round_, 300))
        session.feed(counter(round_, 400))
    assert session.negotiation.state.phase is Phase.NEGOTIATING


@pytest.mark.parametrize(
    ("setup", "bad", "code", "status"),
    [
        ([], lambda: counter(1, 370), "out_of_turn", 409),
        ([], lambda: propose(2, 320), "wrong_round", 422),
        ([], lambda: propose(1, 320.001), "price_precision", 422),
        ([], lambda: accept("buyer", 1, 320), "price_not_standing", 422),
        ([propose(1, 320)], lambda: accept("merchant", 1, 330), "price_not_standing", 422),
        ([propose(1, 320)], lambda: propose(1, 330), "out_of_turn", 409),
        ([], lambda: ack(), "out_of_turn", 409),
        ([], lambda: opening(), "session_exists", 409),
        (
            [],
            lambda: envelope(
                "offer.counter",
                {"round": 1, "price": 1, "constraints_commit": "sha256:" + "b" * 64},
                role="buyer",
            ),
            "role_may_not_send",
            422,
        ),
        (
            [],
            lambda: envelope(
                "offer.propose",
                {"round": 1, "price": 1, "constraints_commit": "sha256:" + "b" * 64},
                agent="buyer-002",
            ),
            "not_a_party",
            403,
        ),
        (
            [],
            lambda: envelope(
                "round.verdict",
                {"round": 1, "status": "fair", "rationale": "agreement", "checks": {"I1": "pass"}},
                role="arbiter",
                agent="arbiter.test",
            ),
            "not_a_party",
            403,
        ),
        (
            [],
            lambda: envelope(
                "offer.propose",
                {"round": 1, "price": 1, "constraints_commit": "sha256:" + "b" * 64},
                session_id="another",
            ),
            "unknown_session",
            404,
        ),
    ],
)
def test_refusals_change_nothing(setup, bad, code, status):
    session = negotiating()
    for env in setup:
        session.feed(env)
    before = session.negotiation.state
    with pytest.raises(ProtocolError) as refused:
        session.feed(bad())
    if code is not None:
        assert (refused.value.code, refused.value.status) == (code, status)
    assert session.negotiation.state == before


def test_a_reused_message_id_is_refused():
    session = negotiating()
    session.feed(propose(1, 320))
    session.feed(counter(1, 370))
    reused = envelope(
        "offer.propose",
        {"round": 2, "price": 330, "constraints_commit": "sha256:" + "b" * 64},
        message_id=session.entries[2].envelope["message_id"],
    )
    before = session.negotiation.state
    with pytest.raises(ProtocolError) as refused:
        session.feed(reused)
    assert refused.value.code == "message_id_reused"
    assert session.negotiation.state == before


@pytest.mark.parametrize(
    ("moves", "reason", "failed"),
    [
        ([propose(1, 320), counter(1, 370), propose(2, 310)], "buyer_reneged", "I4"),
        (
            [propose(1, 320), counter(1, 370), propose(2, 330), counter(2, 380)],
            "merchant_reneged",
            "I4",
        ),
        ([propose(1, 320, commit="sha256:" + "d" * 64)], "commitment_mismatch", "I3"),
        ([propose(1, 320), counter(1, 370, commit="0x" + "1" * 16)], "commitment_mismatch", "I3"),
        (
            [propose(1, 320), counter(1, 370), accept("buyer", 2, 370, commit="0x" + "2" * 16)],
            "commitment_mismatch",
            "I3",
        ),
        ([withdraw("merchant", commit="sha256:" + "e" * 64)], "commitment_mismatch", "I3"),
    ],
)
def test_breaches_are_logged_as_evidence_then_judged_and_closed(moves, reason, failed):
    session = negotiating()
    for env in moves[:-1]:
        session.feed(env)
    caused = session.feed(moves[-1])
    assert [e.type for e in caused] == [moves[-1].type.value, "round.verdict", "session.close"]
    assert caused[0].envelope == moves[-1].body  # the breaching envelope itself is the evidence
    verdict, close = payload(caused[1]), payload(caused[2])
    assert (verdict["status"], verdict["rationale"]) == ("violated", reason)
    assert verdict["checks"][failed] == "fail"
    assert close["reason"] == reason
    audit = audit_log(session.log(), JWKS)
    assert audit.ok, {k: r.problems for k, r in audit.results.items()}
    assert audit.results[failed].notes  # the auditor sees the caught breach


def test_a_withdrawal_closes_without_a_verdict():
    session = negotiating()
    session.feed(propose(1, 320))
    caused = session.feed(withdraw("buyer"))
    assert [e.type for e in caused] == ["session.close", "session.close"]
    assert payload(caused[1])["reason"] == "withdrawn_by_buyer"


def test_merchant_may_decline_instead_of_joining():
    from tests.support.factories.sessions import Session

    session = Session()
    caused = session.feed(withdraw("merchant"))
    assert payload(caused[-1])["reason"] == "withdrawn_by_merchant"
    assert session.negotiation.state.phase is Phase.CLOSED


def test_the_response_window_closes_a_silent_session():
    session = negotiating(response_window_s=60)
    session.feed(propose(1, 320))
    due = session.negotiation.next_deadline()
    assert due == session.now + timedelta(seconds=60)
    assert session.negotiation.expire(due - timedelta(microseconds=1)) == []
    closed = session.negotiation.expire(due)
    assert payload(closed[0])["reason"] == "response_timeout"
    assert "merchant" in payload(closed[0])["detail"]
    assert session.negotiation.next_deadline() is None
    assert session.negotiation.expire(due + timedelta(hours=1)) == []  # exactly once


def test_a_late_envelope_loses_the_race_against_its_timer():
    session = negotiating(response_window_s=60)
    due = session.negotiation.next_deadline()
    before = session.negotiation.state
    with pytest.raises(ProtocolError) as refused:
        session.negotiation.feed(propose(1, 320), received_at=due)
    assert refused.value.code == "timer_expired"
    assert session.negotiation.state == before


def test_the_session_deadline_wins_over_the_response_window():
    deadline = "2026-04-28T14:00:30Z"
    session = negotiating(deadline=deadline)
    assert session.negotiation.next_deadline() == T0 + timedelta(seconds=30)
    closed = session.negotiation.expire(T0 + timedelta(seconds=31))
    assert payload(closed[0])["reason"] == "deadline_expired"


@pytest.mark.parametrize("ahead", [timedelta(seconds=0), timedelta(hours=24, seconds=1)])
def test_deadlines_must_be_within_the_next_24_hours(ahead):
    stamp = (T0 + ahead).strftime("%Y-%m-%dT%H:%M:%SZ")
    with pytest.raises(ProtocolError) as refused:
        Negotiation.open(opening(deadline=stamp), received_at=T0, arbiter=ARBITER)
    assert (refused.value.code, refused.value.status) == ("deadline_out_of_range", 422)


def test_an_unknown_profile_is_named():
    with pytest.raises(ProtocolError) as refused:
        Negotiation.open(opening(profile="lenient/v9"), received_at=T0, arbiter=ARBITER)
    assert refused.value.status == 400
    assert refused.value.errors[0].field == "$.payload.profile"


def test_an_operator_can_terminate_a_live_session_once():
    session = negotiating()
    closed = session.negotiation.terminate(session.now, "abuse report 17")
    assert payload(closed[0]) == {
        "reason": "operator_terminated",
        "detail": "abuse report 17",
        "round": 1,
    }
    with pytest.raises(ProtocolError):
        session.negotiation.terminate(session.now, "again")


def test_arbiter_entries_are_numbered_under_the_reserved_prefix():
    session = negotiating()
    session.feed(propose(1, 320))
    verdict = session.feed(counter(1, 370))[-1]
    assert verdict.envelope["message_id"] == f"arbiter:{verdict.seq}"
    assert verdict.envelope["sender"] == {"role": "arbiter", "agent_id": "arbiter.test"}
    assert verdict.envelope["session_id"] == SESSION
    with pytest.raises(ProtocolError) as refused:
        envelope("offer.propose", {}, message_id="arbiter:99")
    assert any(e.field == "$.message_id" for e in refused.value.errors)


def test_parties_are_who_opened_and_who_was_named():
    session = negotiating()
    state = session.negotiation.state
    assert (state.buyer_agent_id, state.merchant_agent_id) == (BUYER, MERCHANT)


# docs/protocol.md §14's order of checks ------------------------------------------------------
#
# Each row's envelope fails its own check and later ones too, so the row passes only when the
# machine runs its check first. The rows are in section 7's order, which the walk below holds.

ORDER = [
    "not_a_party",
    "role_may_not_send",
    "message_id_reused",
    "session_exists",
    "session_terminal",
    "timer_expired",
    "out_of_turn",
    "wrong_round",
    "price_precision",
    "price_not_standing",
]


def _used_id(session):
    return session.entries[0].envelope["message_id"]


def _closed():
    session = negotiating()
    session.feed(withdraw("merchant"))
    return session


def _late():
    session = negotiating()
    session.now += timedelta(seconds=301)  # the buyer's 300 s window has passed
    return session


def _countered():
    session = negotiating()
    session.feed(propose(1, 320))
    session.feed(counter(1, 370))
    return session


ORDER_TABLE = [
    # A stranger's counter, of a type a buyer may not send, with a logged id, round and price
    # wrong: not a party comes first.
    (
        negotiating,
        lambda s: envelope(
            "offer.counter",
            {"round": 9, "price": 1.001, "constraints_commit": BUYER_COMMIT},
            role="buyer",
            agent="buyer-002",
            message_id=_used_id(s),
        ),
        "not_a_party",
    ),
    (
        negotiating,
        lambda s: envelope(
            "offer.counter",
            {"round": 9, "price": 1.001, "constraints_commit": BUYER_COMMIT},
            role="buyer",
            message_id=_used_id(s),
        ),
        "role_may_not_send",
    ),
    # A logged id in a closed session, out of turn and wrong: the idempotency check comes
    # before everything about the session's state, so a retry still gets its first answer.
    (
        _closed,
        lambda s: envelope(
            "offer.counter",
            {"round": 9, "price": 1.001, "constraints_commit": MERCHANT_COMMIT},
            message_id=_used_id(s),
        ),
        "message_id_reused",
    ),
    (_closed, lambda s: opening(max_rounds=3), "session_exists"),
    (_closed, lambda s: counter(9, 1.001), "session_terminal"),
    (_late, lambda s: counter(9, 1.001), "timer_expired"),
    (negotiating, lambda s: counter(9, 1.001), "out_of_turn"),
    (negotiating, lambda s: propose(9, 1.001), "wrong_round"),
    (_countered, lambda s: accept("buyer", 2, 1.001), "price_precision"),
    (_countered, lambda s: accept("buyer", 2, 1), "price_not_standing"),
]


def test_the_table_walks_section_7_in_order():
    assert [code for _, _, code in ORDER_TABLE] == ORDER


@pytest.mark.parametrize(("setup", "bad", "code"), ORDER_TABLE, ids=[r[2] for r in ORDER_TABLE])
def test_each_check_runs_before_the_later_ones(setup, bad, code):
    session = setup()
    before = session.negotiation.state
    with pytest.raises(ProtocolError) as refused:
        session.negotiation.feed(bad(session), received_at=session.now)
    assert refused.value.code == code
    assert session.negotiation.state == before


def test_an_open_of_a_taken_session_id_is_409_whoever_sends_it():
    """An open names no existing session's parties, so a stranger's open is not 403 but the
    reused session_id's 409, as its own buyer's would be."""
    session = negotiating()
    stranger = envelope(
        "session.open",
        {
            "merchant_agent_id": MERCHANT,
            "item": {"route": "SFO-JFK"},
            "currency": "USD",
            "constraints_commit": BUYER_COMMIT,
        },
        agent="buyer-002",
    )
    with pytest.raises(ProtocolError) as refused:
        session.feed(stranger)
    assert (refused.value.code, refused.value.status) == ("session_exists", 409)


def test_a_logged_message_id_is_left_to_the_log_to_resolve():
    """The machine keeps no bodies: it tells the service the id was seen, and the service
    answers a retry with the first answer or a reuse with 409."""
    session = negotiating()
    retried = envelope(
        "session.ack",
        {"constraints_commit": MERCHANT_COMMIT},
        message_id=session.entries[1].envelope["message_id"],
    )
    with pytest.raises(MessageIdSeen) as seen:
        session.feed(retried)
    assert (seen.value.code, seen.value.status) == ("message_id_reused", 409)


def test_only_an_open_may_name_a_new_session():
    with pytest.raises(ProtocolError) as refused:
        Negotiation.open(
            envelope(
                "offer.counter",
                {"round": 1, "price": 1, "constraints_commit": BUYER_COMMIT},
                role="buyer",
            ),
            received_at=T0,
            arbiter=ARBITER,
        )
    # 404 before the 422 of a counter sent by a buyer
    assert (refused.value.code, refused.value.status) == ("unknown_session", 404)
