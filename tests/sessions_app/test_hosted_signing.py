"""A hosted agent signs its envelopes (§17) with an Ed25519 key of its own: made and registered
on its first answer, sealed like its vault (the arbiter's tables hold only its public half), the
same key for its later sessions, and made again once its owner retired it. The session page marks
every party entry signed or unsigned."""

from __future__ import annotations

import base64
import json
import re
from datetime import timedelta

import pytest
from django.test import Client

from arbiter_app import selectors as arbiter
from arbiter_app import services as arbiter_services
from arbiter_app.models import AgentKey
from oanp.audit import SignatureRules, read_party_keys, verify_log
from sessions_app import hosted_agents
from sessions_app.models import AgentProfile, MemberRole
from tests.support.factories.accounts import (
    HostedNegotiation,
    hosted_agent,
    member,
    merchant,
    signed_in,
)

pytestmark = pytest.mark.django_db

AGENT = "hosted-sfo"


@pytest.fixture
def negotiation(client: Client, monkeypatch: pytest.MonkeyPatch) -> HostedNegotiation:
    hosted_agent(merchant("sfo"))
    monkeypatch.setattr(hosted_agents, "ANSWER_GRACE", timedelta(0))
    return HostedNegotiation(client, AGENT)


def merchant_entries(log: list[dict]) -> list[dict]:
    return [e["envelope"] for e in log if e["envelope"]["sender"]["role"] == "merchant"]


def test_a_hosted_agents_every_envelope_is_signed_by_its_own_registered_key(
    negotiation: HostedNegotiation,
) -> None:
    log = negotiation.play(nudge=lambda: hosted_agents.sweep_answers(), timeout=5)
    answers = merchant_entries(log)
    assert answers
    assert all("signature" in envelope for envelope in answers)
    (registered,) = AgentKey.objects.filter(agent_id=AGENT)
    assert registered.retired_at is None
    # Only the public half is the arbiter's; the private one is sealed on the agent.
    assert "d" not in registered.jwk
    sealed = bytes(AgentProfile.objects.get(agent_id=AGENT).sealed_signing_key)
    assert sealed
    assert b'"d"' not in sealed
    keys = read_party_keys(arbiter.party_keys_json([AGENT]))
    report = verify_log(log, arbiter.every_public_jwk(), signatures=SignatureRules(keys))
    assert report.ok, [c.line() for c in report.checks if not c.ok]
    assert report.signed_entries == report.signed_valid == len(answers)


def test_the_same_key_signs_later_sessions_and_a_retired_one_is_replaced(
    negotiation: HostedNegotiation, client: Client
) -> None:
    negotiation.open()
    hosted_agents.sweep_answers()
    (first,) = AgentKey.objects.filter(agent_id=AGENT)
    arbiter_services.retire_agent_key(agent_id=AGENT, kid=first.kid)

    later = HostedNegotiation(client, AGENT, session_id="sess-later")
    later.open()
    hosted_agents.sweep_answers()
    keys = list(AgentKey.objects.filter(agent_id=AGENT).order_by("registered_at"))
    assert len(keys) == 2
    assert keys[0].retired_at is not None
    assert keys[1].retired_at is None
    (ack,) = merchant_entries(later.log())
    header = json.loads(base64.urlsafe_b64decode(ack["signature"].split(".")[0] + "=="))
    assert header["kid"] == keys[1].kid


def test_the_session_page_marks_each_party_entry_signed_or_unsigned(
    negotiation: HostedNegotiation,
) -> None:
    negotiation.play(nudge=lambda: hosted_agents.sweep_answers(), timeout=5)
    viewer = member("watcher", MemberRole.MERCHANT_MEMBER, of=merchant("sfo"))
    page = signed_in(viewer).get("/sessions/sess-hosted/")
    assert page.status_code == 200
    html = page.content.decode()
    marks = re.findall(r'id="entry-(\d+)".*?(?:data-signature="([a-z-]+)"|</li>)', html, re.S)
    log = negotiation.log()
    expected = {
        str(e["seq"]): {"buyer": "unsigned", "merchant": "signed", "arbiter": ""}[
            e["envelope"]["sender"]["role"]
        ]
        for e in log
    }
    assert dict(marks) == expected
    assert "its sender did not sign it" in html
