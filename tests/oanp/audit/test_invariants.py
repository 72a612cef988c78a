"""The offline auditor, ``audit_log``, called directly: what it reports for honest logs, and for
each invariant I1-I7 the exact problem it finds in a log forged to break it. Forged logs keep an
intact hash chain and a valid signature (``forge``), so only the invariant checks can tell."""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import pytest

from oanp.audit.invariants import audit_log
from oanp.audit.walk import InvariantResult, LogAudit, Status
from oanp.wire.canonical import JsonObject, canonical_bytes
from oanp.wire.envelope import INVARIANTS
from oanp.wire.profiles import Profile, registry
from oanp.wire.signing import AGREEMENT_TYP
from tests.oanp.audit.test_audit import edited
from tests.support.factories.logs import (
    LINEAR_DEAL,
    NO_DEAL,
    SFO_JFK,
    arbiter_key,
    caught_renege_log,
    forge,
    jwks,
    other_key,
    rechain,
    self_dealing_log,
    session_log,
)
from tests.support.factories.sessions import (
    BUYER,
    Session,
    counter,
    negotiating,
    propose,
    withdraw,
)

Log = list[JsonObject]
KEYS = jwks()
OTHER_COMMIT = "sha256:" + "d" * 64


def audit(log: Log, keys: Any = KEYS, **kwargs: Any) -> LogAudit:
    return audit_log(log, keys, **kwargs)


def failures(report: LogAudit) -> dict[str, list[str]]:
    """Failing invariant -> its problems."""
    return {i: r.problems for i, r in report.results.items() if r.problems}


def notes(report: LogAudit) -> dict[str, list[str]]:
    return {i: r.notes for i, r in report.results.items() if r.notes}


def with_entry(log: Log, position: int, entry: JsonObject) -> Log:
    return [*log[:position], entry, *log[position:]]


def copy_of(entry: JsonObject, *, message_id: str, **payload: Any) -> JsonObject:
    """``entry`` under another ``message_id``, with ``payload`` fields changed."""
    out = copy.deepcopy(entry)
    out["envelope"]["message_id"] = message_id
    out["envelope"]["payload"].update(payload)
    return out


def resigned(log: Log, **agreement: Any) -> Log:
    """``log`` forged, then its agreement changed by ``agreement`` and signed again by the
    arbiter's real key: a faulty arbiter's own, valid signature over a wrong agreement."""
    log = copy.deepcopy(forge(log))
    payload = log[-1]["envelope"]["payload"]
    payload["agreement"].update(agreement)
    payload["signature"] = arbiter_key().sign_detached(
        canonical_bytes(payload["agreement"]), typ=AGREEMENT_TYP
    )
    return rechain(log)


def machine_log(*moves, **open_overrides: Any) -> Log:
    """The log the arbiter's machine writes for ``moves`` after the merchant's ack."""
    session = negotiating(**open_overrides)
    for move in moves:
        session.feed(move)
    return session.log()


# Honest logs --------------------------------------------------------------------------------


def test_the_published_session_passes_every_invariant():
    report = audit(session_log())
    assert [(i, r.status) for i, r in report.results.items()] == [
        (i, Status.PASS) for i in INVARIANTS
    ]
    assert report.ok
    assert (report.session_id, report.entries) == (SFO_JFK.session_id, 9)
    assert (report.outcome, report.final_price, report.agreement_valid) == (
        "agreed",
        Decimal(340),
        True,
    )
    assert notes(report) == {}


def test_a_session_without_agreement_has_no_i6_to_check():
    report = audit(session_log(NO_DEAL))
    assert report.ok
    assert report.results["I6"].status is Status.NOT_APPLICABLE
    assert report.results["I6"].notes == ["no agreement in this log"]
    assert (report.outcome, report.final_price, report.agreement_valid) == (
        "max_rounds_reached",
        None,
        None,
    )


def test_a_four_round_deal_passes():
    report = audit(session_log(LINEAR_DEAL))
    assert report.ok
    assert report.outcome == "agreed"


def test_a_live_session_passes_with_a_note():
    report = audit(session_log()[:5])
    assert report.ok
    assert report.outcome is None
    assert report.results["I1"].notes == ["the session is still live after 5 entries"]


def test_a_withdrawal_passes_without_a_verdict():
    report = audit(machine_log(propose(1, 320), withdraw("buyer")))
    assert report.ok
    assert report.outcome == "withdrawn_by_buyer"


def test_the_status_of_an_invariant():
    assert [s.value for s in Status] == ["pass", "fail", "n/a"]
    assert InvariantResult("I1").status is Status.PASS
    assert InvariantResult("I6", applicable=False).status is Status.NOT_APPLICABLE
    # A problem fails an invariant even where it would not apply.
    assert InvariantResult("I6", ["x"], applicable=False).status is Status.FAIL


def test_only_a_failure_makes_an_audit_not_ok():
    results = {i: InvariantResult(i) for i in INVARIANTS}
    results["I6"].applicable = False
    assert LogAudit("s", 1, results).ok
    results["I3"].problems.append("x")
    assert not LogAudit("s", 1, results).ok


# I1: rounds within max_rounds, nothing after the end ----------------------------------------


def _round_past_max() -> Log:
    return edited(session_log(NO_DEAL), 0, "envelope", "payload", "max_rounds", value=2)


def _closed_before_max() -> Log:
    return edited(session_log(NO_DEAL), 0, "envelope", "payload", "max_rounds", value=4)


def _owed_close_replaced() -> Log:
    return edited(session_log(NO_DEAL), 11, "envelope", "payload", "reason", value="stalled")


def _entry_after_the_end() -> Log:
    log = session_log()
    return [*log, copy_of(log[7], message_id="arbiter:10")]


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        pytest.param(_round_past_max, "entry 9: round 3 exceeds max_rounds 2", id="round-past-max"),
        pytest.param(
            _closed_before_max,
            "entry 12: closed max_rounds_reached before round 4",
            id="closed-before-max",
        ),
        pytest.param(
            _owed_close_replaced,
            "entry 12: closed as stalled, owed max_rounds_reached",
            id="owed-close-replaced",
        ),
        pytest.param(
            _entry_after_the_end, "entry 10 follows the terminal entry 9", id="after-the-end"
        ),
    ],
)
def test_i1_breaches(make, problem):
    report = audit(forge(make()))
    assert "I7" not in failures(report)
    assert problem in failures(report)["I1"]


def test_a_closed_before_max_log_fails_only_i1():
    assert failures(audit(forge(_closed_before_max()))) == {
        "I1": ["entry 12: closed max_rounds_reached before round 4"]
    }


# I2: one open, then each role's own types, in turn, in the right round -----------------------


def _merchant_first() -> Log:
    log = session_log()
    return [*log[:2], log[3], log[2], *log[4:]]


def _arbiter_offer() -> Log:
    log = session_log()
    forged = copy_of(log[2], message_id="arbiter:x")
    forged["envelope"]["sender"] = {"role": "arbiter", "agent_id": "arbiter.test"}
    return with_entry(log, 3, forged)


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        pytest.param(
            lambda: session_log()[1:],
            "the log does not start with the buyer's session.open",
            id="no-open",
        ),
        pytest.param(
            lambda: edited(session_log(), 3, "envelope", "session_id", value="other"),
            "entry 4 belongs to session 'other'",
            id="other-session",
        ),
        pytest.param(
            lambda: edited(session_log(), 2, "envelope", "sender", "agent_id", value="buyer-666"),
            "entry 3: 'buyer-666' is not the session's buyer",
            id="stranger",
        ),
        pytest.param(
            lambda: edited(session_log(), 2, "envelope", "type", value="offer.counter"),
            "entry 3: a buyer may not send offer.counter",
            id="role-type",
        ),
        pytest.param(
            _merchant_first,
            "entry 3: the merchant moved out of turn",
            id="out-of-turn",
        ),
        pytest.param(
            lambda: edited(session_log(), 2, "envelope", "payload", "round", value=2),
            "entry 3: offer.propose names round 2 in round 1",
            id="wrong-round",
        ),
        pytest.param(
            lambda: with_entry(session_log(), 2, copy_of(session_log()[1], message_id="m-2")),
            "entry 3: session.ack out of place",
            id="second-ack",
        ),
        pytest.param(_arbiter_offer, "entry 4: the arbiter sent offer.propose", id="arbiter-offer"),
        pytest.param(
            lambda: edited(
                session_log(), 7, "envelope", "sender", "agent_id", value="arbiter.elsewhere"
            ),
            "entry 8: 'arbiter.elsewhere' is not the session's arbiter",
            id="another-arbiter",
        ),
        pytest.param(
            lambda: with_entry(
                caught_renege_log(), 6, copy_of(session_log()[3], message_id="m-late")
            ),
            "entry 7: a party moved while a breach awaited its verdict",
            id="move-after-breach",
        ),
    ],
)
def test_i2_breaches(make, problem):
    report = audit(forge(make()))
    assert "I7" not in failures(report)
    assert problem in failures(report)["I2"]


def test_an_empty_log_fails_i2():
    report = audit([])
    assert failures(report) == {"I2": ["the log is empty"]}
    assert (report.session_id, report.entries) == (None, 0)


def test_an_unreadable_envelope_stops_the_audit_at_i2():
    log = forge(edited(session_log(), 3, "envelope", "type", value="offer.haggle"))
    report = audit(log)
    assert failures(report) == {
        "I2": ["entry #4 is not a valid envelope: envelope does not match the schema"]
    }
    assert report.session_id is None


ROLES_DISTINCT = "roles_distinct: the buyer 'buyer-001' names itself as the merchant"


def test_an_agent_in_both_seats_fails_roles_distinct_under_i2():
    # Chained and signed like any deal: only the rule that a session has two parties tells.
    report = audit(self_dealing_log())
    assert failures(report) == {"I2": [ROLES_DISTINCT]}
    assert report.agreement_valid


def test_an_open_naming_its_own_sender_as_the_merchant_fails_at_once():
    report = audit(Session(merchant_agent_id=BUYER).log())
    assert failures(report) == {"I2": [ROLES_DISTINCT]}


# I3: every party message repeats its commitment -------------------------------------------


def test_a_caught_commitment_change_passes_i3_with_evidence():
    report = audit(machine_log(propose(1, 320, commit=OTHER_COMMIT)))
    assert report.ok
    assert report.outcome == "commitment_mismatch"
    assert report.results["I3"].notes == [
        "entry 3: the buyer's commitment changed (evidence)",
        "entry 4: the arbiter judged round 1 violated",
    ]


def test_a_commitment_change_let_through_fails_i3():
    log = edited(session_log(), 5, "envelope", "payload", "constraints_commit", value=OTHER_COMMIT)
    report = audit(forge(log))
    assert failures(report)["I3"] == [
        "entry 8: round 2's breach (commitment_mismatch) was judged fair",
        "entry 9: an agreement after a breach (commitment_mismatch)",
    ]
    assert report.results["I3"].notes == ["entry 6: the buyer's commitment changed (evidence)"]


def test_a_commitment_breach_closed_for_another_reason_fails_i3():
    log = machine_log(propose(1, 320, commit=OTHER_COMMIT))
    log = edited(log, 4, "envelope", "payload", "reason", value="withdrawn_by_buyer")
    assert failures(audit(forge(log))) == {"I3": ["entry 5: a breach closed as withdrawn_by_buyer"]}


# I4: buyers never go down, merchants never up, accepts name the standing price -------------


def test_a_caught_renege_passes_i4_with_evidence():
    report = audit(caught_renege_log())
    assert report.ok
    assert report.results["I4"].notes == [
        "entry 6: the buyer lowered its price (evidence)",
        "entry 7: the arbiter judged round 2 violated",
    ]


def test_a_merchant_raise_let_through_fails_i4():
    log = edited(session_log(NO_DEAL), 6, "envelope", "payload", "price", value=390)
    log = edited(log, 7, "envelope", "payload", "merchant_price", value=390)
    report = audit(forge(log))
    assert failures(report)["I4"][0] == (
        "entry 8: round 2's breach (merchant_reneged) was judged fair"
    )
    assert "entry 12: a breach closed as max_rounds_reached" in failures(report)["I4"]
    assert report.results["I4"].notes == ["entry 7: the merchant raised its price (evidence)"]


def test_a_merchant_accept_of_a_price_never_offered_fails_i4():
    log = session_log()
    for position, path, price in [
        (6, ("price",), 335),
        (7, ("buyer_price",), 335),
        (7, ("merchant_price",), 335),
        (8, ("final_price",), 335),
        (8, ("agreement", "final_price"), 335),
    ]:
        log = edited(log, position, "envelope", "payload", *path, value=price)
    assert failures(audit(forge(log))) == {"I4": ["entry 7: accept of 335, standing price 340"]}


def test_an_agreed_price_nobody_accepted_fails_i4():
    log = edited(session_log(), 8, "envelope", "payload", "final_price", value=330)
    log = edited(log, 8, "envelope", "payload", "agreement", "final_price", value=330)
    assert failures(audit(forge(log))) == {"I4": ["entry 9: final price 330 was never accepted"]}


# I5: one verdict per completed round, as the profile judges it ------------------------------


def _stuck_rounds() -> Log:
    return machine_log(propose(1, 300), counter(1, 400), propose(2, 300), counter(2, 400))


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        pytest.param(
            lambda: edited(session_log(), 0, "envelope", "payload", "profile", value="lenient/v9"),
            "unknown profile 'lenient/v9': verdicts cannot be checked",
            id="unknown-profile",
        ),
        pytest.param(
            lambda: with_entry(
                session_log(), 5, copy_of(session_log()[4], message_id="arbiter:x", round=3)
            ),
            "entry 6: verdict for round 3, which did not complete",
            id="verdict-for-no-round",
        ),
        pytest.param(
            lambda: with_entry(session_log(), 5, copy_of(session_log()[4], message_id="arbiter:x")),
            "round 1 completed with 2 verdicts, not exactly one",
            id="two-verdicts",
        ),
        pytest.param(
            lambda: edited(session_log(), 4, "envelope", "payload", "buyer_price", value=321),
            "entry 5: round 1's verdict states buyer_price 321, the log gives 320",
            id="verdict-prices",
        ),
        pytest.param(
            lambda: edited(_stuck_rounds(), 7, "envelope", "payload", "status", value="fair"),
            "entry 8: round 2 judged fair/spread_unchanged, "
            "the profile says fair_but_stuck/spread_unchanged",
            id="stuck-judged-fair",
        ),
        pytest.param(
            lambda: edited(
                machine_log(
                    *(m for r in (1, 2, 3) for m in (propose(r, 300), counter(r, 400))),
                    profile="strict/v0.1",
                ),
                -1,
                "envelope",
                "payload",
                "reason",
                value="max_rounds_reached",
            ),
            "entry 12: closed as max_rounds_reached, owed stalled",
            id="stall-closed-otherwise",
        ),
    ],
)
def test_i5_breaches(make, problem):
    report = audit(forge(make()))
    assert "I7" not in failures(report)
    assert problem in failures(report)["I5"]


def test_the_auditor_judges_by_the_profiles_it_is_given():
    log = _stuck_rounds()
    assert audit(log).ok
    impatient = registry([Profile("default/v0.1", stall_limit=1)])
    assert failures(audit(log, profiles=impatient)) == {
        "I5": ["the log ends without the owed stalled"]
    }


def test_an_auditor_that_knows_no_profile_fails_i5():
    assert failures(audit(session_log(), profiles={})) == {
        "I5": ["unknown profile 'default/v0.1': verdicts cannot be checked"]
    }


ROUND_CHECKS_PASS = dict.fromkeys(INVARIANTS[:5], "pass")


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        pytest.param(
            "spread",
            51,
            "entry 5: round 1's verdict states spread 51, the log gives 50",
            id="spread",
        ),
        pytest.param(
            "checks",
            {**ROUND_CHECKS_PASS, "I3": "fail"},
            "entry 5: round 1's verdict states checks.I3 fail, the log gives pass",
            id="checks",
        ),
        pytest.param(
            "checks",
            {**ROUND_CHECKS_PASS, "I6": "pass"},
            "entry 5: round 1's verdict states checks.I6 pass, the log gives none",
            id="checks-beyond-the-round",
        ),
    ],
)
def test_a_verdict_that_misstates_what_it_judged_fails_i5(field, value, problem):
    report = audit(forge(edited(session_log(), 4, "envelope", "payload", field, value=value)))
    assert failures(report) == {"I5": [problem]}


def test_a_violated_verdict_whose_checks_all_pass_fails_i5():
    log = edited(caught_renege_log(), 6, "envelope", "payload", "checks", value=ROUND_CHECKS_PASS)
    assert failures(audit(forge(log))) == {
        "I5": ["entry 7: round 2's verdict states checks.I4 pass, the log gives fail"]
    }


# Closes: each reason is owed by the log, or comes from outside it ---------------------------


def closed_as(log: Log, reason: str) -> Log:
    """``log`` ended by an arbiter ``session.close`` giving ``reason``, forged."""
    close = copy_of(
        machine_log(withdraw("buyer"))[-1], message_id=f"arbiter:{len(log) + 1}", reason=reason
    )
    close["envelope"]["session_id"] = log[0]["envelope"]["session_id"]
    return forge([*log, close])


@pytest.mark.parametrize("reason", ["withdrawn_by_merchant", "stalled"])
def test_a_close_whose_reason_the_log_does_not_support_fails(reason):
    log = machine_log(propose(1, 320), withdraw("buyer"))
    report = audit(forge(edited(log, -1, "envelope", "payload", "reason", value=reason)))
    assert report.outcome == reason
    assert failures(report) == {"I2": [f"entry 5: closed as {reason}, owed withdrawn_by_buyer"]}


def _two_rounds(profile: str) -> Log:
    """Rounds 1 and 2 at 300/400: round 2 is stuck, once."""
    moves = (propose(1, 300), counter(1, 400), propose(2, 300), counter(2, 400))
    return machine_log(*moves, profile=profile)


def _withdrawn_after_the_accept() -> Log:
    """SFO→JFK up to round 2's agreement verdict, then the buyer's withdrawal and its close."""
    log = session_log()[:8]
    withdrawal = copy.deepcopy(log[5])
    envelope = withdrawal["envelope"]
    envelope.update(message_id="b-withdraw", type="session.close")
    envelope["payload"] = {
        "reason": "withdrawn",
        "constraints_commit": envelope["payload"]["constraints_commit"],
    }
    return closed_as([*log, withdrawal], "withdrawn_by_buyer")


@pytest.mark.parametrize(
    ("make", "invariant", "problem"),
    [
        pytest.param(
            lambda: closed_as(machine_log(propose(1, 320)), "withdrawn_by_merchant"),
            "I2",
            "entry 4: closed as withdrawn_by_merchant, which nothing in the log owes",
            id="nobody-withdrew",
        ),
        pytest.param(
            lambda: closed_as(machine_log(propose(1, 320)), "commitment_mismatch"),
            "I3",
            "entry 4: closed as commitment_mismatch, which nothing in the log owes",
            id="no-commitment-changed",
        ),
        pytest.param(
            lambda: closed_as(machine_log(propose(1, 320)), "buyer_reneged"),
            "I4",
            "entry 4: closed as buyer_reneged, which nothing in the log owes",
            id="nobody-reneged",
        ),
        pytest.param(
            lambda: closed_as(_two_rounds("default/v0.1"), "stalled"),
            "I5",
            "entry 9: closed as stalled, which nothing in the log owes",
            id="stalled-without-a-stall-rule",
        ),
        pytest.param(
            lambda: closed_as(_two_rounds("strict/v0.1"), "stalled"),
            "I5",
            "entry 9: closed as stalled, which nothing in the log owes",
            id="stalled-too-soon",
        ),
        pytest.param(
            lambda: closed_as(machine_log(propose(1, 320)), "spread_narrowed"),
            "I5",
            "entry 4: closed as spread_narrowed, which nothing in the log owes",
            id="a-rationale-as-a-close",
        ),
        pytest.param(
            lambda: closed_as(session_log()[:8], "response_timeout"),
            "I6",
            "entry 9: closed as response_timeout after the accept of 340, owed session.agree",
            id="closed-after-an-accept",
        ),
        pytest.param(
            _withdrawn_after_the_accept,
            "I6",
            "entry 10: closed as withdrawn_by_buyer after the accept of 340, owed session.agree",
            id="withdrawn-after-an-accept",
        ),
    ],
)
def test_a_close_nothing_in_the_log_owes_fails(make, invariant, problem):
    assert failures(audit(make())) == {invariant: [problem]}


@pytest.mark.parametrize("reason", ["response_timeout", "deadline_expired", "operator_terminated"])
def test_a_timer_or_an_operator_may_close_a_session_whenever_nothing_is_owed(reason):
    # Their causes are the arbiter's clock and an operator: nothing the log could refute.
    report = audit(closed_as(machine_log(propose(1, 320)), reason))
    assert report.ok
    assert report.outcome == reason


def test_a_log_that_ends_on_a_withdrawal_fails_i2():
    log = machine_log(propose(1, 320), withdraw("merchant"))[:-1]
    assert failures(audit(log)) == {"I2": ["the log ends without the owed withdrawn_by_merchant"]}


# I6: the agreement, signed, names this log --------------------------------------------------


def test_without_keys_an_agreement_fails_i6():
    report = audit(session_log(), None)
    assert failures(report) == {"I6": ["entry 9: no key set to verify the agreement with"]}
    assert report.agreement_valid is False


def test_an_agreement_signed_by_another_key_fails_i6():
    report = audit(forge(session_log(), key=other_key()))
    assert failures(report) == {
        "I6": [f"entry 9: unknown_kid: no key with kid {other_key().kid!r} in the key set"]
    }
    assert report.agreement_valid is False


@pytest.mark.parametrize(
    ("field", "value"),
    [("kid", "another-kid"), ("signature_alg", "ES256")],
)
def test_an_agreement_whose_header_disagrees_with_the_payload_fails_i6(field, value):
    report = audit(forge(edited(session_log(), 8, "envelope", "payload", field, value=value)))
    assert failures(report) == {
        "I6": ["entry 9: kid or signature_alg disagree with the JWS header"]
    }
    assert report.agreement_valid is False


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("oanp_version", "0.2"),
        ("session_id", "sess-other"),
        ("buyer_agent_id", "buyer-666"),
        ("merchant_agent_id", "merchant-666"),
        ("item", {"route": "LAX-JFK", "date": "2026-04-28"}),
        ("currency", "EUR"),
        ("log_length", 7),
        ("invariants_satisfied", ["I1", "I2", "I3", "I4", "I5", "I6"]),
    ],
)
def test_a_signed_agreement_that_misnames_the_log_fails_i6(field, value):
    report = audit(resigned(session_log(), **{field: value}))
    assert failures(report) == {"I6": [f"entry 9: the signed agreement's {field} is not the log's"]}
    assert report.agreement_valid is False


def test_a_signed_agreement_naming_another_arbiter_fails_i6():
    report = audit(resigned(session_log(), arbiter_id="arbiter.elsewhere"))
    assert failures(report) == {
        "I6": ["entry 9: the signed agreement's arbiter_id is not the log's"]
    }
    assert report.agreement_valid is False


def test_a_signed_agreement_with_another_price_fails_i6():
    report = audit(resigned(session_log(), final_price=339.99))
    assert failures(report) == {"I6": ["entry 9: the signed agreement's final_price differs"]}


# I7: the chain recomputes and its head is the signed digest ---------------------------------


def test_an_edit_without_rechaining_fails_i7_and_voids_the_agreement():
    # When the arbiter logged an entry is checked by nothing else: only the chain can tell.
    log = edited(session_log(), 4, "received_at", value="2026-04-28T09:00:08Z")
    report = audit(log)
    assert failures(report) == {"I7": ["entry 5: entry_hash does not match its contents"]}
    # A good signature over a digest this log does not recompute to covers another log.
    assert report.agreement_valid is False


def test_a_rechained_log_whose_agreement_was_not_re_signed_fails_i7():
    log = rechain(edited(session_log(), 4, "received_at", value="2026-04-28T09:00:08Z"))
    report = audit(log)
    assert failures(report)["I7"] == ["entry 9: session_digest is not the entry_hash of entry 8"]


# Bugs: logs the auditor judges wrongly ------------------------------------------------------


def _final_answer(max_rounds: int) -> Log:
    """SFO→JFK where the merchant counters 360 in round 2 and the buyer accepts that counter
    in the same round: docs/protocol.md §5's final answer when round 2 is the last."""
    log = edited(session_log(), 0, "envelope", "payload", "max_rounds", value=max_rounds)
    last_counter = copy_of(log[3], message_id="m-counter-2", round=2, price=360)
    final_answer = copy.deepcopy(log[5])
    final_answer["envelope"].update(message_id="b-accept-2", type="offer.accept")
    final_answer["envelope"]["payload"]["price"] = 360
    verdict = copy_of(log[7], message_id="arbiter:9", buyer_price=360, merchant_price=360)
    agree = copy.deepcopy(log[8])
    agree["envelope"]["message_id"] = "arbiter:10"
    agree["envelope"]["payload"]["final_price"] = 360
    agree["envelope"]["payload"]["agreement"]["final_price"] = 360
    return forge([*log[:6], last_counter, final_answer, verdict, agree])


def test_a_final_answer_before_the_last_round_is_out_of_turn():
    report = audit(_final_answer(max_rounds=5))
    assert "entry 8: the buyer moved out of turn" in failures(report)["I2"]


def test_a_final_answer_in_the_last_round_passes():
    report = audit(_final_answer(max_rounds=2))
    assert "I7" not in failures(report)
    assert report.outcome == "agreed"
    assert failures(report) == {}


def test_a_log_written_before_the_final_answer_still_verifies():
    # Before the final answer, the last counter's verdict and max_rounds_reached followed the
    # counter in the same step, at the same moment, with this detail.
    log = copy.deepcopy(session_log(NO_DEAL))
    counter_at = log[-3]["received_at"]
    assert [e["envelope"]["type"] for e in log[-3:]] == [
        "offer.counter",
        "round.verdict",
        "session.close",
    ]
    for entry in log[-2:]:
        entry["received_at"] = counter_at
        entry["envelope"]["timestamp"] = counter_at
    log[-1]["envelope"]["payload"]["detail"] = "no agreement after 3 rounds"
    report = audit(rechain(log))
    assert report.ok, failures(report)
    assert report.outcome == "max_rounds_reached"
