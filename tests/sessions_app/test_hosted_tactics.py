"""Hosted merchant agents play the tactics stored with them: the strategy's parameters and the
settle policy, copied into each session at open; over a live arbiter too, against
``oanp negotiate --settle``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from oanp.agents.strategies import ParameterError, UnknownStrategy
from oanp.audit import verify_log
from oanp.net import commands
from oanp.net.client import ArbiterClient
from oanp.wire.settlement import SettlePolicy
from sessions_app import hosted_agents, services
from sessions_app.models import AgentProfile, AuditEvent, HostedSession
from tests.arbiter_app.test_remote_agents import LIMIT_FLAGS, negotiate
from tests.conftest import LiveServer, Worker
from tests.support.factories.accounts import HostedNegotiation, admin, hosted_agent, merchant
from tests.support.factories.agents import make_agent, registered_signatures

pytestmark = pytest.mark.django_db


def _moves(log: list[dict[str, Any]]) -> list[tuple[str, str, object]]:
    return [
        (
            e["envelope"]["sender"]["role"],
            e["envelope"]["type"],
            e["envelope"]["payload"].get("price"),
        )
        for e in log
        if e["envelope"]["sender"]["role"] != "arbiter"
    ]


def test_a_hosted_agent_plays_its_parameters(client: Client) -> None:
    # Stock to clear: half of what the reference tactic holds back, 370 + (280 - 370) / 2.
    hosted_agent(merchant("sfo"), parameters={"inventory_pressure": "0.5"})
    log = HostedNegotiation(client, "hosted-sfo").play(
        nudge=lambda: hosted_agents.answer("sess-hosted")
    )
    assert _moves(log)[2:] == [
        ("buyer", "offer.propose", 320),
        ("merchant", "offer.counter", 325),
        ("buyer", "offer.accept", 325),
    ]
    assert log[-1]["envelope"]["payload"]["final_price"] == 325


def test_a_hosted_agent_reveals_its_floor_by_its_settle_policy(client: Client) -> None:
    hosted_agent(merchant("sfo"), settle=SettlePolicy("round", 2))
    # The buyer opens for settlement and would reveal from round 4: the merchant goes first.
    negotiation = HostedNegotiation(client, "hosted-sfo", settle=SettlePolicy("round", 4))
    log = negotiation.play(nudge=lambda: hosted_agents.answer("sess-hosted"))
    assert _moves(log)[2:] == [
        ("buyer", "offer.propose", 320),
        ("merchant", "offer.counter", 370),
        # Round 2: AC_next would take the buyer's 340; the policy reveals first instead.
        ("buyer", "offer.propose", 340),
        ("merchant", "settle.reveal", None),
        ("buyer", "settle.reveal", None),
    ]
    agreement = log[-1]["envelope"]["payload"]["agreement"]
    assert agreement["settlement"] == {"rule": "midpoint/v0.1", "ceiling": 420, "floor": 280}
    assert agreement["final_price"] == 350


def test_a_session_keeps_the_tactics_it_opened_with(client: Client) -> None:
    profile = hosted_agent(merchant("sfo"), strategy="linear", parameters={"exponent": "2"})
    negotiation = HostedNegotiation(client, "hosted-sfo")
    negotiation.open()
    hosted_agents.answer("sess-hosted")
    # Mid-session the merchant switches to stock clearing and settling from round 1.
    services.update_agent(
        actor=admin(),
        profile=profile,
        display_name="",
        mode="hosted",
        strategy="reference",
        limits=None,
        parameters={"inventory_pressure": "1"},
        settle=SettlePolicy("round", 1),
    )
    hosted = HostedSession.objects.get(session_id="sess-hosted")
    assert (hosted.strategy, hosted.parameters["exponent"], hosted.settle_when) == (
        "linear",
        "2",
        "never",
    )
    log = negotiation.play(nudge=lambda: hosted_agents.answer("sess-hosted"))
    # Linear with e = 2 counters 400, then would name 340, which the buyer's 340 meets; the
    # edited agent would have revealed its floor in round 1.
    assert _moves(log)[2:] == [
        ("buyer", "offer.propose", 320),
        ("merchant", "offer.counter", 400),
        ("buyer", "offer.propose", 340),
        ("merchant", "offer.accept", 340),
    ]


def test_the_profile_stores_every_parameter_as_text_and_the_audit_says_what_changed() -> None:
    profile = hosted_agent(
        merchant("sfo"),
        strategy="boulware",
        parameters={"exponent": "0.5"},
        settle=SettlePolicy("stuck"),
    )
    assert profile.parameters == {
        "exponent": "0.5",
        "acceptance": "next",
        "last_round": "take",
        "inventory_pressure": "0",
    }
    assert (profile.settle_when, profile.settle_from_round) == ("stuck", 1)
    created = AuditEvent.objects.get(action="agent.created", target="hosted-sfo")
    assert created.detail["parameters"]["exponent"] == "0.5"
    assert created.detail["settle"] == "stuck"

    def update(**changes: Any) -> list[str]:
        fields = {
            "display_name": "",
            "mode": "hosted",
            "strategy": "boulware",
            "limits": None,
            "parameters": {"exponent": "0.5"},
            "settle": SettlePolicy("stuck"),
        }
        services.update_agent(actor=admin(), profile=profile, **(fields | changes))
        event = AuditEvent.objects.filter(action="agent.updated").first()
        assert event is not None
        return list(event.detail["changed"])

    assert update() == []
    assert update(parameters={"exponent": "0.7"}) == ["parameters"]
    assert update(parameters={"exponent": "0.7"}, settle=SettlePolicy("round", 3)) == ["settle"]
    # A new strategy brings its own parameters: the change is the strategy's.
    assert update(strategy="linear", parameters={}, settle=SettlePolicy("round", 3)) == ["strategy"]
    event = AuditEvent.objects.filter(action="agent.updated").first()
    assert event is not None
    assert (event.detail["parameters"]["exponent"], event.detail["settle"]) == ("1", "round 3")


@pytest.mark.parametrize(
    ("strategy", "parameters", "settle", "error"),
    [
        ("boulware", {"exponent": "30"}, SettlePolicy(), ParameterError),
        ("boulware", {"step_share": "0.1"}, SettlePolicy(), ParameterError),
        ("gambler", {}, SettlePolicy(), UnknownStrategy),
        ("linear", {}, SettlePolicy("round", 21), ValueError),
    ],
)
def test_the_services_refuse_tactics_the_registry_refuses(
    strategy: str, parameters: dict[str, str], settle: SettlePolicy, error: type[Exception]
) -> None:
    with pytest.raises(error):
        hosted_agent(merchant("sfo"), strategy=strategy, parameters=parameters, settle=settle)
    assert not AgentProfile.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_negotiate_settles_with_a_hosted_agent_that_reveals_first(
    live_arbiter: LiveServer, celery_worker_process: Worker, tmp_path: Path
) -> None:
    hosted_agent(
        merchant("sfo"),
        "hosted-settle",
        strategy="boulware",
        parameters={"exponent": "0.5"},
        settle=SettlePolicy("round", 1),
    )
    buyer = make_agent("buyer-settle", "buyer")
    run = negotiate(
        live_arbiter.url,
        buyer,
        "hosted-settle",
        tmp_path,
        *LIMIT_FLAGS,
        "--settle",
        "2",
        "--strategy",
        "conceder",
        "--param",
        "exponent=3",
    )
    assert run.code == commands.EXIT_AGREED, run.out + run.err
    assert _moves(run.log)[2:] == [
        ("buyer", "offer.propose", 320),
        # The hosted agent reveals in round 1, by its policy; the buyer, due in round 2, answers.
        ("merchant", "settle.reveal", None),
        ("buyer", "settle.reveal", None),
    ]
    agreement = run.log[-1]["envelope"]["payload"]["agreement"]
    assert agreement["settlement"] == {"rule": "midpoint/v0.1", "ceiling": 420, "floor": 280}
    assert agreement["final_price"] == 350
    jwks = ArbiterClient(live_arbiter.url).jwks()
    assert verify_log(run.log, jwks, signatures=registered_signatures(run.log)).ok
