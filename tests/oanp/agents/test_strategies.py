from __future__ import annotations

import decimal
from decimal import Decimal
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oanp.agents.strategies import (
    ACCEPT,
    STRATEGIES,
    Boulware,
    Conceder,
    Decision,
    Limits,
    Linear,
    Offer,
    ReferenceBuyer,
    ReferenceMerchant,
    Situation,
    Strategy,
    TimeDependent,
    TitForTat,
    UnknownStrategy,
    at_least_as_good,
    strategy_named,
)
from oanp.wire.commitments import Side
from oanp.wire.money import decimals_of, minor_units

D = Decimal
ALL_STRATEGIES: list[Strategy] = [
    ReferenceBuyer(),
    ReferenceMerchant(),
    Boulware(),
    Linear(),
    Conceder(),
    TitForTat(),
]
#: Opponents that never give in, so a strategy's whole price path shows.
STUBBORN: dict[Side, Decimal] = {"buyer": D(10) ** 9, "merchant": D("0.01")}

DEMO_BUYER = Limits(ideal=D(320), reservation=D(420), target=D(400))
DEMO_MERCHANT = Limits(ideal=D(400), reservation=D(280), target=D(400))


def situation(
    role: Side,
    limits: Limits,
    round_: int,
    *,
    max_rounds: int = 5,
    own: tuple[Decimal, ...] = (),
    opponent: tuple[Decimal, ...] = (),
    currency: str = "USD",
) -> Situation:
    return Situation(role, limits, currency, round_, max_rounds, own, opponent)


def price_path(
    strategy: Strategy,
    role: Side,
    limits: Limits,
    opponent: list[Decimal] | None = None,
    *,
    max_rounds: int = 5,
    currency: str = "USD",
) -> list[Decision]:
    """Every move of ``strategy`` until it accepts, against a fixed opponent price sequence.

    A buyer in round r sees the merchant's counters of rounds 1..r-1; a merchant sees the
    buyer's proposes of rounds 1..r.
    """
    if opponent is None:
        opponent = [STUBBORN[role]] * max_rounds
    own: list[Decimal] = []
    moves: list[Decision] = []
    for round_ in range(1, max_rounds + 1):
        seen = opponent[: round_ - 1] if role == "buyer" else opponent[:round_]
        move = strategy.decide(
            situation(
                role,
                limits,
                round_,
                max_rounds=max_rounds,
                own=tuple(own),
                opponent=tuple(seen),
                currency=currency,
            )
        )
        moves.append(move)
        if not isinstance(move, Offer):
            break
        own.append(move.price)
    return moves


def offered(moves: list[Decision]) -> list[Decimal]:
    return [m.price for m in moves if isinstance(m, Offer)]


# Price paths --------------------------------------------------------------------------------


def test_reference_buyer_opens_at_its_ideal_and_concedes_five_percent_of_budget() -> None:
    assert offered(price_path(ReferenceBuyer(), "buyer", DEMO_BUYER)) == [320, 340, 360, 380, 400]


def test_reference_buyer_never_passes_its_ceiling() -> None:
    limits = Limits(ideal=D(320), reservation=D(350), target=D(400))
    assert offered(price_path(ReferenceBuyer(), "buyer", limits)) == [320, 340, 350, 350, 350]


def test_reference_merchant_concedes_a_quarter_of_its_range_per_round_down_to_its_floor() -> None:
    path = price_path(ReferenceMerchant(), "merchant", DEMO_MERCHANT)
    assert offered(path) == [370, 340, 310, 280, 280]


@pytest.mark.parametrize(
    ("role", "limits", "expected"),
    [
        ("buyer", Limits(D(300), D(400), D(400)), [300, 325, 350, 375, 400]),
        ("merchant", Limits(D(400), D(300), D(400)), [400, 375, 350, 325, 300]),
    ],
)
def test_linear_concedes_evenly_from_ideal_to_reservation(
    role: Side, limits: Limits, expected: list[int]
) -> None:
    assert offered(price_path(Linear(), role, limits)) == expected


@pytest.mark.parametrize("tactic", [Boulware(), Linear(), Conceder()])
@pytest.mark.parametrize("max_rounds", [2, 5, 20])
def test_time_dependent_tactics_open_at_ideal_and_name_their_reservation_last(
    tactic: TimeDependent, max_rounds: int
) -> None:
    path = offered(
        price_path(tactic, "buyer", Limits(D(300), D(400), D(400)), max_rounds=max_rounds)
    )
    assert len(path) == max_rounds
    assert path[0] == 300
    assert path[-1] == 400


def test_boulware_holds_out_and_conceder_gives_in_early() -> None:
    limits = Limits(D(300), D(400), D(400))
    boulware, linear, conceder = (
        offered(price_path(t, "buyer", limits)) for t in (Boulware(), Linear(), Conceder())
    )
    for middle in range(1, 4):
        assert boulware[middle] < linear[middle] < conceder[middle]


def test_time_dependent_exponent_is_a_parameter() -> None:
    assert (Boulware().exponent, Linear().exponent, Conceder().exponent) == (D("0.2"), 1, 5)
    limits = Limits(D(300), D(400), D(400))
    softer = offered(price_path(Boulware(exponent=D("0.5")), "buyer", limits))
    assert offered(price_path(Boulware(), "buyer", limits))[2] < softer[2] < 350
    with pytest.raises(ValueError, match="positive"):
        TimeDependent(exponent=D(0))


def test_a_single_round_session_starts_at_the_reservation() -> None:
    moves = price_path(Boulware(), "buyer", Limits(D(300), D(400), D(400)), max_rounds=1)
    assert moves == [Offer(D(400))]


@pytest.mark.parametrize(
    ("currency", "buyer_price", "merchant_price"),
    [
        ("USD", D("100.33"), D("100.67")),
        ("JPY", D(100), D(101)),
        ("KWD", D("100.333"), D("100.667")),
    ],
)
def test_prices_round_to_the_minor_unit_in_the_partys_own_favour(
    currency: str, buyer_price: Decimal, merchant_price: Decimal
) -> None:
    # Round 2 of 4 is t = 1/3: a third of the 1-unit range, which no currency holds exactly.
    buyer = Linear().decide(
        situation("buyer", Limits(D(100), D(101), D(101)), 2, max_rounds=4, currency=currency)
    )
    merchant = Linear().decide(
        situation("merchant", Limits(D(101), D(100), D(101)), 2, max_rounds=4, currency=currency)
    )
    assert buyer == Offer(buyer_price)
    assert merchant == Offer(merchant_price)


def test_a_reservation_finer_than_the_currency_is_rounded_inside_the_limit() -> None:
    buyer = Linear().decide(
        situation("buyer", Limits(D(100), D("120.7"), D(120)), 5, currency="JPY")
    )
    merchant = Linear().decide(
        situation("merchant", Limits(D(130), D("100.2"), D(130)), 5, currency="JPY")
    )
    assert buyer == Offer(D(120))
    assert merchant == Offer(D(101))


def test_decisions_do_not_depend_on_the_callers_decimal_context() -> None:
    cases = [
        situation("buyer", DEMO_BUYER, 3, own=(D(320), D(340)), opponent=(D(370), D(355))),
        situation("merchant", DEMO_MERCHANT, 2, own=(D(370),), opponent=(D(320), D(333))),
    ]
    expected = [[s_.decide(c) for c in cases] for s_ in ALL_STRATEGIES]
    with decimal.localcontext() as ctx:
        ctx.prec = 3
        ctx.rounding = decimal.ROUND_UP
        assert [[s_.decide(c) for c in cases] for s_ in ALL_STRATEGIES] == expected


# Acceptance ---------------------------------------------------------------------------------


def test_merchant_accepts_a_buyer_price_that_meets_its_own_next_counter() -> None:
    # The published round 2: its counter would be 400 - 120 x 0.25 x 2 = 340.
    at_counter = situation("merchant", DEMO_MERCHANT, 2, own=(D(370),), opponent=(D(320), D(340)))
    below = situation("merchant", DEMO_MERCHANT, 2, own=(D(370),), opponent=(D(320), D("339.99")))
    assert ReferenceMerchant().decide(at_counter) == ACCEPT
    assert ReferenceMerchant().decide(below) == Offer(D(340))


def test_merchant_takes_any_price_within_its_floor_in_the_final_round() -> None:
    def final(buyer_price: str, max_rounds: int) -> Decision:
        return ReferenceMerchant().decide(
            situation(
                "merchant",
                DEMO_MERCHANT,
                2,
                max_rounds=max_rounds,
                own=(D(370),),
                opponent=(D(250), D(buyer_price)),
            )
        )

    assert final("280", max_rounds=2) == ACCEPT
    assert final("279.99", max_rounds=2) == Offer(D(340))
    assert final("300", max_rounds=5) == Offer(D(340))  # not its last word yet


def test_buyer_accepts_a_standing_counter_no_higher_than_its_own_next_price() -> None:
    def round_two(counter: str, max_rounds: int = 5) -> Decision:
        return ReferenceBuyer().decide(
            situation(
                "buyer", DEMO_BUYER, 2, max_rounds=max_rounds, own=(D(320),), opponent=(D(counter),)
            )
        )

    assert round_two("340") == ACCEPT
    assert round_two("340.01") == Offer(D(340))
    # The merchant still answers the buyer's final propose, so no last-word rule for buyers.
    assert round_two("360", max_rounds=2) == Offer(D(340))


def test_nothing_is_accepted_before_the_opponent_named_a_price() -> None:
    for strategy in ALL_STRATEGIES:
        assert isinstance(strategy.decide(situation("buyer", DEMO_BUYER, 1)), Offer)


# Tit-for-tat --------------------------------------------------------------------------------

TFT_BUYER = Limits(ideal=D(300), reservation=D(500), target=D(400))


def test_tit_for_tat_opens_at_its_ideal() -> None:
    assert TitForTat().decide(situation("buyer", TFT_BUYER, 1)) == Offer(D(300))


def test_tit_for_tat_mirrors_the_opponents_relative_concession() -> None:
    # The merchant went 400 -> 380 (it now asks 95% of before): the buyer offers 300 / 0.95.
    move = TitForTat().decide(
        situation("buyer", TFT_BUYER, 3, own=(D(300), D(300)), opponent=(D(400), D(380)))
    )
    assert move == Offer(D("315.78"))


def test_tit_for_tat_concedes_a_minimum_when_the_opponent_stands_still() -> None:
    # 5% of the 200 range: without it two tit-for-tat agents would mirror stillness forever.
    move = TitForTat().decide(
        situation("buyer", TFT_BUYER, 3, own=(D(300), D(300)), opponent=(D(400), D(400)))
    )
    assert move == Offer(D(310))


def test_tit_for_tat_stops_at_its_reservation() -> None:
    move = TitForTat().decide(
        situation("buyer", TFT_BUYER, 3, own=(D(300), D(480)), opponent=(D(900), D(600)))
    )
    assert move == Offer(D(500))


# Properties ---------------------------------------------------------------------------------

amounts = st.decimals(min_value=D(1), max_value=D(10) ** 7, places=3)


@st.composite
def limits_for(draw: st.DrawFn, role: Side) -> Limits:
    low, middle, high = sorted(draw(st.lists(amounts, min_size=3, max_size=3)))
    if role == "buyer":
        return Limits(ideal=low, reservation=high, target=middle)
    return Limits(ideal=high, reservation=low, target=middle)


@settings(deadline=None)
@given(data=st.data())
def test_every_strategy_stays_within_its_limits_monotone_and_in_minor_units(
    data: st.DataObject,
) -> None:
    role: Side = data.draw(st.sampled_from(["buyer", "merchant"]))
    strategy = data.draw(st.sampled_from(ALL_STRATEGIES))
    limits = data.draw(limits_for(role))
    currency = data.draw(st.sampled_from(["USD", "JPY", "KWD"]))
    max_rounds = data.draw(st.integers(1, 20))
    opponent = data.draw(st.lists(amounts, min_size=max_rounds, max_size=max_rounds))

    moves = price_path(strategy, role, limits, opponent, max_rounds=max_rounds, currency=currency)

    prices = offered(moves)
    for earlier, later in pairwise(prices):
        assert at_least_as_good(role, earlier, later)  # concessions only, never back
    for price in prices:
        assert at_least_as_good(role, price, limits.reservation)
        assert price > 0
        assert decimals_of(price) <= minor_units(currency)
    if moves[-1] == ACCEPT:
        round_ = len(moves)
        standing = opponent[round_ - 2] if role == "buyer" else opponent[round_ - 1]
        assert at_least_as_good(role, standing, limits.reservation)


# The registry ---------------------------------------------------------------------------------


def test_the_registry_names_each_strategy_as_hosted_agents_store_it() -> None:
    # Hosted agents' profiles and sessions store these names: renaming one orphans their rows.
    assert list(STRATEGIES) == ["reference", "boulware", "conceder", "linear", "tit-for-tat"]


@pytest.mark.parametrize(
    ("name", "buyer", "merchant"),
    [
        ("reference", ReferenceBuyer(), ReferenceMerchant()),
        ("boulware", Boulware(), Boulware()),
        ("conceder", Conceder(), Conceder()),
        ("linear", Linear(), Linear()),
        ("tit-for-tat", TitForTat(), TitForTat()),
        # The command line's first spelling, still accepted.
        ("titfortat", TitForTat(), TitForTat()),
    ],
)
def test_a_name_gives_each_role_its_tactic(name: str, buyer: Strategy, merchant: Strategy) -> None:
    assert strategy_named(name, "buyer") == buyer
    assert strategy_named(name, "merchant") == merchant


def test_an_unknown_name_is_refused_with_the_known_ones() -> None:
    with pytest.raises(UnknownStrategy, match="'gambler'; one of reference, boulware"):
        strategy_named("gambler", "buyer")
