"""A buyer platform's members add its agents and issue and revoke their API keys from the
browser, each key shown once and owned by the platform, which is what the arbiter's
``self_dealing`` check compares; they read their own agents' sessions and no one else's."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from arbiter_app.models import AgentCredential
from sessions_app.models import (
    AuditEvent,
    MemberRole,
    Merchant,
    OrganisationKind,
    PlatformAgent,
)
from tests.sessions_app.pages import error_summary_in, messages_in
from tests.support.api import refused
from tests.support.factories.accounts import member, merchant, signed_in
from tests.support.factories.agents import (
    SFO_JFK_ITEM,
    Agent,
    ClientNegotiation,
    make_agent,
    now,
)

pytestmark = pytest.mark.django_db

ISSUED = re.compile(r'id="issued-key" class="secret" value="([^"]+)"')


def platform(slug: str) -> Merchant:
    return Merchant.objects.create(
        name=f"Platform {slug}", slug=slug, kind=OrganisationKind.BUYER_PLATFORM
    )


@pytest.fixture
def bea() -> Client:
    return signed_in(member("bea", MemberRole.BUYER_MEMBER, platform("p")))


def add_agent(browser: Client, agent_id: str) -> None:
    answer = browser.post("/buyer-agents/", {"agent_id": agent_id}, follow=True)
    assert answer.redirect_chain == [(f"/buyer-agents/{agent_id}/", 302)], answer.content


def issue(browser: Client, agent_id: str, **form: str) -> Agent:
    """The key issued, read off the one page that shows it."""
    answer = browser.post(f"/buyer-agents/{agent_id}/keys/", form, follow=True)
    page = answer.content.decode()
    found = ISSUED.search(page)
    assert found, page
    assert answer["Cache-Control"] == "no-store"
    assert found.group(1) not in browser.get(f"/buyer-agents/{agent_id}/").content.decode()
    return Agent(agent_id, "buyer", found.group(1))


def test_a_platform_member_issues_a_key_its_agent_buys_with(client: Client, bea: Client) -> None:
    add_agent(bea, "buyer-p1")
    key = issue(bea, "buyer-p1", label="prod", expires="90d")
    credential = AgentCredential.objects.get(agent_id="buyer-p1")
    assert (credential.role, credential.owner, credential.label) == ("buyer", "p", "prod")
    assert credential.expires_at is not None
    page = bea.get("/buyer-agents/buyer-p1/").content.decode()
    assert credential.prefix in page
    assert "never" in page  # not used yet

    merchant("m")
    run = ClientNegotiation(client, key, make_agent("merchant-m", "merchant", owner="m"), "s-p1")
    run.open()
    credential.refresh_from_db()
    assert credential.last_used_at is not None
    sessions = bea.get("/sessions/").content.decode()
    assert "s-p1" in sessions
    session = bea.get("/sessions/s-p1/")
    assert session.status_code == 200
    assert "Terminate" not in session.content.decode()
    assert [e.action for e in AuditEvent.objects.order_by("at")] == [
        "buyer_agent.created",
        "key.issued",
    ]


def test_a_revoked_key_stops_buying(client: Client, bea: Client) -> None:
    add_agent(bea, "buyer-p1")
    key = issue(bea, "buyer-p1")
    credential = AgentCredential.objects.get(agent_id="buyer-p1")
    revoke = f"/buyer-agents/buyer-p1/keys/{credential.pk}/revoke/"
    assert "Are you sure?" in bea.get(revoke).content.decode()
    answer = bea.post(revoke, {"confirmed": "yes"}, follow=True)
    assert messages_in(answer.content.decode()) == [f"Key {credential.prefix} revoked."]
    credential.refresh_from_db()
    assert credential.revoked_at is not None
    assert client.get("/oanp/v0.1/inbox", headers=key.headers).status_code == 401


def test_the_platform_owns_its_keys_for_the_self_dealing_check(client: Client, bea: Client) -> None:
    add_agent(bea, "buyer-p1")
    key = issue(bea, "buyer-p1")
    # A merchant agent whose key the same owner holds: the session would have one party.
    run = ClientNegotiation(client, key, make_agent("merchant-same", "merchant", owner="p"))
    envelope = run.buyer.open(
        session_id="s-self",
        merchant_agent_id="merchant-same",
        item=SFO_JFK_ITEM,
        currency="USD",
        max_rounds=5,
        now=now(),
    )
    answer = refused(client, key, envelope, 422, "self_dealing")
    assert "were issued to one owner" in answer["detail"]


def test_an_agent_id_in_use_is_not_added(bea: Client) -> None:
    make_agent("taken", "merchant")
    answer = bea.post("/buyer-agents/", {"agent_id": "taken"})
    assert answer.status_code == 400
    assert "The agent id 'taken' is taken." in error_summary_in(answer.content.decode())
    assert bea.post("/buyer-agents/", {"agent_id": "no spaces"}).status_code == 400
    assert not PlatformAgent.objects.exists()


def test_no_one_reaches_another_platforms_agents_keys_or_sessions(client: Client) -> None:
    mine, theirs = platform("mine"), platform("theirs")
    owner = signed_in(member("theirs", MemberRole.BUYER_MEMBER, theirs))
    add_agent(owner, "buyer-theirs")
    key = issue(owner, "buyer-theirs")
    ClientNegotiation(
        client, key, make_agent("merchant-m", "merchant", owner="m"), "s-theirs"
    ).open()
    credential = AgentCredential.objects.get(agent_id="buyer-theirs")
    probes: list[tuple[User, Merchant | None]] = [
        (member("neighbour", MemberRole.BUYER_MEMBER, mine), mine),
        (member("seller", MemberRole.MERCHANT_MANAGER, merchant("m")), None),
        (member("reader", MemberRole.MERCHANT_MEMBER, merchant("m")), None),
    ]
    for user, _ in probes:
        probe = signed_in(user)
        assert "buyer-theirs" not in probe.get("/buyer-agents/").content.decode()
        assert probe.get("/buyer-agents/buyer-theirs/").status_code == 404
        assert "s-theirs" not in probe.get("/sessions/").content.decode()
        assert probe.get("/sessions/s-theirs/").status_code == 404
        for path, data in (
            ("/buyer-agents/buyer-theirs/keys/", {"label": "x"}),
            (f"/buyer-agents/buyer-theirs/keys/{credential.pk}/revoke/", {"confirmed": "yes"}),
        ):
            assert probe.post(path, data).status_code in (403, 404), (user, path)
    # Merchants' people add no buyer agents; operators look but change nothing.
    assert signed_in(probes[1][0]).post("/buyer-agents/", {"agent_id": "x-1"}).status_code == 403
    operator = signed_in(member("op", MemberRole.OPERATOR))
    assert operator.get("/buyer-agents/buyer-theirs/").status_code == 200
    assert operator.post("/buyer-agents/buyer-theirs/keys/", {}).status_code == 403
    assert operator.post("/buyer-agents/", {"agent_id": "x-2"}).status_code == 403
    credential.refresh_from_db()
    assert credential.revoked_at is None
    assert AgentCredential.objects.filter(agent_id="buyer-theirs").count() == 1
    assert not PlatformAgent.objects.filter(agent_id__startswith="x-").exists()


def test_a_platform_member_sees_no_deliveries_nor_merchants_agents(bea: Client) -> None:
    assert bea.get("/agents/new/").status_code == 403
    assert bea.get("/exports/").status_code == 403
    page = bea.get("/").content.decode()
    assert 'href="/buyer-agents/"' in page
    assert 'href="/deliveries/"' not in page
