"""Verdict profiles (docs/protocol.md §6): the spread rule of ``default/v0.1``, the stall rule
``strict/v0.1`` adds, the reason vocabulary, and the registry the machine looks profiles up in.
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oanp.wire.profiles import (
    DEFAULT,
    PROFILES,
    STRICT,
    TERMS,
    Judgement,
    Profile,
    Reason,
    VerdictStatus,
    breach_invariant,
    registry,
)
from tests.support.factories.sessions import ARBITER, counter, negotiating, propose

D = Decimal
FAIR, STUCK = VerdictStatus.FAIR, VerdictStatus.FAIR_BUT_STUCK

#: The rationale and close codes of v0.1 (docs/protocol.md §7).
V01_REASONS = [
    "opening_moves",
    "spread_narrowed",
    "spread_unchanged",
    "agreement",
    "buyer_reneged",
    "merchant_reneged",
    "commitment_mismatch",
    "max_rounds_reached",
    "stalled",
    "withdrawn_by_buyer",
    "withdrawn_by_merchant",
    "response_timeout",
    "deadline_expired",
    "operator_terminated",
    # Settlement by reveal (docs/protocol.md §5, settlement).
    "settled",
    "no_zone",
    "limit_breached",
    # Multi-issue terms (docs/protocol.md §11).
    "terms_narrowed",
]


def test_the_reason_codes_are_section_5s():
    assert [r.value for r in Reason] == V01_REASONS


def test_the_verdict_statuses():
    assert [s.value for s in VerdictStatus] == ["fair", "fair_but_stuck", "violated"]


@pytest.mark.parametrize(
    ("reason", "invariant"),
    [
        (Reason.COMMITMENT_MISMATCH, "I3"),
        (Reason.BUYER_RENEGED, "I4"),
        (Reason.MERCHANT_RENEGED, "I4"),
    ],
)
def test_a_breach_falls_under_its_invariant(reason, invariant):
    assert breach_invariant(reason) == invariant


# The spread rule, shared by both profiles ----------------------------------------------------


@pytest.mark.parametrize("profile", [DEFAULT, STRICT], ids=lambda p: p.name)
@pytest.mark.parametrize(
    ("round_", "spread", "previous", "expected"),
    [
        (1, D(50), None, Judgement(FAIR, Reason.OPENING_MOVES)),
        # Round 1 opens whatever a previous spread says.
        (1, D(80), D(50), Judgement(FAIR, Reason.OPENING_MOVES)),
        # A later round with nothing to compare (a caller's slip) is judged as an opening.
        (3, D(50), None, Judgement(FAIR, Reason.OPENING_MOVES)),
        (2, D(40), D(50), Judgement(FAIR, Reason.SPREAD_NARROWED)),
        (2, D("49.99"), D(50), Judgement(FAIR, Reason.SPREAD_NARROWED)),
        (2, D(50), D(50), Judgement(STUCK, Reason.SPREAD_UNCHANGED)),
        (2, D("50.00"), D(50), Judgement(STUCK, Reason.SPREAD_UNCHANGED)),
        (2, D(60), D(50), Judgement(STUCK, Reason.SPREAD_UNCHANGED)),
        (5, D(0), D("0.01"), Judgement(FAIR, Reason.SPREAD_NARROWED)),
        (4, D(-10), D(-5), Judgement(FAIR, Reason.SPREAD_NARROWED)),
    ],
)
def test_a_countered_round_is_judged_by_the_spread(profile, round_, spread, previous, expected):
    assert profile.judge_counter(round_, spread, previous) == expected


spreads = st.decimals(min_value=-(10**12), max_value=10**12, places=3)


@given(round_=st.integers(min_value=2, max_value=20), spread=spreads, previous=spreads)
def test_later_rounds_are_fair_exactly_when_the_spread_shrank(round_, spread, previous):
    judged = DEFAULT.judge_counter(round_, spread, previous)
    if spread < previous:
        assert judged == Judgement(FAIR, Reason.SPREAD_NARROWED)
    else:
        assert judged == Judgement(STUCK, Reason.SPREAD_UNCHANGED)
    assert STRICT.judge_counter(round_, spread, previous) == judged


def test_judging_never_says_violated():
    # Breaches are the machine's (I3, I4), never a profile's.
    judged = {
        DEFAULT.judge_counter(r, D(s), D(p)).status
        for r in (1, 2)
        for s in (-1, 0, 1)
        for p in (-1, 0, 1)
    }
    assert judged == {FAIR, STUCK}


# Stalling -----------------------------------------------------------------------------------


@pytest.mark.parametrize("stuck", [0, 1, 2, 3, 20])
def test_the_default_profile_never_stalls(stuck):
    assert DEFAULT.stall_limit is None
    assert DEFAULT.stalled(stuck) is False


@pytest.mark.parametrize(("stuck", "stalled"), [(0, False), (1, False), (2, True), (3, True)])
def test_the_strict_profile_stalls_at_two_consecutive_stuck_rounds(stuck, stalled):
    assert STRICT.stall_limit == 2
    assert STRICT.stalled(stuck) is stalled


@pytest.mark.parametrize(
    ("limit", "stuck", "stalled"), [(1, 0, False), (1, 1, True), (3, 2, False)]
)
def test_a_stall_limit_is_a_parameter(limit, stuck, stalled):
    assert Profile("patient/v1", stall_limit=limit).stalled(stuck) is stalled


@pytest.mark.parametrize(
    ("profile", "types"),
    [
        ("default/v0.1", ["round.verdict"] * 3),
        ("strict/v0.1", ["round.verdict"] * 3 + ["session.close"]),
    ],
)
def test_the_profile_a_session_names_decides_whether_stalling_ends_it(profile, types):
    # Round 1 opens, rounds 2 and 3 repeat its prices: two consecutive stuck rounds.
    session = negotiating(profile=profile)
    for round_ in (1, 2, 3):
        session.feed(propose(round_, 300))
        session.feed(counter(round_, 400))
    arbiter_types = [e.type for e in session.entries if e.envelope["sender"]["role"] == "arbiter"]
    assert arbiter_types == types
    statuses = [
        e.envelope["payload"]["status"] for e in session.entries if e.type == "round.verdict"
    ]
    assert statuses == ["fair", "fair_but_stuck", "fair_but_stuck"]


# The registry -------------------------------------------------------------------------------


def test_the_built_in_profiles():
    assert dict(PROFILES) == {"default/v0.1": DEFAULT, "strict/v0.1": STRICT, "terms/v0.1": TERMS}
    assert [p.with_terms for p in PROFILES.values()] == [False, False, True]
    assert ARBITER.profiles is PROFILES


def test_a_registry_is_keyed_by_profile_name():
    patient = Profile("patient/v1", stall_limit=5)
    profiles = registry([DEFAULT, patient])
    assert dict(profiles) == {"default/v0.1": DEFAULT, "patient/v1": patient}


def test_profiles_are_frozen_values():
    assert Profile("strict/v0.1", stall_limit=2) == STRICT
    with pytest.raises(dataclasses.FrozenInstanceError):
        STRICT.stall_limit = 10  # type: ignore[misc]
