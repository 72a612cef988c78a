"""Profile terms/v0.1 (docs/protocol.md §11): issues declared at open, terms on every offer, I4
as "no pure retraction", issues_open in verdicts, final_terms in the agreement, and the offline
auditor re-deriving all of it."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oanp.audit import verify_log
from oanp.audit.invariants import audit_log
from oanp.wire.canonical import canonical_bytes
from oanp.wire.commitments import commit, encode_salt
from oanp.wire.errors import BadTerms, NotSettleable, SchemaInvalid, TermsNotStanding
from oanp.wire.signing import AGREEMENT_TYP
from oanp.wire.snapshot import dump_state, load_state
from oanp.wire.state import Phase
from oanp.wire.terms import (
    ChoiceIssue,
    IssuesInvalid,
    NumberIssue,
    gains_for_other,
    is_pure_retraction,
    issues_open,
    read_issues,
    read_terms,
)
from tests.support.factories.sessions import (
    BUYER_COMMIT,
    ITEM,
    JWKS,
    KEY,
    MERCHANT_COMMIT,
    Session,
    ack,
    envelope,
)
from tests.support.factories.terms import ISSUES

DELIVERY, SUPPORT = read_issues(ISSUES)


def terms_session(**overrides: Any) -> Session:
    session = Session(profile="terms/v0.1", issues=ISSUES, **overrides)
    session.feed(ack())
    return session


def offer(
    kind: str, round_: int, price: Any, terms: Any, *, role: str | None = None, commit: str = ""
) -> Any:
    role = role or ("merchant" if kind == "offer.counter" else "buyer")
    payload: dict[str, Any] = {
        "round": round_,
        "price": price,
        "constraints_commit": commit or (BUYER_COMMIT if role == "buyer" else MERCHANT_COMMIT),
    }
    if terms is not None:
        payload["terms"] = terms
    return envelope(kind, payload, role=role)


def t(days: int, support: str) -> dict[str, Any]:
    return {"delivery_days": days, "support": support}


def verdicts(session: Session) -> list[dict[str, Any]]:
    return [e.envelope["payload"] for e in session.entries if e.type == "round.verdict"]


def audited(session: Session) -> None:
    report = verify_log(session.log(), JWKS)
    assert report.ok, [c.line() for c in report.checks if not c.ok]


# Declarations ---------------------------------------------------------------------------------


def test_issues_are_read_in_their_declared_order():
    assert NumberIssue("delivery_days", "low", Decimal(1), Decimal(30), 0) == DELIVERY
    assert ChoiceIssue("support", ("premium", "standard", "none")) == SUPPORT


@pytest.mark.parametrize(
    ("issues", "message"),
    [
        ([], "1 to 8 issues"),
        (
            [{"name": f"i_{'x' * n}", "kind": "choice", "options": ["a", "b"]} for n in range(9)],
            "1 to 8 issues",
        ),
        ([{"name": "Price", "kind": "choice", "options": ["a", "b"]}], "name"),
        ([{"name": "price", "kind": "choice", "options": ["a", "b"]}], "not price"),
        ([{"name": "a", "kind": "choice", "options": ["x"]}], "options"),
        ([{"name": "a", "kind": "choice", "options": ["x", "x"]}], "options"),
        (
            [
                {
                    "name": "a",
                    "kind": "number",
                    "buyer_prefers": "low",
                    "min": 5,
                    "max": 5,
                    "decimals": 0,
                }
            ],
            "less than its max",
        ),
        (
            [
                {
                    "name": "a",
                    "kind": "number",
                    "buyer_prefers": "up",
                    "min": 1,
                    "max": 5,
                    "decimals": 0,
                }
            ],
            "buyer_prefers",
        ),
        (
            [
                {
                    "name": "a",
                    "kind": "number",
                    "buyer_prefers": "low",
                    "min": 1,
                    "max": 5,
                    "decimals": 5,
                }
            ],
            "decimals",
        ),
        (
            [
                {
                    "name": "a",
                    "kind": "number",
                    "buyer_prefers": "low",
                    "min": 1.5,
                    "max": 5,
                    "decimals": 0,
                }
            ],
            "at most 0 decimals",
        ),
        ([{"name": "a", "kind": "range", "options": ["x", "y"]}], "kind"),
        ([{"name": "a", "kind": "choice", "options": ["x", "y"], "extra": 1}], "extra"),
        ([ISSUES[1], ISSUES[1]], "once"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_a_malformed_declaration_is_named(issues, message):
    with pytest.raises(IssuesInvalid, match=message):
        read_issues(issues)


def test_the_profile_needs_issues_and_the_others_refuse_them():
    with pytest.raises(SchemaInvalid) as needs:
        Session(profile="terms/v0.1")
    assert needs.value.errors[0].field == "$.payload.issues"
    with pytest.raises(SchemaInvalid, match="does not take"):
        Session(issues=ISSUES)
    with pytest.raises(SchemaInvalid) as shape:
        Session(profile="terms/v0.1", issues=[{"name": "a", "kind": "choice"}])
    assert shape.value.errors[0].field == "$.payload.issues"


# Values -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("terms", "field", "message"),
    [
        ({"delivery_days": 5}, "$.payload.terms.support", "is required"),
        ({**t(5, "none"), "colour": "red"}, "$.payload.terms.colour", "not a declared issue"),
        (t(31, "none"), "$.payload.terms.delivery_days", "from 1 to 30"),
        (t(0, "none"), "$.payload.terms.delivery_days", "from 1 to 30"),
        ({"delivery_days": 2.5, "support": "none"}, "$.payload.terms.delivery_days", "decimals"),
        ({"delivery_days": "5", "support": "none"}, "$.payload.terms.delivery_days", "number"),
        (t(5, "gold"), "$.payload.terms.support", "one of premium, standard, none"),
    ],
    ids=["missing", "undeclared", "above-max", "below-min", "decimals", "string", "option"],
)
def test_an_offer_outside_the_declared_domain_is_bad_terms_and_changes_nothing(
    terms, field, message
):
    session = terms_session()
    before = (session.negotiation.state, len(session.entries))
    with pytest.raises(BadTerms) as refused:
        session.feed(offer("offer.propose", 1, 300, terms))
    assert refused.value.status == 422
    assert refused.value.code == "bad_terms"
    assert [(e.field, message in e.message) for e in refused.value.errors] == [(field, True)]
    assert (session.negotiation.state, len(session.entries)) == before


def test_an_offer_without_terms_in_a_terms_session_is_bad_terms():
    session = terms_session()
    with pytest.raises(BadTerms, match="every declared issue"):
        session.feed(offer("offer.propose", 1, 300, None))


def test_terms_in_a_price_only_session_are_bad_terms():
    session = Session()
    session.feed(ack())
    with pytest.raises(BadTerms, match="price alone"):
        session.feed(offer("offer.propose", 1, 300, t(5, "none")))


def test_read_terms_keeps_the_declared_order_and_option_indices():
    assert read_terms((DELIVERY, SUPPORT), {"support": "none", "delivery_days": 7}) == (
        Decimal(7),
        2,
    )


# I4: no pure retraction -----------------------------------------------------------------------


def test_a_trade_off_is_allowed():
    session = terms_session()
    session.feed(offer("offer.propose", 1, 300, t(3, "premium")))
    session.feed(offer("offer.counter", 1, 400, t(10, "none")))
    # The buyer pays more for faster delivery kept, and gives up premium support: no breach.
    session.feed(offer("offer.propose", 2, 320, t(3, "standard")))
    # The merchant asks more money but delivers faster: better on one issue, worse on another.
    session.feed(offer("offer.counter", 2, 410, t(5, "none")))
    assert session.negotiation.state.phase is Phase.NEGOTIATING
    assert [v["status"] for v in verdicts(session)] == ["fair", "fair"]
    audited(session)


@pytest.mark.parametrize(
    ("role", "first", "then", "reason"),
    [
        ("buyer", (300, t(5, "standard")), (300, t(3, "standard")), "buyer_reneged"),
        ("buyer", (300, t(5, "standard")), (300, t(5, "premium")), "buyer_reneged"),
        ("buyer", (300, t(5, "standard")), (290, t(5, "standard")), "buyer_reneged"),
        ("merchant", (400, t(5, "standard")), (400, t(8, "standard")), "merchant_reneged"),
        ("merchant", (400, t(5, "standard")), (400, t(5, "none")), "merchant_reneged"),
    ],
    ids=[
        "buyer-faster",
        "buyer-better-support",
        "buyer-lower",
        "merchant-slower",
        "merchant-less-support",
    ],
)
def test_a_pure_retraction_is_caught_logged_and_closes(role, first, then, reason):
    session = terms_session()
    session.feed(offer("offer.propose", 1, *(first if role == "buyer" else (300, t(5, "none")))))
    session.feed(offer("offer.counter", 1, *(first if role == "merchant" else (400, t(5, "none")))))
    if role == "buyer":
        session.feed(offer("offer.propose", 2, *then))
    else:
        session.feed(offer("offer.propose", 2, 310, t(5, "none")))
        session.feed(offer("offer.counter", 2, *then))
    assert session.types()[-2:] == ["round.verdict", "session.close"]
    verdict = verdicts(session)[-1]
    assert (verdict["status"], verdict["rationale"], verdict["checks"]["I4"]) == (
        "violated",
        reason,
        "fail",
    )
    assert session.entries[-1].envelope["payload"]["reason"] == reason
    audited(session)


PRICES = st.decimals(min_value=1, max_value=1000, places=2)


@given(merchant=st.booleans(), old=PRICES, new=PRICES)
def test_with_no_issues_the_rule_is_exactly_v01s_i4(merchant, old, new):
    # v0.1: the buyer may not lower its price, the merchant may not raise it.
    v01 = new > old if merchant else new < old
    assert is_pure_retraction(merchant, (), (old, ()), (new, ())) is v01
    # The general rule, which the price-only case takes a shortcut past, says the same.
    for_other = gains_for_other(merchant, (), (old, ()), (new, ()))
    assert (all(g <= 0 for g in for_other) and any(g < 0 for g in for_other)) is v01


@given(
    merchant=st.booleans(),
    old=PRICES,
    new=PRICES,
    days=st.tuples(st.integers(1, 30), st.integers(1, 30)),
    support=st.tuples(st.integers(0, 2), st.integers(0, 2)),
)
def test_a_retraction_is_never_better_for_the_other_side_anywhere(
    merchant, old, new, days, support
):
    old_values = (Decimal(days[0]), support[0])
    new_values = (Decimal(days[1]), support[1])
    retracts = is_pure_retraction(
        merchant, (DELIVERY, SUPPORT), (old, old_values), (new, new_values)
    )
    # What the move gains the merchant on each issue: a higher price, more days (the buyer
    # prefers few), a later option. The other side of a merchant's move is the buyer.
    for_merchant = [new - old, days[1] - days[0], support[1] - support[0]]
    for_other = [-g for g in for_merchant] if merchant else for_merchant
    expected = all(g <= 0 for g in for_other) and any(g < 0 for g in for_other)
    assert retracts is expected


# Verdicts -----------------------------------------------------------------------------------


def test_verdicts_count_the_issues_open_and_judge_terms_narrowed():
    session = terms_session()
    session.feed(offer("offer.propose", 1, 300, t(3, "premium")))
    session.feed(offer("offer.counter", 1, 400, t(10, "none")))
    # Round 2: same spread, but support now agreed: one issue open instead of two.
    session.feed(offer("offer.propose", 2, 300, t(3, "standard")))
    session.feed(offer("offer.counter", 2, 400, t(10, "standard")))
    # Round 3: spread and issues both unchanged.
    session.feed(offer("offer.propose", 3, 300, t(3, "standard")))
    session.feed(offer("offer.counter", 3, 400, t(10, "standard")))
    # Round 4: both fall; the spread names the progress.
    session.feed(offer("offer.propose", 4, 310, t(5, "standard")))
    session.feed(offer("offer.counter", 4, 390, t(5, "standard")))
    assert [(v["rationale"], v["issues_open"]) for v in verdicts(session)] == [
        ("opening_moves", 2),
        ("terms_narrowed", 1),
        ("spread_unchanged", 1),
        ("spread_narrowed", 0),
    ]
    audited(session)


def test_a_price_only_verdict_carries_no_issues_open():
    session = Session()
    session.feed(ack())
    session.feed(offer("offer.propose", 1, 300, None))
    session.feed(offer("offer.counter", 1, 400, None))
    assert "issues_open" not in verdicts(session)[0]


# Agreement ----------------------------------------------------------------------------------


def agreed() -> Session:
    session = terms_session()
    session.feed(offer("offer.propose", 1, 300, t(3, "premium")))
    session.feed(offer("offer.counter", 1, 360, t(7, "standard")))
    session.feed(offer("offer.accept", 2, 360, t(7, "standard"), role="buyer"))
    return session


def test_the_accept_must_repeat_the_standing_terms():
    session = terms_session()
    session.feed(offer("offer.propose", 1, 300, t(3, "premium")))
    session.feed(offer("offer.counter", 1, 360, t(7, "standard")))
    before = session.negotiation.state
    with pytest.raises(TermsNotStanding) as refused:
        session.feed(offer("offer.accept", 2, 360, t(7, "premium"), role="buyer"))
    assert refused.value.status == 422
    assert session.negotiation.state == before


def test_the_agreement_carries_the_final_terms_and_verifies():
    session = agreed()
    agreement = session.entries[-1].envelope["payload"]["agreement"]
    assert agreement["final_terms"] == {"delivery_days": 7, "support": "standard"}
    assert verdicts(session)[-1]["issues_open"] == 0
    audited(session)


def test_the_auditor_rejects_forged_final_terms_even_when_signed():
    log = agreed().log()
    payload = log[-1]["envelope"]["payload"]
    payload["agreement"]["final_terms"] = {"delivery_days": 3, "support": "premium"}
    # Signed again by the arbiter's own key: the signature holds, the terms are not the log's.
    payload["signature"] = KEY.sign_detached(
        canonical_bytes(payload["agreement"]), typ=AGREEMENT_TYP
    )
    audit = audit_log(log, JWKS)
    assert any("final_terms" in p for p in audit.results["I6"].problems)


def test_the_auditor_catches_a_forged_issues_open():
    log = agreed().log()
    verdict = next(e for e in log if e["envelope"]["type"] == "round.verdict")
    verdict["envelope"]["payload"]["issues_open"] = 1
    audit = audit_log(log, JWKS)
    assert any("issues_open" in p for p in audit.results["I5"].problems)


def test_the_auditor_catches_a_retraction_the_arbiter_let_through():
    session = terms_session()
    session.feed(offer("offer.propose", 1, 300, t(5, "standard")))
    session.feed(offer("offer.counter", 1, 400, t(5, "none")))
    session.feed(offer("offer.propose", 2, 310, t(5, "none")))
    log = session.log()
    # Rewrite the buyer's round-2 offer into a pure retraction: faster delivery at 300.
    log[-1]["envelope"]["payload"].update(price=300, terms=t(3, "standard"))
    audit = audit_log(log, JWKS)
    assert not audit.ok
    assert any("retracted" in n for n in audit.results["I4"].notes)


# Snapshot and settlement --------------------------------------------------------------------


def test_a_snapshot_keeps_issues_and_terms():
    session = terms_session()
    session.feed(offer("offer.propose", 1, 300, t(3, "premium")))
    session.feed(offer("offer.counter", 1, 360.5, t(7, "standard")))
    state = session.negotiation.state
    assert load_state(dump_state(state)) == state


BUYER_SALT, MERCHANT_SALT = encode_salt(b"b" * 32), encode_salt(b"m" * 32)


def settling_session() -> tuple[Session, dict[str, Any], dict[str, Any]]:
    buyer = {"true_ceiling": 400}
    merchant = {"floor_price": 300}
    buyer_commit = commit(buyer, item=ITEM, max_rounds=5, salt=BUYER_SALT)
    merchant_commit = commit(merchant, item=ITEM, max_rounds=5, salt=MERCHANT_SALT)
    session = Session(
        profile="terms/v0.1",
        issues=ISSUES,
        settlement="reveal",
        constraints_commit=buyer_commit,
    )
    session.feed(ack(merchant_commit))
    return session, {"commit": buyer_commit, "c": buyer}, {"commit": merchant_commit, "c": merchant}


def reveal(role: str, round_: int, side: dict[str, Any], salt: str) -> Any:
    return envelope(
        "settle.reveal",
        {
            "round": round_,
            "constraints": side["c"],
            "salt": salt,
            "constraints_commit": side["commit"],
        },
        role=role,
    )


def test_settlement_is_refused_while_other_issues_are_open():
    session, buyer, merchant = settling_session()
    session.feed(offer("offer.propose", 1, 250, t(3, "premium"), commit=buyer["commit"]))
    session.feed(offer("offer.counter", 1, 450, t(9, "premium"), commit=merchant["commit"]))
    before = session.negotiation.state
    with pytest.raises(NotSettleable, match="other issues must match"):
        session.feed(reveal("buyer", 2, buyer, BUYER_SALT))
    assert session.negotiation.state == before


def test_settlement_with_matching_terms_settles_the_price_and_keeps_them():
    session, buyer, merchant = settling_session()
    session.feed(offer("offer.propose", 1, 250, t(6, "standard"), commit=buyer["commit"]))
    session.feed(offer("offer.counter", 1, 450, t(6, "standard"), commit=merchant["commit"]))
    session.feed(reveal("buyer", 2, buyer, BUYER_SALT))
    session.feed(reveal("merchant", 2, merchant, MERCHANT_SALT))
    agreement = session.entries[-1].envelope["payload"]["agreement"]
    assert agreement["final_price"] == 350
    assert agreement["final_terms"] == {"delivery_days": 6, "support": "standard"}
    audited(session)


def test_issues_open_counts_every_issue_before_both_sides_offered():
    assert issues_open((DELIVERY, SUPPORT), None, (Decimal(3), 0)) == 2
    assert issues_open((DELIVERY, SUPPORT), (Decimal(3), 1), (Decimal(3), 0)) == 1
