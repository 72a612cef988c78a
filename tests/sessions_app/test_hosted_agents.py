"""Hosted merchant agents answer buyers through the arbiter's services, once per move."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.test import Client

from arbiter_app import selectors as arbiter
from arbiter_app import services as arbiter_services
from arbiter_app.models import Entry
from oanp.agents.pricelist import PriceLimits, PriceList
from oanp.wire.canonical import canonical_bytes
from oanp.wire.envelope import parse_envelope
from sessions_app import hosted_agents, services, tasks
from sessions_app.models import AgentProfile, HostedSession
from sessions_app.vault import unseal_session_vault
from tests.conftest import Worker
from tests.support.factories.accounts import HostedNegotiation, admin, hosted_agent, merchant
from tests.support.factories.agents import SFO_JFK_TRACE

pytestmark = pytest.mark.django_db


def types(log: list[dict[str, Any]]) -> list[str]:
    return [e["envelope"]["type"] for e in log]


def test_a_hosted_agent_settles_the_sfo_jfk_example(client: Client) -> None:
    hosted_agent(merchant("sfo"))
    negotiation = HostedNegotiation(client, "hosted-sfo")
    log = negotiation.play(nudge=lambda: hosted_agents.answer("sess-hosted"))
    assert types(log) == SFO_JFK_TRACE
    prices = [e["envelope"]["payload"].get("price") for e in log]
    assert prices[3] == 370
    assert prices[6] == 340
    assert log[-1]["envelope"]["payload"]["final_price"] == 340
    merchant_moves = [e for e in log if e["envelope"]["sender"]["role"] == "merchant"]
    assert [e["envelope"]["message_id"] for e in merchant_moves] == [
        "hosted.1.1",
        "hosted.3.1",
        "hosted.6.1",
    ]


def test_the_session_keeps_the_limits_and_salt_it_opened_with(client: Client) -> None:
    profile = hosted_agent(merchant("sfo"))
    negotiation = HostedNegotiation(client, "hosted-sfo")
    negotiation.open()
    hosted_agents.answer("sess-hosted")
    hosted = HostedSession.objects.get(session_id="sess-hosted")
    assert unseal_session_vault(hosted.sealed_limits).floor_price == Decimal(280)
    # The merchant edits its agent mid-session: the running session's commitment must hold.
    services.update_agent(
        actor=admin(),
        profile=profile,
        display_name="",
        mode="hosted",
        strategy="boulware",
        limits=PriceList((PriceLimits(None, "USD", Decimal(300), Decimal(500)),)),
    )
    log = negotiation.play(nudge=lambda: hosted_agents.answer("sess-hosted"))
    assert log[-1]["envelope"]["type"] == "session.agree"
    verdicts = [
        e["envelope"]["payload"]["status"] for e in log if e["envelope"]["type"] == "round.verdict"
    ]
    assert "violated" not in verdicts


def test_running_the_answer_twice_makes_one_move(client: Client) -> None:
    hosted_agent(merchant("sfo"))
    negotiation = HostedNegotiation(client, "hosted-sfo")
    negotiation.open()
    assert tasks.answer_session.apply(args=["sess-hosted"]).get() == 1
    assert tasks.answer_session.apply(args=["sess-hosted"]).get() == 0
    assert types(negotiation.log()) == ["session.open", "session.ack"]


def test_two_racing_runs_submit_the_same_envelope_and_the_second_is_a_replay(
    client: Client,
) -> None:
    profile = hosted_agent(merchant("sfo"))
    negotiation = HostedNegotiation(client, "hosted-sfo")
    negotiation.open()
    session = arbiter.session_named("sess-hosted")
    assert session is not None
    hosted = services.open_hosted_session(
        profile=profile, session_id="sess-hosted", item={"route": "SFO-JFK"}, currency="USD"
    )
    # Both runs read the log before either submits.
    first, second = (
        hosted_agents.pending_answers(hosted, arbiter.session_entries(session)) for _ in "ab"
    )
    assert first == second
    assert len(first) == 1
    credential = services.hosted_credential("hosted-sfo")
    statuses = [
        arbiter_services.receive_envelope(
            agent=credential, envelope=parse_envelope(canonical_bytes(answers[0]))
        ).status
        for answers in (first, second)
    ]
    assert statuses == [201, 200]
    assert Entry.objects.filter(session=session, sender_role="merchant").count() == 1


def test_an_external_agent_gets_no_hosted_answers(client: Client) -> None:
    AgentProfile.objects.create(merchant=merchant("ext"), agent_id="external-sfo", mode="external")
    services.hosted_credential("external-sfo")
    negotiation = HostedNegotiation(client, "external-sfo")
    negotiation.open()
    assert hosted_agents.answer("sess-hosted") == 0
    assert types(negotiation.log()) == ["session.open"]
    assert not HostedSession.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_with_a_real_worker_the_hosted_agent_answers_within_a_fraction_of_a_second(
    celery_worker_process: Worker,
) -> None:
    hosted_agent(merchant("sfo"))
    negotiation = HostedNegotiation(Client(), "hosted-sfo", session_id="sess-worker")
    log = negotiation.play(timeout=10)
    assert types(log) == SFO_JFK_TRACE
    assert log[-1]["envelope"]["payload"]["final_price"] == 340
    assert len(negotiation.waits) == 3
    # The first answer also waits for the worker's connections to warm up.
    assert max(negotiation.waits[1:]) < 1.0, negotiation.waits
