"""Hosted merchant agents negotiate terms besides the price (profile terms/v0.1): their limits
and weights per issue, entered on the agent form, sealed with the floor and never shown again,
played by the runner; over a live arbiter too, against ``oanp negotiate --issue --want``."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils.html import escape

from oanp.agents.tradeoffs import IssueLimits, TermsVault
from oanp.audit import verify_log
from oanp.net import commands
from oanp.net.client import ArbiterClient
from sessions_app import hosted_agents
from sessions_app.models import AgentProfile, AuditEvent, HostedSession, Merchant
from sessions_app.vault import unseal, unseal_session_vault
from tests.arbiter_app.test_remote_agents import BUYER_TERMS_FLAGS, LIMIT_FLAGS, negotiate
from tests.conftest import LiveServer, Worker
from tests.sessions_app.test_agents import agent_form, errors_of
from tests.support.factories.accounts import HostedNegotiation, hosted_agent, merchant
from tests.support.factories.agents import make_agent, registered_signatures
from tests.support.factories.terms import BUYER_TERMS, ISSUES, MERCHANT_TERMS

pytestmark = pytest.mark.django_db

TERMS_TEXT = "delivery_days=19..4@0.25\r\n\r\n  support = none..standard@2.5\r\n"
TYPED = TermsVault(
    Decimal("1.5"),
    (
        IssueLimits("delivery_days", Decimal("0.25"), "19", "4"),
        IssueLimits("support", Decimal("2.5"), "none", "standard"),
    ),
)


def _offers(log: list[dict[str, Any]], role: str) -> list[dict[str, Any]]:
    return [
        e["envelope"]["payload"]
        for e in log
        if e["envelope"]["sender"]["role"] == role and "terms" in e["envelope"]["payload"]
    ]


def within_merchant_limits(terms: dict[str, Any]) -> bool:
    """At least 3 days to deliver, and support no better for the buyer than standard."""
    return terms["delivery_days"] >= 3 and terms["support"] in ("standard", "none")


# The form ------------------------------------------------------------------------------------


def test_the_form_seals_the_terms_with_the_limits_and_never_shows_them(
    browser: Client, shop_a: Merchant
) -> None:
    response = browser.post(
        "/agents/new/", agent_form(terms=TERMS_TEXT, price_weight="1.5", strategy="reference")
    )
    assert response.status_code == 302, response.content
    profile = AgentProfile.objects.get(agent_id="hosted-a")
    assert unseal(profile.vault).terms == TYPED
    assert b"19..4" not in bytes(profile.vault)
    assert "delivery_days" not in str(AuditEvent.objects.get(action="agent.created").detail)
    for page in (browser.get("/agents/hosted-a/edit/"), browser.get("/agents/hosted-a/")):
        text = page.content.decode()
        assert "delivery_days, support" in text  # names only, as the per-item keys
        for typed in ("19..4", "@0.25", "standard@2.5", 'value="1.5"', ">1.5<"):
            assert typed not in text
    # Saving without new limits keeps them all, the terms included.
    kept = browser.post(
        "/agents/hosted-a/edit/", agent_form(floor_price="", ideal_price="", display_name="B")
    )
    assert kept.status_code == 302
    profile.refresh_from_db()
    assert unseal(profile.vault).terms == TYPED
    # New price limits leave the terms as they are; removing them is asked for explicitly.
    browser.post("/agents/hosted-a/edit/", agent_form(floor_price="290"))
    profile.refresh_from_db()
    assert unseal(profile.vault).terms == TYPED
    assert unseal(profile.vault).limits[0].floor_price == 290
    browser.post(
        "/agents/hosted-a/edit/", agent_form(floor_price="", ideal_price="", clear_terms="on")
    )
    profile.refresh_from_db()
    assert unseal(profile.vault).terms is None
    assert unseal(profile.vault).limits[0].floor_price == 290


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"terms": "delivery_days"}, "terms", "Line 1: expected NAME=IDEAL..LIMIT[@WEIGHT]."),
        ({"terms": "x=1..2\ndays=1..5@"}, "terms", "Line 2: expected NAME=IDEAL..LIMIT"),
        ({"terms": "Days=1..5"}, "terms", "Line 1: an issue's name is 1-32 of a-z and _"),
        ({"terms": "price=1..5"}, "terms", "and not price."),
        (
            {"terms": "days=3..express"},
            "terms",
            "Line 1: days: the ideal and the limit are both numbers",
        ),
        ({"terms": "days=3..3.0"}, "terms", "Line 1: days: the ideal and the limit must differ."),
        ({"terms": "days=3..10@500"}, "terms", "the weight must be a number from 0 to 100."),
        ({"terms": "days=3..10@-1"}, "terms", "the weight must be a number from 0 to 100."),
        ({"terms": "days=3..10@x"}, "terms", "the weight must be a number from 0 to 100."),
        ({"terms": "days=1e13..3"}, "terms", "a number is below 10^12 in magnitude"),
        ({"terms": "days=3.12345..3"}, "terms", "with at most 4 decimals."),
        ({"terms": "support=a..b\nsupport=b..a"}, "terms", "Line 2: support has a line already."),
        ({"terms": f"s=a..{'b' * 65}"}, "terms", "an option is at most 64 characters."),
        (
            {"terms": "\n".join(f"{'abcdefghi'[n]}=1..2" for n in range(9))},
            "terms",
            "A session has at most 8 issues: one a line.",
        ),
        ({"terms": "days=19..4", "price_weight": "0"}, "price_weight", "must be more than 0."),
        (
            {"terms": "days=19..4", "price_weight": "heavy"},
            "price_weight",
            "The price weight must be a number from 0 to 100.",
        ),
        ({"terms": "days=19..4", "price_weight": "NaN"}, "price_weight", "from 0 to 100."),
        ({"price_weight": "2"}, "price_weight", "weighs the price against the issues"),
        (
            {"terms": "days=19..4", "clear_terms": "on"},
            "clear_terms",
            "Either type new limits on issues or remove them, not both.",
        ),
    ],
)
def test_bad_terms_are_refused_with_a_message_and_nothing_is_saved(
    browser: Client, shop_a: Merchant, fields: dict[str, str], field: str, message: str
) -> None:
    page = errors_of(browser.post("/agents/new/", agent_form(**fields)))
    assert escape(message) in page
    assert f'id="id_{field}_error"' in page  # beside its field, and in the summary
    assert not AgentProfile.objects.exists()
    # What was typed comes back as typed, to be mended rather than typed again.
    if "terms" in fields:
        assert escape(fields["terms"]) in page


# Playing the terms ---------------------------------------------------------------------------


def test_a_hosted_agent_trades_off_its_terms_within_its_limits(client: Client) -> None:
    hosted_agent(merchant("sfo"), terms=MERCHANT_TERMS)
    negotiation = HostedNegotiation(client, "hosted-sfo", issues=ISSUES, terms=BUYER_TERMS)
    log = negotiation.play(nudge=lambda: hosted_agents.answer("sess-hosted"))
    agreement = log[-1]["envelope"]["payload"]["agreement"]
    assert within_merchant_limits(agreement["final_terms"])
    assert all(within_merchant_limits(offer["terms"]) for offer in _offers(log, "merchant"))
    # The session keeps the terms it opened with, sealed with the floor.
    hosted = HostedSession.objects.get(session_id="sess-hosted")
    assert unseal_session_vault(hosted.sealed_limits).terms == MERCHANT_TERMS


def test_a_hosted_agent_without_terms_takes_the_buyers(client: Client) -> None:
    hosted_agent(merchant("sfo"))
    negotiation = HostedNegotiation(client, "hosted-sfo", issues=ISSUES, terms=BUYER_TERMS)
    log = negotiation.play(nudge=lambda: hosted_agents.answer("sess-hosted"))
    assert log[-1]["envelope"]["type"] == "session.agree"
    proposed = [offer["terms"] for offer in _offers(log, "buyer")]
    countered = [offer["terms"] for offer in _offers(log, "merchant")]
    assert countered
    assert all(terms in proposed for terms in countered)
    final = log[-1]["envelope"]["payload"]["agreement"]["final_terms"]
    assert final in proposed


def test_a_hosted_agent_whose_terms_do_not_fit_the_issues_declines_at_once(
    client: Client,
) -> None:
    unfit = TermsVault(Decimal(1), (IssueLimits("support", Decimal(1), "none", "gold"),))
    hosted_agent(merchant("sfo"), terms=unfit)
    negotiation = HostedNegotiation(client, "hosted-sfo", issues=ISSUES, terms=BUYER_TERMS)
    negotiation.open()
    assert hosted_agents.answer("sess-hosted") == 1
    assert hosted_agents.answer("sess-hosted") == 0  # a second run has nothing left to say
    log = negotiation.log()
    assert [(e["envelope"]["sender"]["role"], e["envelope"]["type"]) for e in log] == [
        ("buyer", "session.open"),
        ("merchant", "session.close"),
        ("arbiter", "session.close"),
    ]
    assert log[-1]["envelope"]["payload"]["reason"] == "withdrawn_by_merchant"


@pytest.mark.django_db(transaction=True)
def test_negotiate_trades_off_terms_with_a_hosted_agent(
    live_arbiter: LiveServer, celery_worker_process: Worker, tmp_path: Path
) -> None:
    hosted_agent(merchant("sfo"), "hosted-terms", terms=MERCHANT_TERMS)
    buyer = make_agent("buyer-terms", "buyer")
    run = negotiate(
        live_arbiter.url,
        buyer,
        "hosted-terms",
        tmp_path,
        *LIMIT_FLAGS,
        *BUYER_TERMS_FLAGS,
    )
    assert run.code == commands.EXIT_AGREED, run.out + run.err
    agreement = run.log[-1]["envelope"]["payload"]["agreement"]
    final = agreement["final_terms"]
    assert within_merchant_limits(final)
    assert final["delivery_days"] <= 14  # and within the buyer's
    assert 280 <= agreement["final_price"] <= 420
    assert all(within_merchant_limits(offer["terms"]) for offer in _offers(run.log, "merchant"))
    jwks = ArbiterClient(live_arbiter.url).jwks()
    assert verify_log(run.log, jwks, signatures=registered_signatures(run.log)).ok
