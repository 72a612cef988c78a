"""The registry's tunables: what each strategy can be tuned with, how a raw mapping is
validated, and what each parameter does to the moves."""

from __future__ import annotations

import itertools
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oanp.agents.parties import BuyerAgent, MerchantAgent
from oanp.agents.rehearsal import rehearse
from oanp.agents.strategies import (
    ACCEPT,
    FRAME_PARAMETERS,
    STRATEGIES,
    Boulware,
    Conceder,
    Linear,
    Offer,
    ParameterError,
    ReferenceBuyer,
    ReferenceMerchant,
    Strategy,
    TitForTat,
    at_least_as_good,
    strategy_named,
)
from oanp.agents.vaults import BuyerVault, MerchantVault
from oanp.wire.commitments import Side, encode_salt
from tests.oanp.agents.test_strategies import (
    DEMO_BUYER,
    DEMO_MERCHANT,
    limits_for,
    offered,
    price_path,
    situation,
)
from tests.support.factories.logs import SteppingClock
from tests.support.factories.sessions import ARBITER

D = Decimal
ROLES: list[Side] = ["buyer", "merchant"]
TODAY: dict[tuple[str, Side], Strategy] = {
    ("reference", "buyer"): ReferenceBuyer(),
    ("reference", "merchant"): ReferenceMerchant(),
    ("boulware", "buyer"): Boulware(),
    ("boulware", "merchant"): Boulware(),
    ("conceder", "buyer"): Conceder(),
    ("conceder", "merchant"): Conceder(),
    ("linear", "buyer"): Linear(),
    ("linear", "merchant"): Linear(),
    ("tit-for-tat", "buyer"): TitForTat(),
    ("tit-for-tat", "merchant"): TitForTat(),
}


def merchant(name: str, **parameters: str) -> Strategy:
    return STRATEGIES[name].build("merchant", parameters)


# The defaults are today's tactics -----------------------------------------------------------


@pytest.mark.parametrize(("name", "role"), sorted(TODAY))
def test_the_defaults_build_todays_tactic_stored_or_not(name: str, role: Side) -> None:
    named = STRATEGIES[name]
    assert named.build(role) == TODAY[name, role]
    # As a profile stores them: every parameter, as text.
    assert named.build(role, named.stored(role, {})) == TODAY[name, role]


@given(data=st.data())
def test_stored_defaults_decide_every_situation_as_today(data: st.DataObject) -> None:
    name, role = data.draw(st.sampled_from(sorted(TODAY)))
    limits = data.draw(limits_for(role))
    max_rounds = data.draw(st.integers(1, 20))
    amounts = st.decimals(min_value=D(1), max_value=D(10) ** 7, places=2)
    opponent = data.draw(st.lists(amounts, min_size=max_rounds, max_size=max_rounds))
    tuned = STRATEGIES[name].build(role, STRATEGIES[name].stored(role, {}))
    assert price_path(tuned, role, limits, opponent, max_rounds=max_rounds) == price_path(
        TODAY[name, role], role, limits, opponent, max_rounds=max_rounds
    )


def test_every_parameter_declares_a_valid_default_and_builds_at_its_bounds() -> None:
    for named, role in itertools.product(STRATEGIES.values(), ROLES):
        for parameter in named.parameters_for(role):
            assert parameter.parse(str(parameter.default_for(role))) == parameter.default_for(role)
            if parameter.kind == "decimal":
                extremes: list[object] = [parameter.minimum, parameter.maximum]
            else:
                extremes = [value for value, _ in parameter.choices]
            for value in extremes:
                named.build(role, {parameter.name: value})
        # Every concession tactic is tuned in the same frame, after its own parameters.
        assert named.parameters[-len(FRAME_PARAMETERS) :] == FRAME_PARAMETERS


def test_a_buyer_has_no_merchants_parameters() -> None:
    assert [p.name for p in STRATEGIES["boulware"].parameters_for("buyer")] == [
        "exponent",
        "acceptance",
    ]
    assert [p.name for p in STRATEGIES["boulware"].parameters_for("merchant")] == [
        "exponent",
        "acceptance",
        "last_round",
        "inventory_pressure",
    ]
    assert STRATEGIES["reference"].parse("buyer", {})["step_share"] == D("0.05")
    assert STRATEGIES["reference"].parse("merchant", {})["step_share"] == D("0.25")


# Validation ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "role", "raw", "errors"),
    [
        ("boulware", "merchant", {"exponent": "0.01"}, {"exponent": "from 0.05 to 20"}),
        ("boulware", "merchant", {"exponent": "20.5"}, {"exponent": "from 0.05 to 20"}),
        ("boulware", "merchant", {"exponent": "soft"}, {"exponent": "a number"}),
        ("boulware", "merchant", {"exponent": "NaN"}, {"exponent": "a number"}),
        ("boulware", "merchant", {"exponent": 0.5}, {"exponent": "a number"}),
        ("boulware", "merchant", {"exponent": True}, {"exponent": "a number"}),
        ("reference", "merchant", {"step_share": "0.6"}, {"step_share": "from 0.01 to 0.5"}),
        ("tit-for-tat", "buyer", {"min_share": "-0.1"}, {"min_share": "from 0 to 0.5"}),
        (
            "linear",
            "merchant",
            {"inventory_pressure": "1.01"},
            {"inventory_pressure": "from 0 to 1"},
        ),
        ("linear", "merchant", {"acceptance": "always"}, {"acceptance": "one of next, prev"}),
        ("linear", "merchant", {"last_round": "walk"}, {"last_round": "one of take, counter"}),
        ("linear", "buyer", {"last_round": "take"}, {"last_round": "a merchant's parameter"}),
        (
            "linear",
            "merchant",
            {"step_share": "0.1"},
            {"step_share": "linear has no parameter 'step_share'; its parameters: exponent,"},
        ),
        (
            "reference",
            "merchant",
            {"step_share": "1", "acceptance": "x", "exponent": "2"},
            {"step_share": "0.01 to 0.5", "acceptance": "next, prev", "exponent": "no parameter"},
        ),
    ],
)
def test_a_bad_parameter_is_refused_by_name_with_its_range(
    name: str, role: Side, raw: dict[str, object], errors: dict[str, str]
) -> None:
    with pytest.raises(ParameterError) as refused:
        STRATEGIES[name].build(role, raw)
    assert set(refused.value.errors) == set(errors)
    for parameter, words in errors.items():
        assert words in refused.value.errors[parameter]
        assert parameter in refused.value.errors[parameter]
        assert refused.value.errors[parameter] in str(refused.value)


def test_values_are_typed_from_text_ints_and_decimals() -> None:
    parsed = STRATEGIES["conceder"].parse(
        "merchant", {"exponent": " 7 ", "inventory_pressure": 1, "acceptance": "prev"}
    )
    assert parsed == {
        "exponent": D(7),
        "acceptance": "prev",
        "last_round": "take",
        "inventory_pressure": D(1),
    }
    assert STRATEGIES["conceder"].stored("merchant", {"exponent": D("2.5")})["exponent"] == "2.5"


def test_strategy_named_takes_parameters_and_aliases() -> None:
    assert strategy_named("titfortat", "buyer", {"min_share": "0.1"}) == TitForTat(
        min_share=D("0.1")
    )


# Each parameter moves the prices in its documented direction ------------------------------------


def test_a_larger_step_share_concedes_faster() -> None:
    default = offered(price_path(merchant("reference"), "merchant", DEMO_MERCHANT))
    bigger = offered(price_path(merchant("reference", step_share="0.5"), "merchant", DEMO_MERCHANT))
    assert default == [370, 340, 310, 280, 280]
    assert bigger == [340, 280, 280, 280, 280]


def test_a_larger_exponent_gives_in_earlier() -> None:
    paths = [
        offered(price_path(merchant("boulware", exponent=e), "merchant", DEMO_MERCHANT))
        for e in ("0.05", "0.2", "1", "5", "20")
    ]
    for middle in range(1, 4):
        column = [path[middle] for path in paths]
        assert column == sorted(column, reverse=True)
        assert len(set(column)) == len(column)
    # Whatever e, it opens at its ideal and names its floor last.
    assert {path[0] for path in paths} == {400}
    assert {path[-1] for path in paths} == {280}


def test_a_larger_least_step_concedes_more_against_a_still_opponent() -> None:
    def against_stillness(share: str) -> Decimal:
        move = merchant("tit-for-tat", min_share=share).decide(
            situation("merchant", DEMO_MERCHANT, 3, own=(D(400), D(400)), opponent=(D(300),) * 3)
        )
        assert isinstance(move, Offer)
        return move.price

    # 0, 5% and 20% of the 120 range.
    assert [against_stillness(s) for s in ("0", "0.05", "0.2")] == [400, 394, 376]


def test_inventory_pressure_gives_up_its_share_of_what_is_left_above_the_floor() -> None:
    # Round 1 of the reference merchant: 370, and 370 + p(280 - 370) under pressure p.
    paths = {
        p: offered(
            price_path(merchant("reference", inventory_pressure=p), "merchant", DEMO_MERCHANT)
        )
        for p in ("0", "0.5", "1")
    }
    assert paths["0"] == [370, 340, 310, 280, 280]
    assert paths["0.5"] == [325, 310, 295, 280, 280]
    assert paths["1"] == [280] * 5
    for name in ("boulware", "tit-for-tat"):
        calm, pressed = (
            offered(price_path(merchant(name, inventory_pressure=p), "merchant", DEMO_MERCHANT))
            for p in ("0", "0.3")
        )
        assert all(a <= b for a, b in zip(pressed, calm, strict=True))
        assert pressed[0] < calm[0]


def test_prev_acceptance_takes_no_price_below_the_last_counter() -> None:
    # The published round 2: the buyer's 340 meets the merchant's next counter (AC_next takes
    # it), not its last one, 370.
    round_two = situation("merchant", DEMO_MERCHANT, 2, own=(D(370),), opponent=(D(320), D(340)))
    assert merchant("reference").decide(round_two) == ACCEPT
    assert merchant("reference", acceptance="prev").decide(round_two) == Offer(D(340))
    met = situation("merchant", DEMO_MERCHANT, 2, own=(D(370),), opponent=(D(320), D(370)))
    assert merchant("reference", acceptance="prev").decide(met) == ACCEPT


def test_counter_in_the_last_round_leaves_the_deal_to_the_buyers_final_answer() -> None:
    # Three rounds: the reference merchant's last counter is 310, above its floor.
    last = situation(
        "merchant", DEMO_MERCHANT, 3, max_rounds=3, own=(D(370), D(340)), opponent=(D(300),) * 3
    )
    assert merchant("reference").decide(last) == ACCEPT
    assert merchant("reference", last_round="counter").decide(last) == Offer(D(310))
    # The buyer's final answer is the buyer's to give, whatever the merchant's setting.
    final = situation(
        "buyer", DEMO_BUYER, 3, max_rounds=3, own=(D(320), D(340), D(360)), opponent=(D(410),) * 3
    )
    assert STRATEGIES["reference"].build("buyer").decide(final) == ACCEPT


def _session(
    merchant_strategy: Strategy, *, max_rounds: int = 5, budget: int = 400
) -> tuple[int, Decimal | None]:
    """A reference buyer (ceiling 420, opening at 80% of ``budget`` and conceding 5% of it
    per round) against ``merchant_strategy`` (floor 280, ideal 400): the rounds played and
    the agreed price."""
    ids = itertools.count()
    buyer = BuyerAgent(
        agent_id="buyer-1",
        vault=BuyerVault(true_ceiling=D(420), budget_cap=D(budget)),
        strategy=ReferenceBuyer(),
        salt=encode_salt(b"\x01" * 32),
        new_message_id=lambda: f"b{next(ids)}",
    )
    seller = MerchantAgent(
        agent_id="merchant-1",
        vault=MerchantVault(floor_price=D(280), ideal_price=D(400)),
        strategy=merchant_strategy,
        salt=encode_salt(b"\x02" * 32),
        new_message_id=lambda: f"m{next(ids)}",
    )
    clock = SteppingClock()
    opening = buyer.open(
        session_id="sess-tuned",
        merchant_agent_id="merchant-1",
        item={"sku": "x"},
        currency="USD",
        max_rounds=max_rounds,
        now=clock(),
    )
    state = rehearse(
        buyer=buyer, merchant=seller, arbiter=ARBITER, opening=opening, clock=clock
    ).negotiation.state
    return state.round, state.final_price


def test_in_a_whole_session_each_setting_moves_the_deal_its_way() -> None:
    assert _session(merchant("reference")) == (2, 340)
    # AC_prev counters the buyer's 340, which the buyer then takes: one round later.
    assert _session(merchant("reference", acceptance="prev")) == (3, 340)
    # Stock to clear: it asks less at once, and the buyer takes its first counter.
    assert _session(merchant("reference", inventory_pressure="0.5")) == (2, 325)
    # Three rounds: the buyer (272, 289, 306) ends under the merchant's last counter (310).
    # "take" sells at the buyer's 306; "counter" names 310, which the buyer's final answer takes.
    assert _session(merchant("reference"), max_rounds=3, budget=340) == (3, 306)
    assert _session(merchant("reference", last_round="counter"), max_rounds=3, budget=340) == (
        3,
        310,
    )


@st.composite
def tuned(draw: st.DrawFn, role: Side) -> Strategy:
    """Any strategy of the registry, every parameter drawn from its range or choices."""
    named = STRATEGIES[draw(st.sampled_from(sorted(STRATEGIES)))]
    raw: dict[str, object] = {}
    for parameter in named.parameters_for(role):
        if parameter.kind == "choice":
            raw[parameter.name] = draw(st.sampled_from([v for v, _ in parameter.choices]))
        else:
            raw[parameter.name] = draw(
                st.decimals(min_value=parameter.minimum, max_value=parameter.maximum, places=3)
            )
    return named.build(role, raw)


@given(data=st.data())
def test_every_tuned_strategy_stays_within_its_limits_and_monotone(data: st.DataObject) -> None:
    role: Side = data.draw(st.sampled_from(ROLES))
    strategy = data.draw(tuned(role))
    limits = data.draw(limits_for(role))
    max_rounds = data.draw(st.integers(1, 20))
    amounts = st.decimals(min_value=D(1), max_value=D(10) ** 7, places=2)
    opponent = data.draw(st.lists(amounts, min_size=max_rounds, max_size=max_rounds))
    moves = price_path(strategy, role, limits, opponent, max_rounds=max_rounds)
    prices = offered(moves)
    assert all(at_least_as_good(role, a, b) for a, b in itertools.pairwise(prices))
    assert all(at_least_as_good(role, price, limits.reservation) for price in prices)
    if moves[-1] == ACCEPT:
        round_ = len(moves)
        standing = opponent[round_ - 2] if role == "buyer" else opponent[round_ - 1]
        assert at_least_as_good(role, standing, limits.reservation)
