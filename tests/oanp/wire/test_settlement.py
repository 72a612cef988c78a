"""Settlement by simultaneous reveal (docs/protocol.md §5): the machine, the price rule and the
offline auditor that re-derives the outcome from the log alone."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oanp.audit.invariants import audit_log
from oanp.wire.canonical import JsonObject
from oanp.wire.commitments import commit, encode_salt, reference_commit
from oanp.wire.envelope import Envelope
from oanp.wire.errors import ProtocolError
from oanp.wire.machine import Negotiation
from oanp.wire.settlement import settlement_price
from oanp.wire.state import Phase
from tests.support.factories.logs import forge
from tests.support.factories.sessions import (
    ITEM,
    JWKS,
    KEY,
    Session,
    ack,
    counter,
    envelope,
    opening,
    propose,
    withdraw,
)

BUYER_SALT, MERCHANT_SALT = encode_salt(b"\x01" * 32), encode_salt(b"\x02" * 32)
CEILING = {"true_ceiling": 420, "budget_cap": 400}
FLOOR = {"floor_price": 280, "ideal_price": 400}


def commitments(buyer: JsonObject, merchant: JsonObject) -> tuple[str, str]:
    return commit(buyer, ITEM, 5, BUYER_SALT), commit(merchant, ITEM, 5, MERCHANT_SALT)


class Settling:
    """A session opened for settlement, with each party's constraints and salted commitment."""

    def __init__(self, buyer: JsonObject = CEILING, merchant: JsonObject = FLOOR) -> None:
        self.constraints = {"buyer": buyer, "merchant": merchant}
        self.commits = dict(zip(("buyer", "merchant"), commitments(buyer, merchant), strict=True))
        self.session = Session(constraints_commit=self.commits["buyer"], settlement="reveal")
        self.session.feed(ack(self.commits["merchant"]))

    @property
    def state(self) -> Any:
        return self.session.negotiation.state

    def propose(self, price: Any) -> None:
        self.session.feed(propose(self.state.round, price, self.commits["buyer"]))

    def counter(self, price: Any) -> None:
        self.session.feed(counter(self.state.round, price, self.commits["merchant"]))

    def reveal_envelope(self, role: str, **changes: Any) -> Envelope:
        salt = BUYER_SALT if role == "buyer" else MERCHANT_SALT
        payload = {
            "round": self.state.round,
            "constraints": self.constraints[role],
            "salt": salt,
            "constraints_commit": self.commits[role],
            **changes,
        }
        return envelope("settle.reveal", payload, role=role)

    def reveal(self, role: str, **changes: Any) -> list[str]:
        return [e.type for e in self.session.feed(self.reveal_envelope(role, **changes))]

    def payloads(self) -> list[JsonObject]:
        return [cast(JsonObject, e.envelope["payload"]) for e in self.session.entries]

    def audit(self) -> Any:
        return audit_log(self.session.log(), JWKS)


def problems(report: Any) -> dict[str, list[str]]:
    return {i: r.problems for i, r in report.results.items() if r.problems}


# A zone: the midpoint, within the standing prices -----------------------------------------


@pytest.mark.parametrize("first", ["buyer", "merchant"])
def test_a_zone_settles_at_the_midpoint_and_the_agreement_says_how(first: str) -> None:
    s = Settling()
    s.propose(320)
    s.counter(370)
    if first == "merchant":
        s.propose(330)
    assert s.reveal(first) == ["settle.reveal"]
    other = "merchant" if first == "buyer" else "buyer"
    assert (s.state.phase, s.state.turn.value) == (Phase.SETTLING, other)
    assert s.reveal(other) == ["settle.reveal", "round.verdict", "session.agree"]
    verdict, agree = s.payloads()[-2:]
    assert (verdict["status"], verdict["rationale"], verdict["spread"]) == ("fair", "settled", 0)
    assert agree["final_price"] == 350
    agreement = cast(JsonObject, agree["agreement"])
    assert agreement["settlement"] == {"rule": "midpoint/v0.1", "ceiling": 420, "floor": 280}
    assert s.audit().ok, problems(s.audit())


def test_the_midpoint_is_raised_to_the_buyers_standing_price_and_lowered_to_the_merchants():
    s = Settling({"true_ceiling": 400}, {"floor_price": 390})
    s.propose(398)
    s.counter(399)
    s.reveal("buyer")
    s.reveal("merchant")
    assert s.payloads()[-1]["final_price"] == 398  # 395 raised to the buyer's 398
    assert s.audit().ok


@pytest.mark.parametrize(
    ("ceiling", "floor", "currency", "expected"),
    [
        ("420", "280", "USD", "350"),
        ("100.01", "100", "USD", "100.00"),  # 100.005: half-even to the even cent
        ("100.03", "100", "USD", "100.02"),  # 100.015
        ("1001", "1000", "JPY", "1000"),  # 1000.5: yen have no decimals
        ("1003", "1000", "JPY", "1002"),  # 1001.5
    ],
)
def test_the_midpoint_rounds_half_even_to_the_currency(
    ceiling: str, floor: str, currency: str, expected: str
) -> None:
    price = settlement_price(
        Decimal(ceiling),
        Decimal(floor),
        currency=currency,
        buyer_standing=None,
        merchant_standing=None,
    )
    assert price == Decimal(expected)


prices = st.decimals(min_value=1, max_value=10_000, places=2)


@settings(max_examples=200, deadline=None)
@given(ceiling=prices, floor=prices, bid=prices, ask=prices)
def test_a_settled_price_never_takes_back_a_concession(
    ceiling: Decimal, floor: Decimal, bid: Decimal, ask: Decimal
) -> None:
    price = settlement_price(
        ceiling, floor, currency="USD", buyer_standing=bid, merchant_standing=ask
    )
    assert price <= ask
    if bid <= ask:
        assert price >= bid
        midpoint = (ceiling + floor) / 2
        if bid <= midpoint <= ask:
            assert abs(price - midpoint) <= Decimal("0.005")


@settings(max_examples=40, deadline=None)
@given(
    ceiling=st.integers(100, 500),
    floor=st.integers(100, 500),
    first=st.sampled_from(["buyer", "merchant"]),
)
def test_every_settlement_the_machine_logs_the_auditor_passes(
    ceiling: int, floor: int, first: str
) -> None:
    s = Settling({"true_ceiling": ceiling}, {"floor_price": floor})
    s.propose(min(ceiling, floor) - 50)
    s.counter(max(ceiling, floor) + 50)
    if first == "merchant":
        s.propose(min(ceiling, floor) - 40)
    s.reveal(first)
    s.reveal("merchant" if first == "buyer" else "buyer")
    assert s.state.terminal
    report = s.audit()
    assert report.ok, problems(report)
    assert report.outcome == ("agreed" if ceiling >= floor else "no_zone")


# No zone ------------------------------------------------------------------------------------


def test_no_zone_closes_with_both_limits_in_the_log() -> None:
    s = Settling({"true_ceiling": 300}, {"floor_price": 350})
    s.propose(200)
    s.counter(400)
    s.reveal("buyer")
    assert s.reveal("merchant") == ["settle.reveal", "round.verdict", "session.close"]
    verdict, close = s.payloads()[-2:]
    assert (verdict["status"], verdict["rationale"]) == ("fair_but_stuck", "no_zone")
    assert (verdict["buyer_price"], verdict["merchant_price"], verdict["spread"]) == (300, 350, 50)
    assert close["reason"] == "no_zone"
    assert s.audit().ok


# Lies, caught ---------------------------------------------------------------------------------


def test_a_reveal_that_does_not_open_the_commitment_is_evidence_of_a_breach() -> None:
    s = Settling()
    s.propose(320)
    s.counter(370)
    assert s.reveal("buyer", constraints={"true_ceiling": 330}) == [
        "settle.reveal",
        "round.verdict",
        "session.close",
    ]
    verdict, close = s.payloads()[-2:]
    assert (verdict["status"], verdict["rationale"], close["reason"]) == (
        "violated",
        "commitment_mismatch",
        "commitment_mismatch",
    )
    assert verdict["checks"]["I3"] == "fail"
    assert s.audit().ok  # the arbiter caught it: the protocol worked


def test_a_limit_the_partys_own_price_broke_is_evidence_of_a_breach() -> None:
    s = Settling({"true_ceiling": 310}, FLOOR)
    s.propose(320)  # above the ceiling it is about to reveal
    s.counter(370)
    s.reveal("buyer")
    verdict, close = s.payloads()[-2:]
    assert (verdict["status"], verdict["rationale"], close["reason"]) == (
        "violated",
        "limit_breached",
        "limit_breached",
    )
    assert s.audit().ok


def test_a_timeout_while_settling_closes_without_a_verdict() -> None:
    s = Settling()
    s.propose(320)
    s.counter(370)
    s.reveal("buyer")
    due = s.session.negotiation.next_deadline()
    assert due is not None
    closed = s.session.negotiation.expire(due)
    assert [e.type for e in closed] == ["session.close"]
    assert closed[0].envelope["payload"]["reason"] == "response_timeout"  # type: ignore[index]


@pytest.mark.parametrize("role", ["buyer", "merchant"])
def test_either_party_may_withdraw_while_settling(role: str) -> None:
    s = Settling()
    s.propose(320)
    s.counter(370)
    s.reveal("buyer")
    commit_ = s.commits[role]
    s.session.feed(withdraw(role, commit_))
    assert s.state.close_reason == f"withdrawn_by_{role}"
    assert s.audit().ok


# Refusals: nothing logged, nothing changed ----------------------------------------------------


def _refusal(s: Settling, make: Callable[[], Envelope]) -> str:
    before = s.state
    with pytest.raises(ProtocolError) as refused:
        s.session.feed(make())
    assert s.state == before
    return refused.value.code


def test_a_reveal_without_settlement_is_refused() -> None:
    buyer_commit, merchant_commit = commitments(CEILING, FLOOR)
    session = Session(constraints_commit=buyer_commit)
    session.feed(ack(merchant_commit))
    reveal = {
        "round": 1,
        "constraints": CEILING,
        "salt": BUYER_SALT,
        "constraints_commit": buyer_commit,
    }
    with pytest.raises(ProtocolError) as refused:
        session.feed(envelope("settle.reveal", reveal, role="buyer"))
    assert refused.value.code == "settlement_not_enabled"
    assert session.types() == ["session.open", "session.ack"]


@pytest.mark.parametrize(
    ("setup", "make", "code"),
    [
        pytest.param(
            lambda s: None,
            lambda s: s.reveal_envelope("buyer", constraints={"budget_cap": 400}),
            "not_settleable",
            id="no-limit",
        ),
        pytest.param(
            lambda s: None,
            lambda s: s.reveal_envelope("buyer", round=2),
            "wrong_round",
            id="wrong-round",
        ),
        pytest.param(
            lambda s: None,
            lambda s: s.reveal_envelope("merchant"),
            "out_of_turn",
            id="not-in-turn",
        ),
        pytest.param(
            lambda s: s.reveal("buyer"),
            lambda s: s.reveal_envelope("buyer"),
            "out_of_turn",
            id="twice",
        ),
        pytest.param(
            lambda s: s.reveal("buyer"),
            lambda s: counter(1, 370, s.commits["merchant"]),
            "out_of_turn",
            id="an-offer-while-settling",
        ),
    ],
)
def test_refusals_change_nothing(setup: Any, make: Any, code: str) -> None:
    s = Settling()
    setup(s)
    assert _refusal(s, lambda: make(s)) == code


def test_no_reveal_in_the_final_answer() -> None:
    s = Settling()
    for round_ in range(1, 6):
        s.propose(300 + round_)
        s.counter(400 - round_)
    assert s.state.final_answer
    assert _refusal(s, lambda: s.reveal_envelope("buyer")) == "out_of_turn"


def test_settlement_with_an_unsalted_commitment_is_refused_at_open_and_at_ack() -> None:
    weak = reference_commit(CEILING, ITEM, 5)
    with pytest.raises(ProtocolError) as refused:
        Negotiation.open(
            opening(constraints_commit=weak, settlement="reveal"),
            received_at=Session().now,
            arbiter=Session().negotiation.arbiter,
        )
    assert refused.value.code == "weak_commitment"
    session = Session(constraints_commit=commitments(CEILING, FLOOR)[0], settlement="reveal")
    with pytest.raises(ProtocolError) as refused:
        session.feed(ack(reference_commit(FLOOR, ITEM, 5)))
    assert refused.value.code == "weak_commitment"
    assert session.types() == ["session.open"]


# The auditor recomputes the outcome -----------------------------------------------------------


def _settled_log() -> list[JsonObject]:
    s = Settling()
    s.propose(320)
    s.counter(370)
    s.reveal("buyer")
    s.reveal("merchant")
    return s.session.log()


def _edit_agreement(log: list[JsonObject], **changes: Any) -> list[JsonObject]:
    edited = copy.deepcopy(log)
    payload = cast(JsonObject, cast(JsonObject, edited[-1]["envelope"])["payload"])
    agreement = cast(JsonObject, payload["agreement"])
    for name, value in changes.items():
        if name == "final_price":
            payload[name] = value
        agreement[name] = value
    return forge(edited, key=KEY)


@pytest.mark.parametrize(
    ("changes", "invariant", "problem"),
    [
        pytest.param(
            {"settlement": {"rule": "midpoint/v0.1", "ceiling": 420, "floor": 300}},
            "I6",
            "settlement is not the log's",
            id="forged-limits",
        ),
        pytest.param(
            {"final_price": 360, "settlement": None},
            "I4",
            "final price 360 was never accepted",
            id="another-price",
        ),
    ],
)
def test_the_auditor_refuses_a_forged_settlement(
    changes: dict[str, Any], invariant: str, problem: str
) -> None:
    log = _settled_log()
    assert audit_log(log, JWKS).ok
    report = audit_log(_edit_agreement(log, **changes), JWKS)
    assert any(problem in p for p in report.results[invariant].problems), problems(report)


def test_the_auditor_refuses_a_settlement_it_would_have_priced_otherwise() -> None:
    log = copy.deepcopy(_settled_log())
    verdict = cast(JsonObject, cast(JsonObject, log[-2]["envelope"])["payload"])
    verdict["buyer_price"] = verdict["merchant_price"] = 360
    report = audit_log(forge(log, key=KEY), JWKS)
    assert any("buyer_price 360" in p for p in report.results["I5"].problems), problems(report)


def test_a_reveal_in_a_log_without_settlement_fails_i2() -> None:
    log = copy.deepcopy(_settled_log())
    opened = cast(JsonObject, cast(JsonObject, log[0]["envelope"])["payload"])
    del opened["settlement"]
    report = audit_log(forge(log, key=KEY), JWKS)
    assert any("opened without settlement" in p for p in report.results["I2"].problems)


def test_the_other_partys_window_starts_at_the_first_reveal() -> None:
    s = Settling()
    s.propose(320)
    s.counter(370)
    s.reveal("buyer")
    assert s.session.negotiation.next_deadline() == s.session.now + timedelta(seconds=300)
