"""``seed_demo``: the demo's merchants, accounts and hosted agents, seeded once."""

from __future__ import annotations

import re
from decimal import Decimal
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from arbiter_app import services as arbiter_services
from arbiter_app.models import AgentCredential
from sessions_app.demo.seed import (
    DEMO_BUYERS,
    HOSTED_AGENTS,
    SKYFARE_TERMS,
    UNCHANGED,
    issue_buyer_keys,
)
from sessions_app.models import AgentProfile, AuditEvent, Membership, Merchant, Mode
from sessions_app.vault import unseal

pytestmark = pytest.mark.django_db

ROW = re.compile(r"^\s+(admin|operator|skyfare|railco)\s+(\w+)\s+(\S+)\s+(.+)$", re.M)


def seed_demo(*args: str) -> dict[str, tuple[str, str, str]]:
    """Run the command; its accounts table as {user: (role, merchant, password)}."""
    out = StringIO()
    call_command("seed_demo", *args, stdout=out)
    return {
        user: (role, merchant, password)
        for user, role, merchant, password in ROW.findall(out.getvalue())
    }


def counts() -> dict[str, int]:
    return {
        model.__name__: model.objects.count()
        for model in (User, Membership, Merchant, AgentProfile, AgentCredential, AuditEvent)
    }


def test_a_second_run_changes_nothing_and_prints_the_same_accounts() -> None:
    first = seed_demo()
    after_first = counts()
    hashes = dict(User.objects.values_list("username", "password"))

    second = seed_demo()

    assert counts() == after_first
    assert dict(User.objects.values_list("username", "password")) == hashes
    assert {user: row[:2] for user, row in first.items()} == {
        "admin": ("admin", "(all)"),
        "operator": ("operator", "(all)"),
        "skyfare": ("merchant_manager", "SkyFare"),
        "railco": ("merchant_manager", "RailCo"),
    }
    assert {user: row[:2] for user, row in second.items()} == {
        user: row[:2] for user, row in first.items()
    }
    # A password is printed once, when it is set; it is stored only hashed.
    assert all(len(row[2]) >= 16 and row[2] not in hashes[user] for user, row in first.items())
    assert all(row[2] == UNCHANGED for row in second.values())
    assert Merchant.objects.get(slug="skyfare").name == "SkyFare"
    assert set(AgentProfile.objects.values_list("agent_id", "mode", "strategy")) == {
        ("merchant-sfo", Mode.HOSTED, "reference"),
        ("merchant-rail", Mode.HOSTED, "boulware"),
    }


def test_reset_passwords_sets_new_ones_that_sign_in() -> None:
    first = seed_demo()
    reset = seed_demo("--reset-passwords")

    assert reset["operator"][2] != first["operator"][2]
    browser = Client(HTTP_HOST="localhost")
    assert not browser.login(username="operator", password=first["operator"][2])
    assert browser.login(username="operator", password=reset["operator"][2])


def test_a_merchant_member_sees_only_its_merchants_agents() -> None:
    accounts = seed_demo()
    browser = Client(HTTP_HOST="localhost")
    assert browser.login(username="skyfare", password=accounts["skyfare"][2])

    page = browser.get("/agents/").content.decode()

    assert "merchant-sfo" in page
    assert "merchant-rail" not in page
    assert browser.get("/agents/merchant-sfo/").status_code == 200
    assert browser.get("/agents/merchant-rail/").status_code == 404


def test_the_hosted_agents_limits_are_sealed() -> None:
    seed_demo()
    profile = AgentProfile.objects.get(agent_id="merchant-sfo")

    limits = unseal(profile.vault)

    # SkyFare prices in USD only: a default, and two routes of their own.
    assert limits.currencies == ("USD",)
    sfo_jfk, sfo_lax = (limits.limits_for("USD", {"route": r}) for r in ("SFO-JFK", "SFO-LAX"))
    assert (sfo_jfk.floor_price, sfo_jfk.ideal_price) == (Decimal(280), Decimal(400))
    assert (sfo_lax.floor_price, sfo_lax.ideal_price) == (Decimal(120), Decimal(190))
    # RailCo in euros and dollars, each on its own limits.
    rail = unseal(AgentProfile.objects.get(agent_id="merchant-rail").vault)
    assert rail.currencies == ("EUR", "USD")
    # SkyFare weighs the demo's flight terms and shows its limits after the end; RailCo not.
    assert limits.terms == SKYFARE_TERMS
    assert profile.reveal_after_end
    assert not AgentProfile.objects.get(agent_id="merchant-rail").reveal_after_end
    assert b"280" not in bytes(profile.vault)
    assert "280" not in str(list(AuditEvent.objects.values_list("detail", flat=True)))
    # The hosted runner's key exists, so the arbiter opens sessions to the agent.
    assert AgentCredential.objects.filter(agent_id="merchant-sfo", role="merchant").count() == 1


def test_each_demo_run_gets_fresh_buyer_keys_and_revokes_the_last_ones() -> None:
    seed_demo()
    first = issue_buyer_keys()
    second = issue_buyer_keys()

    assert first.keys() == second.keys()
    live = AgentCredential.objects.filter(agent_id="buyer-ana", revoked_at__isnull=True)
    assert live.count() == 1
    assert live.get().prefix in second["buyer-ana"]


def test_the_demo_merchants_own_their_agents_keys_and_the_demo_buyers_belong_to_none() -> None:
    # The demo's buyers negotiate with both merchants: a shared owner would refuse them.
    seed_demo()
    issue_buyer_keys()
    owners = set(AgentCredential.objects.values_list("agent_id", "owner"))
    assert owners == {(a.agent_id, a.merchant_slug) for a in HOSTED_AGENTS} | {
        (b.agent_id, "") for b in DEMO_BUYERS
    }


def test_an_agent_id_held_by_foreign_keys_is_refused_not_taken_over() -> None:
    arbiter_services.issue_credential(agent_id="merchant-sfo", role="merchant")

    with pytest.raises(CommandError, match="merchant-sfo"):
        seed_demo()

    assert not AgentProfile.objects.exists()
