"""The demo's background buyers: which sessions reveal, settle or break a rule, and what a
handful of them leave on a live arbiter."""

from __future__ import annotations

import random
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from arbiter_app import selectors as arbiter
from oanp.audit import verify_log
from oanp.net.client import ArbiterClient
from oanp.net.negotiators import party_signature_rules
from sessions_app.demo.buyers import (
    FLIGHT_ISSUES,
    UNOFFERED_CURRENCY,
    BackgroundBuyers,
    Cadence,
    Plan,
    TakeBack,
    flight_terms,
)
from sessions_app.demo.seed import (
    DEMO_BUYERS,
    SKYFARE_TERMS,
    issue_buyer_keys,
    seed,
)
from tests.conftest import LiveServer, Worker
from tests.support.waiting import wait_for


def test_the_default_cadence_mixes_every_kind_of_session_the_same_way_each_run() -> None:
    plans = [Cadence().plan(number) for number in range(1, 31)]

    assert plans == [Cadence().plan(number) for number in range(1, 31)]
    assert [n for n, plan in enumerate(plans, 1) if plan.reneges] == [15, 30]
    assert [n for n, plan in enumerate(plans, 1) if plan.falls_silent] == [6, 12, 18, 24]
    assert [n for n, plan in enumerate(plans, 1) if plan.settles] == [3, 9, 21, 27]
    assert [n for n, plan in enumerate(plans, 1) if plan.terms] == [1, 5, 13, 17, 25, 29]
    assert [n for n, plan in enumerate(plans, 1) if plan.unoffered] == [20]
    assert sum(plan.reveals for plan in plans) == 24  # 80 %
    assert Cadence().plan(2) == Plan(falls_silent=False, settles=False, reneges=False, reveals=True)
    assert Cadence().plan(1).terms


def test_a_terms_buyer_can_meet_the_demo_merchant_on_every_issue() -> None:
    # Whatever it draws, each issue's worst value for the buyer is one SkyFare accepts, so a
    # terms session fails on the price if at all.
    merchant = {i.name: i for i in SKYFARE_TERMS.issues}
    for seed_ in range(50):
        buyer = flight_terms(random.Random(seed_))
        bags, fare = buyer.of("checked_bags"), buyer.of("fare_class")
        assert bags is not None
        assert fare is not None
        assert merchant["checked_bags"].ideal <= bags.limit <= merchant["checked_bags"].limit
        options = FLIGHT_ISSUES[1]["options"]
        assert options.index(fare.limit) >= options.index(merchant["fare_class"].limit)


def test_a_session_does_one_thing_besides_haggling_at_most() -> None:
    for number in range(1, 200):
        plan = Cadence(renege=4, time_out=2, settle=1).plan(number)
        assert plan.reneges + plan.falls_silent + plan.settles + plan.terms == 1
        plan = Cadence(renege=4, time_out=3, settle=5, terms=1).plan(number)
        assert plan.reneges + plan.falls_silent + plan.settles + plan.terms == 1


def _move(kind: str, price: int, round_: int) -> dict[str, Any]:
    return {"type": kind, "payload": {"round": round_, "price": price, "constraints_commit": "c"}}


def test_take_back_sends_the_second_move_below_the_first_offer() -> None:
    take_back = TakeBack()
    ack = {"type": "session.ack", "payload": {}}

    assert take_back(ack) is ack
    assert take_back(_move("offer.propose", 300, 1)) == _move("offer.propose", 300, 1)
    # Even an accept becomes the lower offer: the round-2 move must be a renege.
    assert take_back(_move("offer.accept", 350, 2)) == _move("offer.propose", 270, 2)


@pytest.mark.django_db(transaction=True)
def test_a_handful_of_background_sessions_reveal_settle_negotiate_terms_and_get_caught(
    live_arbiter: LiveServer, celery_worker_process: Worker
) -> None:
    seed()
    keys = issue_buyer_keys()
    strategies = {buyer.agent_id: buyer.strategy for buyer in DEMO_BUYERS}
    lines: list[str] = []
    buyers = BackgroundBuyers(
        live_arbiter.url,
        keys,
        strategies,
        lines.append,
        concurrency=4,
        every=(0.0, 0.1),
        # 1 negotiates terms and reveals, 2 settles and reveals, 3 reneges, 4 settles and
        # keeps quiet.
        cadence=Cadence(renege=3, time_out=1000, settle=2, conceal=4, terms=5, unoffered=1000),
        sessions=4,
    )
    buyers.start()
    buyers.join(90)

    assert len(lines) == 4, lines
    assert not any("gave up" in line for line in lines), lines
    assert sum("with merchant-sfo" in line and ", with terms: " in line for line in lines) == 1
    assert sum("revealed its limits after the end" in line for line in lines) == 3, lines
    assert any("violation caught: buyer_reneged in round 2" in line for line in lines), lines
    sessions = {s.session_id: s for s in arbiter.sessions_of(None)}
    assert len(sessions) == 4
    logs = {}
    with ArbiterClient(live_arbiter.url, keys["buyer-ana"]) as anyone:
        jwks = anyone.jwks()
    for session_id, session in sessions.items():
        with ArbiterClient(live_arbiter.url, keys[session.buyer_agent_id]) as client:
            logs[session_id] = client.log(session_id)
            signatures = party_signature_rules(client, logs[session_id])
        report = verify_log(logs[session_id], jwks, signatures=signatures)
        assert report.ok, session_id
        # Both sides sign: the demo's buyers with keys of this run, the hosted merchants theirs.
        assert report.unsigned_entries == 0, session_id
        assert report.signed_entries == report.signed_valid > 0
    kinds = [[e["envelope"]["type"] for e in log] for log in logs.values()]
    # Both sides revealed in the settling sessions: settled at the midpoint, or no zone.
    assert sum(k.count("settle.reveal") == 2 for k in kinds) == 2, kinds
    verdicts = [
        e["envelope"]["payload"]
        for log in logs.values()
        for e in log
        if e["envelope"]["type"] == "round.verdict"
    ]
    assert [(v["status"], v["rationale"]) for v in verdicts if v["status"] == "violated"] == [
        ("violated", "buyer_reneged")
    ]
    revealed = [arbiter.revealed_constraints(s) for s in sessions.values()]
    assert sorted("buyer" in r for r in revealed) == [False, True, True, True]
    # The terms session: declared, carried by every offer, and once over SkyFare (which
    # reveals after the end) and the buyer both revealed: the page draws the frontier.
    (terms_id,) = [i for i, log in logs.items() if log[0]["envelope"]["payload"].get("issues")]
    opened = logs[terms_id][0]["envelope"]["payload"]
    assert (opened["profile"], opened["issues"]) == ("terms/v0.1", FLIGHT_ISSUES)
    offers = [e["envelope"] for e in logs[terms_id] if e["envelope"]["type"].startswith("offer.")]
    assert offers
    assert all(set(o["payload"]["terms"]) == {"checked_bags", "fare_class"} for o in offers)

    def revealed_in_terms() -> dict[str, Any]:
        # Read again each time: the reveals are a column of the session's row.
        session = arbiter.session_named(terms_id)
        assert session is not None
        return arbiter.revealed_constraints(session)

    def both_revealed() -> bool:
        """SkyFare's reveal after the end of the terms session"""
        return set(revealed_in_terms()) == {"buyer", "merchant"}

    wait_for(both_revealed, 30)
    admin = Client()
    admin.force_login(User.objects.get(username="admin"))
    page = admin.get(f"/sessions/{terms_id}/").content.decode()
    assert 'id="trade-offs"' in page
    # Every issue's limits fit SkyFare's, so only the price can leave no zone.
    revealed = revealed_in_terms()
    zone = revealed["buyer"]["true_ceiling"] >= revealed["merchant"]["floor_price"]
    assert ('id="frontier-chart"' in page) is zone
    assert ("No frontier" in page) is not zone


@pytest.mark.django_db(transaction=True)
def test_a_background_buyer_asking_in_a_currency_no_merchant_offers_is_refused(
    live_arbiter: LiveServer,
) -> None:
    seed()
    keys = issue_buyer_keys()
    lines: list[str] = []
    buyers = BackgroundBuyers(
        live_arbiter.url,
        keys,
        {buyer.agent_id: buyer.strategy for buyer in DEMO_BUYERS},
        lines.append,
        every=(0.0, 0.1),
        cadence=Cadence(unoffered=1),
        sessions=2,
    )
    buyers.start()
    buyers.join(60)
    assert len(lines) == 2, lines
    for line in lines:
        assert f"in {UNOFFERED_CURRENCY}" in line, line
        assert "refused at the open: merchant agent 'merchant-" in line, line
        assert line.endswith(f"; not {UNOFFERED_CURRENCY}"), line
    # Refused before anything was logged: no session exists.
    assert not arbiter.sessions_of(None).exists()
