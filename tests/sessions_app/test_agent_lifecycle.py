"""An agent's life from its page: paused, resumed and archived, its hosted runner's key
rotated and revoked, each behind a confirmation and audited; agents issued with
``manage.py create_agent`` shown under their organisation, or claimed by an admin. Another
merchant's manager finds no such agent (404); a merchant member or an operator is refused
(403); nothing changes either way."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client

from arbiter_app.models import AgentCredential, MerchantAvailability
from sessions_app import selectors, services
from sessions_app.lifecycle_selectors import availability_of
from sessions_app.models import (
    HOSTED_KEY_LABEL,
    AgentProfile,
    AuditEvent,
    MemberRole,
    Merchant,
    Mode,
    OrganisationKind,
    PlatformAgent,
)
from tests.sessions_app.pages import error_summary_in, messages_in
from tests.support.factories.accounts import admin, member, merchant, signed_in

pytestmark = pytest.mark.django_db

PROBE = "/oanp/v0.1/sessions/none"


def runner_keys(agent_id: str) -> list[AgentCredential]:
    return list(AgentCredential.objects.filter(agent_id=agent_id, label=HOSTED_KEY_LABEL))


def create_agent(*args: str) -> dict[str, Any]:
    out = io.StringIO()
    call_command("create_agent", *args, stdout=out)
    printed: dict[str, Any] = json.loads(out.getvalue())
    return printed


@pytest.mark.parametrize(
    ("action", "state", "audited"),
    [("pause", "paused", "agent.paused"), ("archive", "archived", "agent.archived")],
)
def test_a_manager_stops_an_agent_after_confirming_and_resumes_it(
    browser: Client, agent_a: AgentProfile, action: str, state: str, audited: str
) -> None:
    asked = browser.get(f"/agents/hosted-a/{action}/")
    assert asked.status_code == 200
    assert "Are you sure?" in asked.content.decode()
    # A POST without the confirmation's answer only asks too.
    assert browser.post(f"/agents/hosted-a/{action}/").status_code == 200
    assert availability_of(agent_a) == "active"

    done = browser.post(f"/agents/hosted-a/{action}/", {"confirmed": "yes"}, follow=True)
    page = done.content.decode()
    assert messages_in(page) == [f"Agent hosted-a is {state}."]
    assert f'id="availability">{state}</span>' in page
    assert availability_of(agent_a) == state
    event = AuditEvent.objects.get(action=audited)
    assert (event.target, event.detail) == ("hosted-a", {"before": "active"})

    # Done twice, the second finds nothing to do and changes nothing.
    again = browser.post(f"/agents/hosted-a/{action}/", {"confirmed": "yes"})
    assert again.status_code == 409
    assert f"Agent hosted-a is {state}: nothing to" in error_summary_in(again.content.decode())
    assert AuditEvent.objects.filter(action=audited).count() == 1

    browser.post("/agents/hosted-a/resume/", {"confirmed": "yes"})
    assert availability_of(agent_a) == "active"
    assert AuditEvent.objects.get(action="agent.resumed").detail == {"before": state}


def test_an_archived_agent_leaves_the_list_but_its_page_stays(
    browser: Client, agent_a: AgentProfile, shop_a: Merchant
) -> None:
    services.create_agent(
        actor=admin(),
        merchant=shop_a,
        agent_id="external-a",
        display_name="",
        mode=Mode.EXTERNAL,
        strategy="reference",
        limits=None,
    )
    browser.post("/agents/hosted-a/pause/", {"confirmed": "yes"})
    listed = browser.get("/agents/").content.decode()
    assert 'href="/agents/hosted-a/"' in listed
    assert '<span class="badge warn">paused</span>' in listed
    browser.post("/agents/hosted-a/archive/", {"confirmed": "yes"})
    listed = browser.get("/agents/").content.decode()
    assert 'href="/agents/hosted-a/"' not in listed
    assert 'href="/agents/external-a/"' in listed
    archived = browser.get("/agents/?archived=1").content.decode()
    assert 'href="/agents/hosted-a/"' in archived
    assert 'href="/agents/external-a/"' not in archived
    page = browser.get("/agents/hosted-a/").content.decode()
    assert 'id="availability">archived</span>' in page
    assert "/sessions/?agent=hosted-a" in page


def test_rotating_the_runners_key_refuses_the_old_one_at_once(
    browser: Client, agent_a: AgentProfile
) -> None:
    (old,) = runner_keys("hosted-a")
    assert browser.get("/agents/hosted-a/runner-key/rotate/").status_code == 200
    done = browser.post("/agents/hosted-a/runner-key/rotate/", {"confirmed": "yes"}, follow=True)
    old.refresh_from_db()
    assert old.revoked_at is not None
    new = services.hosted_credential("hosted-a")
    assert new is not None
    assert new.pk != old.pk
    assert new.owner == "a"
    assert messages_in(done.content.decode()) == [f"The hosted runner's key is now {new.prefix}."]
    event = AuditEvent.objects.get(action="runner_key.rotated")
    assert event.detail == {"revoked": [old.prefix], "prefix": new.prefix}
    assert availability_of(agent_a) == "active"


def test_revoking_the_runners_key_pauses_the_agent_and_no_key_comes_back_until_resumed(
    browser: Client, agent_a: AgentProfile
) -> None:
    done = browser.post("/agents/hosted-a/runner-key/revoke/", {"confirmed": "yes"}, follow=True)
    page = done.content.decode()
    assert messages_in(page) == ["The hosted runner's key is revoked; the agent is paused."]
    assert "The hosted runner holds no live key" in page
    assert availability_of(agent_a) == "paused"
    assert all(key.revoked_at is not None for key in runner_keys("hosted-a"))
    # The runner does not issue itself another: the revocation holds. The agent no longer
    # counts as run by the arbiter, so a timer that runs out on it is its merchant's.
    assert services.hosted_credential("hosted-a") is None
    assert selectors.hosted_among({"hosted-a"}) == set()
    again = browser.post("/agents/hosted-a/runner-key/revoke/", {"confirmed": "yes"})
    assert again.status_code == 409
    browser.post("/agents/hosted-a/resume/", {"confirmed": "yes"})
    live = services.hosted_credential("hosted-a")
    assert live is not None
    assert selectors.hosted_among({"hosted-a"}) == {"hosted-a"}
    assert AuditEvent.objects.get(action="agent.resumed").detail == {
        "before": "paused",
        "runner_key": live.prefix,
    }


def test_an_external_agent_has_no_runner_key_to_rotate(browser: Client, shop_a: Merchant) -> None:
    services.create_agent(
        actor=admin(),
        merchant=shop_a,
        agent_id="external-a",
        display_name="",
        mode=Mode.EXTERNAL,
        strategy="reference",
        limits=None,
    )
    assert (
        browser.post("/agents/external-a/runner-key/rotate/", {"confirmed": "yes"}).status_code
        == 404
    )
    assert not AgentCredential.objects.filter(agent_id="external-a").exists()


ACTS = [
    "/agents/hosted-a/pause/",
    "/agents/hosted-a/archive/",
    "/agents/hosted-a/resume/",
    "/agents/hosted-a/runner-key/rotate/",
    "/agents/hosted-a/runner-key/revoke/",
]


@pytest.mark.parametrize("url", ACTS)
@pytest.mark.parametrize(
    ("who", "status"),
    [
        ("other-manager", 404),
        ("member", 403),
        ("operator", 403),
        ("buyer", 403),
    ],
)
def test_no_one_but_the_agents_managers_and_admins_changes_its_life(
    agent_a: AgentProfile, shop_a: Merchant, url: str, who: str, status: int
) -> None:
    if "resume" in url:
        MerchantAvailability.objects.create(merchant_agent_id="hosted-a", state="paused")
    people = {
        "other-manager": (MemberRole.MERCHANT_MANAGER, merchant("b")),
        "member": (MemberRole.MERCHANT_MEMBER, shop_a),
        "operator": (MemberRole.OPERATOR, None),
        "buyer": (MemberRole.BUYER_MEMBER, _platform()),
    }
    role, of = people[who]
    person = signed_in(member(who, role, of))
    before = list(AgentCredential.objects.values_list("pk", "revoked_at"))
    states = list(MerchantAvailability.objects.values_list("state", flat=True))
    assert person.get(url).status_code == status
    assert person.post(url, {"confirmed": "yes"}).status_code == status
    assert list(AgentCredential.objects.values_list("pk", "revoked_at")) == before
    assert list(MerchantAvailability.objects.values_list("state", flat=True)) == states
    assert not AuditEvent.objects.exclude(action="agent.created").exists()


def test_an_admin_manages_any_merchants_agent(agent_a: AgentProfile) -> None:
    boss = signed_in(member("boss", MemberRole.ADMIN))
    boss.post("/agents/hosted-a/pause/", {"confirmed": "yes"})
    assert availability_of(agent_a) == "paused"


def _platform() -> Merchant:
    return Merchant.objects.get_or_create(
        slug="sky", defaults={"name": "SkyFare", "kind": OrganisationKind.BUYER_PLATFORM}
    )[0]


# Agents issued with manage.py create_agent ----------------------------------------------


def test_create_agent_with_an_organisations_slug_shows_the_agent_there(
    browser: Client, shop_a: Merchant
) -> None:
    printed = create_agent("--role", "merchant", "--agent-id", "cli-sfo", "--owner", "a")
    assert printed["organisation"] == shop_a.name
    profile = AgentProfile.objects.get(agent_id="cli-sfo")
    assert (profile.merchant, profile.mode) == (shop_a, Mode.EXTERNAL)
    assert 'href="/agents/cli-sfo/"' in browser.get("/agents/").content.decode()
    # A second key for it joins the same agent.
    create_agent("--role", "merchant", "--agent-id", "cli-sfo", "--owner", "a")
    assert AgentProfile.objects.filter(agent_id="cli-sfo").count() == 1
    buyer = create_agent("--role", "buyer", "--agent-id", "cli-buyer", "--owner", _platform().slug)
    assert buyer["organisation"] == "SkyFare"
    assert PlatformAgent.objects.get(agent_id="cli-buyer").organisation == _platform()


def test_create_agent_refuses_an_id_another_organisation_holds(shop_a: Merchant) -> None:
    merchant("b")
    create_agent("--role", "merchant", "--agent-id", "cli-sfo", "--owner", "a")
    with pytest.raises(CommandError, match="another organisation's agent"):
        create_agent("--role", "merchant", "--agent-id", "cli-sfo", "--owner", "b")
    assert AgentCredential.objects.filter(agent_id="cli-sfo").count() == 1


def test_an_admin_claims_an_unclaimed_agent_into_an_organisation(shop_a: Merchant) -> None:
    create_agent("--role", "merchant", "--agent-id", "cli-sfo")
    create_agent("--role", "merchant", "--agent-id", "cli-sfo", "--owner", "someone")
    boss = signed_in(member("boss", MemberRole.ADMIN))
    listed = boss.get("/agents/").content.decode()
    unclaimed = listed.split('id="unclaimed"', 1)[1]
    assert "<td>cli-sfo</td>" in unclaimed
    assert "<td>someone</td>" in unclaimed
    asked = boss.get("/agents/cli-sfo/claim/").content.decode()
    assert f'<option value="{shop_a.pk}">' in asked
    assert f'<option value="{_platform().pk}">' not in asked  # a buyer platform's agents buy

    assert boss.post("/agents/cli-sfo/claim/", {"organisation": "x"}).status_code == 400
    refused = boss.post("/agents/cli-sfo/claim/", {"organisation": str(_platform().pk)})
    assert refused.status_code == 400
    assert boss.post("/agents/cli-sfo/claim/", {"organisation": "9" * 30}).status_code == 400
    assert not AgentProfile.objects.filter(agent_id="cli-sfo").exists()

    done = boss.post("/agents/cli-sfo/claim/", {"organisation": str(shop_a.pk)}, follow=True)
    assert messages_in(done.content.decode()) == [f"Agent cli-sfo is now {shop_a.name}'s."]
    profile = AgentProfile.objects.get(agent_id="cli-sfo")
    assert (profile.merchant, profile.mode) == (shop_a, Mode.EXTERNAL)
    owners = set(AgentCredential.objects.filter(agent_id="cli-sfo").values_list("owner", flat=True))
    assert owners == {"a"}
    event = AuditEvent.objects.get(action="agent.claimed")
    assert event.detail == {"organisation": "a", "role": "merchant", "keys": 2}
    assert 'id="unclaimed"' not in boss.get("/agents/").content.decode()
    # Claimed once, it is claimed for good.
    assert boss.get("/agents/cli-sfo/claim/").status_code == 404
    # Its managers now see it.
    manager = signed_in(member("mo", MemberRole.MERCHANT_MANAGER, shop_a))
    assert manager.get("/agents/cli-sfo/").status_code == 200


@pytest.mark.parametrize("role", [MemberRole.MERCHANT_MANAGER, MemberRole.OPERATOR])
def test_only_admins_see_and_claim_unclaimed_agents(
    shop_a: Merchant, alice: User, role: str
) -> None:
    create_agent("--role", "merchant", "--agent-id", "cli-sfo")
    person = (
        signed_in(alice) if role == MemberRole.MERCHANT_MANAGER else signed_in(member("olga", role))
    )
    assert "cli-sfo" not in person.get("/agents/").content.decode()
    assert person.get("/agents/cli-sfo/claim/").status_code == 403
    assert (
        person.post("/agents/cli-sfo/claim/", {"organisation": str(shop_a.pk)}).status_code == 403
    )
    assert not AgentProfile.objects.filter(agent_id="cli-sfo").exists()
    assert set(AgentCredential.objects.values_list("owner", flat=True)) == {""}
