"""The agent form's tactics (each strategy's parameters, the settle policy) and its preview
against the reference buyers: validation, what is saved, who may preview, nothing written."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from django.utils.html import escape

from arbiter_app.models import Entry, Session
from oanp.agents.rehearsal import Rehearsal, rehearse
from oanp.agents.strategies import STRATEGIES
from oanp.agents.tradeoffs import IssueLimits, TermsVault
from oanp.wire.settlement import SettlePolicy
from sessions_app import preview
from sessions_app.models import AgentProfile, AuditEvent, HostedSession, MemberRole, Merchant
from tests.sessions_app.pages import error_summary_in
from tests.sessions_app.test_agents import agent_form, errors_of
from tests.support.factories.accounts import hosted_agent, member, merchant, signed_in

pytestmark = pytest.mark.django_db


def written() -> list[int]:
    """Rows of every table a preview must leave alone."""
    models = (AgentProfile, HostedSession, AuditEvent, Session, Entry)
    return [model.objects.count() for model in models]


def preview_rows(page: str) -> dict[str, str]:
    """The preview table's rows by buyer: the row's text, tags dropped."""
    body = page.split('id="preview-runs"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r'<tr data-buyer="([^"]+)">(.*?)</tr>', body, re.S)
    return {
        f"{buyer} {n}": " ".join(re.sub(r"<[^>]+>", " ", row).split())
        for n, (buyer, row) in enumerate(rows)
    }


@pytest.fixture
def rehearsals(monkeypatch: pytest.MonkeyPatch) -> list[Rehearsal]:
    """Every session the preview plays, as :func:`oanp.agents.rehearsal.rehearse` returned it."""
    played: list[Rehearsal] = []

    def recording(**session: Any) -> Rehearsal:
        played.append(rehearse(**session))
        return played[-1]

    monkeypatch.setattr(preview, "rehearse", recording)
    return played


# The form ------------------------------------------------------------------------------------


def test_a_new_agent_is_saved_with_its_parameters_and_settle_policy(browser: Client) -> None:
    response = browser.post(
        "/agents/new/",
        agent_form(
            strategy="boulware",
            **{
                "boulware__exponent": "0.5",
                "boulware__last_round": "counter",
                "boulware__inventory_pressure": "",  # empty: the default
                # Another strategy's fields are not read, whatever they hold.
                "linear__exponent": "999",
                "settle_when": "round",
                "settle_from_round": "3",
            },
        ),
    )
    assert response.status_code == 302
    profile = AgentProfile.objects.get(agent_id="hosted-a")
    assert profile.parameters == {
        "exponent": "0.5",
        "acceptance": "next",
        "last_round": "counter",
        "inventory_pressure": "0",
    }
    assert (profile.settle_when, profile.settle_from_round) == ("round", 3)
    detail = AuditEvent.objects.get(action="agent.created").detail
    assert (detail["parameters"]["exponent"], detail["settle"]) == ("0.5", "round 3")


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        (
            {"boulware__exponent": "50"},
            "boulware__exponent",
            "Exponent e is a number from 0.05 to 20.",
        ),
        ({"boulware__exponent": "soft"}, "boulware__exponent", "Exponent e is a number from"),
        ({"boulware__exponent": "1e999999"}, "boulware__exponent", "from 0.05 to 20"),
        (
            {"strategy": "reference", "reference__step_share": "0.75"},
            "reference__step_share",
            "Step share is a number from 0.01 to 0.5.",
        ),
        (
            {"strategy": "tit-for-tat", "tit-for-tat__min_share": "-1"},
            "tit-for-tat__min_share",
            "Least step is a number from 0 to 0.5.",
        ),
        (
            {"boulware__inventory_pressure": "2"},
            "boulware__inventory_pressure",
            "Inventory pressure is a number from 0 to 1.",
        ),
        (
            {"boulware__acceptance": "always"},
            "boulware__acceptance",
            "Acceptance: choose one of the options listed.",
        ),
        (
            {"boulware__last_round": "walk away"},
            "boulware__last_round",
            "Last round: choose one of the options listed.",
        ),
        ({"settle_when": "round"}, "settle_from_round", "Say from which round it settles: 1 to 20"),
        (
            {"settle_when": "round", "settle_from_round": "21"},
            "settle_from_round",
            "less than or equal to 20",
        ),
        ({"settle_when": "round", "settle_from_round": "x"}, "settle_from_round", "whole number"),
        ({"settle_when": "sometimes"}, "settle_when", "Select a valid choice"),
    ],
)
def test_a_bad_tactic_gets_an_error_on_its_field_and_saves_nothing(
    browser: Client, shop_a: Merchant, fields: dict[str, str], field: str, message: str
) -> None:
    page = errors_of(browser.post("/agents/new/", agent_form(**fields)))
    # The error follows its field (the radios of settle_when: their fieldset).
    start = '<fieldset class="settle">' if field == "settle_when" else f'id="id_{field}"'
    errors = page.split(start, 1)[1].split('<div class="field"', 1)[0]
    assert message in errors
    # Named as the form labels them, here and in the summary, never as code names them.
    summary = error_summary_in(page)
    assert message in summary
    assert not re.search(r"\b[a-z]+_[a-z_]+ is ", summary)
    assert not AgentProfile.objects.exists()
    # An edit refused the same way changes nothing either.
    profile = hosted_agent(shop_a, "hosted-b")
    before = (profile.strategy, profile.parameters, profile.settle_when)
    errors_of(browser.post("/agents/hosted-b/edit/", agent_form(**fields)))
    profile.refresh_from_db()
    assert (profile.strategy, profile.parameters, profile.settle_when) == before
    assert not AuditEvent.objects.filter(action="agent.updated").exists()
    profile.delete()


def test_the_form_shows_every_strategys_group_labelled_and_the_saved_values(
    browser: Client, shop_a: Merchant
) -> None:
    page = browser.get("/agents/new/").content.decode()
    for named in STRATEGIES.values():
        assert f'data-strategy="{named.name}"' in page
        assert f"<legend>{escape(named.label)}</legend>" in page
    assert 'placeholder="0.25"' in page  # the reference merchant's step, not the buyer's
    assert "js/agent_form.js" in page
    hosted_agent(
        shop_a, "hosted-a", strategy="conceder", parameters={"exponent": "7", "acceptance": "prev"}
    )
    page = browser.get("/agents/hosted-a/edit/").content.decode()
    assert re.search(r'name="conceder__exponent" value="7"', page)
    assert re.search(r'<option value="prev" selected>', page)
    # The other groups start at their defaults.
    assert re.search(r'name="boulware__exponent" value="0.2"', page)


def test_editing_the_parameters_is_audited_by_what_changed(
    browser: Client, shop_a: Merchant
) -> None:
    hosted_agent(shop_a, "hosted-a", strategy="linear")
    response = browser.post(
        "/agents/hosted-a/edit/",
        agent_form(
            strategy="linear",
            floor_price="",
            ideal_price="",
            display_name="",
            **{"linear__exponent": "2", "settle_when": "stuck"},
        ),
    )
    assert response.status_code == 302
    event = AuditEvent.objects.get(action="agent.updated")
    assert event.detail["changed"] == ["parameters", "settle"]
    assert event.detail["parameters"]["exponent"] == "2"
    assert event.detail["settle"] == "stuck"


# The preview ---------------------------------------------------------------------------------


def test_the_preview_plays_the_unsaved_form_against_each_reference_buyer(
    browser: Client, rehearsals: list[Rehearsal]
) -> None:
    before = written()
    response = browser.post(
        "/agents/new/",
        agent_form(strategy="reference", preview="1", **{"reference__step_share": "0.5"}),
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert written() == before
    rows = preview_rows(page)
    assert list(rows) == [f"{name} {n}" for n, name in enumerate(STRATEGIES)] + ["reference 5"]
    # Floor 280, ideal 400: the ceiling is 340 (halfway), the buyer opens at 80% of it, 272,
    # and steps 5% of it, 17. The merchant gives up half its range per round: 340 at once,
    # and 280 next, so it takes the buyer's 289.
    assert rows["reference 0"] == (
        "reference halfway between floor and ideal 2 buyer 272 → merchant 340 buyer 289 → "
        "merchant accepts agreed at 289 USD"
    )
    # Ceiling 252: its last propose; the merchant's last counter, its floor, is declined.
    assert rows["reference 5"].startswith("reference a tenth under the floor 5 buyer 201.6 →")
    assert rows["reference 5"].endswith(
        "buyer 252 → merchant 280 → buyer withdraws no deal: withdrawn_by_buyer"
    )
    assert 'id="preview-limits"' in page  # the typed limits were played, and not saved
    assert 'value="280"' in page  # and come back as typed, to be saved as they are
    assert "340" not in page.split('id="preview"')[0]  # no limit or ceiling outside the moves
    # No terms in the vault: price-only sessions, as ever.
    assert len(rehearsals) == 6
    for played in rehearsals:
        opening = played.entries[0].envelope["payload"]
        assert "issues" not in opening
        assert opening["profile"] != "terms/v0.1"
    assert 'id="preview-issues"' not in page
    assert not any("·" in row for row in rows.values())


def test_the_preview_plays_the_sealed_limits_when_none_are_typed(
    browser: Client, shop_a: Merchant
) -> None:
    profile = hosted_agent(shop_a, "hosted-a", floor="280", ideal="400")
    before = written()
    response = browser.post(
        "/agents/hosted-a/edit/",
        agent_form(
            strategy="boulware",
            floor_price="",
            ideal_price="",
            preview="1",
            **{
                "boulware__inventory_pressure": "1",
                "settle_when": "round",
                "settle_from_round": "2",
            },
        ),
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert written() == before
    assert 'id="preview-limits"' not in page
    rows = preview_rows(page)
    # Pressure 1: the floor at once, which every buyer halfway up takes in round 2.
    assert rows["linear 3"] == (
        "linear halfway between floor and ideal 2 buyer 272 → merchant 280 buyer accepts "
        "agreed at 280 USD"
    )
    # The buyer under the floor: round 2 is the agent's to settle in, and there is no zone.
    assert rows["reference 5"].endswith(
        "merchant reveals its limit → buyer reveals its limit no deal: no_zone"
    )
    profile.refresh_from_db()
    assert (profile.strategy, profile.settle_when) == ("reference", "never")
    # The form comes back as it was posted, to be saved or tuned further.
    assert re.search(r'name="boulware__inventory_pressure" value="1"', page)


def test_the_preview_shows_the_settlement_by_the_agents_policy(browser: Client) -> None:
    page = browser.post(
        "/agents/new/",
        agent_form(strategy="linear", preview="1", settle_when="round", settle_from_round="1"),
    ).content.decode()
    rows = preview_rows(page)
    assert rows["tit-for-tat 4"] == (
        "tit-for-tat halfway between floor and ideal 1 buyer 272 → merchant reveals its limit → "
        "buyer reveals its limit settled by reveal at 310 USD"
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"boulware__exponent": "0"}, "Exponent e is a number from 0.05 to 20."),
        ({"floor_price": "", "ideal_price": "", "mode": "external"}, "The preview plays"),
        ({"floor_price": "500"}, "The floor cannot be above the ideal price."),
    ],
)
def test_a_preview_of_a_bad_form_shows_the_errors_and_plays_nothing(
    browser: Client, fields: dict[str, str], message: str
) -> None:
    page = errors_of(browser.post("/agents/new/", agent_form(preview="1", **fields)))
    assert message in page
    assert 'id="preview-runs"' not in page
    assert not AgentProfile.objects.exists()


def test_only_those_who_may_change_an_agent_may_preview_it(shop_a: Merchant) -> None:
    hosted_agent(shop_a, "hosted-a")
    hosted_agent(merchant("b"), "hosted-b")
    form: dict[str, Any] = agent_form(floor_price="", ideal_price="", preview="1")
    alice = signed_in(member("alice", MemberRole.MERCHANT_MANAGER, shop_a))
    assert alice.post("/agents/hosted-a/edit/", form).status_code == 200
    # Another merchant's agent is unknown to her, as on the agent page.
    assert alice.post("/agents/hosted-b/edit/", form).status_code == 404
    # Operators watch sessions: the preview's prices would tell them the agent's floor.
    operator = signed_in(member("olga", MemberRole.OPERATOR))
    assert operator.post("/agents/hosted-a/edit/", form).status_code == 403
    assert operator.post("/agents/new/", agent_form(preview="1")).status_code == 403
    admin = signed_in(member("ada", MemberRole.ADMIN))
    assert admin.post("/agents/hosted-b/edit/", form).status_code == 200
    signed_out = Client().post("/agents/hosted-a/edit/", form)
    assert signed_out.status_code == 302
    assert signed_out["Location"].startswith("/login/")
    assert not AuditEvent.objects.exclude(action="agent.created").exists()


def test_the_agent_page_shows_the_tactics_and_leads_managers_to_tune_them(
    browser: Client, shop_a: Merchant
) -> None:
    hosted_agent(
        shop_a,
        "hosted-a",
        strategy="boulware",
        parameters={"exponent": "0.5"},
        settle=SettlePolicy("round", 3),
    )
    page = browser.get("/agents/hosted-a/").content.decode()
    strategy = page.split('id="agent-strategy">', 1)[1].split("</dd>", 1)[0]
    assert strategy.startswith("boulware")
    assert '<span class="kv">exponent 0.5</span>' in strategy
    assert 'href="/agents/hosted-a/edit/#tactics"' in strategy
    assert "from round 3" in page.split('id="agent-settle">', 1)[1].split("</dd>", 1)[0]
    operator = (
        signed_in(member("olga", MemberRole.OPERATOR)).get("/agents/hosted-a/").content.decode()
    )
    assert "exponent 0.5" in operator
    assert "Tune and preview" not in operator


def test_the_agent_page_previews_the_saved_agent(browser: Client, shop_a: Merchant) -> None:
    hosted_agent(shop_a, "hosted-a")
    before = written()
    page = browser.post("/agents/hosted-a/preview/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="preview-runs"' in html
    assert "as the agent is saved" in html
    assert html.count("<tr data-buyer=") == 6
    assert written() == before  # nothing stored, nothing sent


def test_an_external_agent_has_nothing_to_preview(browser: Client, shop_a: Merchant) -> None:
    profile = hosted_agent(shop_a, "hosted-a")
    AgentProfile.objects.filter(pk=profile.pk).update(mode="external")
    answer = browser.post("/agents/hosted-a/preview/")
    assert answer.status_code == 302
    assert "can be previewed" in browser.get(answer["Location"]).content.decode()


def test_the_saved_preview_is_for_managers_of_the_agent(shop_a: Merchant) -> None:
    hosted_agent(shop_a, "hosted-a")
    stranger = signed_in(member("bob", MemberRole.MERCHANT_MANAGER, merchant("b")))
    assert stranger.post("/agents/hosted-a/preview/").status_code == 404
    operator = signed_in(member("olga", MemberRole.OPERATOR))
    assert operator.post("/agents/hosted-a/preview/").status_code == 403
    assert Client().post("/agents/hosted-a/preview/").status_code == 302  # to sign in


# The preview of an agent with terms ----------------------------------------------------------

#: The merchant wants many delivery days and no support, and cares little for the days: its
#: buyers, weighing the issues the other way round, get fast delivery and give up support.
TERMS = "delivery_days=19..4@0.25\nsupport=none..standard@2.5"
SEALED_TERMS = TermsVault(
    Decimal("1.5"),
    (
        IssueLimits("delivery_days", Decimal("0.25"), "19", "4"),
        IssueLimits("support", Decimal("2.5"), "none", "standard"),
    ),
)
#: The issues the preview's buyers declare for those terms: each spans the ideal and the limit.
DECLARED = [
    {
        "name": "delivery_days",
        "kind": "number",
        "buyer_prefers": "low",
        "min": 4,
        "max": 19,
        "decimals": 0,
    },
    {"name": "support", "kind": "choice", "options": ["standard", "none"]},
]


def within_the_merchants_limits(terms: dict[str, Any]) -> bool:
    return 4 <= terms["delivery_days"] <= 19 and terms["support"] in ("none", "standard")


def assert_plays_the_terms(rehearsals: list[Rehearsal], rows: dict[str, str]) -> None:
    """Every session declares the issues and every offer carries terms, which its move shows
    after the price; the buyers halfway agree on terms within the merchant's limits, each
    trading what it weighs less for what it weighs more; the one under the floor does not."""
    assert len(rehearsals) == len(rows) == 6
    for played, row in zip(rehearsals, rows.values(), strict=True):
        opening = played.entries[0].envelope["payload"]
        assert (opening["profile"], opening["issues"]) == ("terms/v0.1", DECLARED)
        offers = [
            e.envelope["payload"]
            for e in played.entries
            if e.type in ("offer.propose", "offer.counter")
        ]
        assert all(within_the_merchants_limits(offer["terms"]) for offer in offers)
        shown = re.findall(r"([\d.]+) · delivery_days (\d+), support (\w+)", row)
        assert shown == [
            (str(o["price"]), str(o["terms"]["delivery_days"]), o["terms"]["support"])
            for o in offers
        ]
    outcomes = list(zip(rehearsals, rows.values(), strict=True))
    agreed = [(p, row) for p, row in outcomes if p.negotiation.state.final_price is not None]
    assert len(agreed) == 5
    for played, row in agreed:
        final = played.entries[-1].envelope["payload"]["agreement"]["final_terms"]
        assert within_the_merchants_limits(final)
        # The merchant kept what it weighs most, the buyer got fast delivery (its limit: 12).
        assert final["support"] == "none"
        assert final["delivery_days"] < 12
        assert row.endswith(f"USD delivery_days {final['delivery_days']}, support none")
    assert rehearsals[-1].negotiation.state.final_price is None
    assert "no deal" in rows["reference 5"]


def test_the_preview_plays_the_typed_terms(browser: Client, rehearsals: list[Rehearsal]) -> None:
    before = written()
    response = browser.post(
        "/agents/new/",
        agent_form(strategy="linear", terms=TERMS, price_weight="1.5", preview="1"),
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert written() == before
    rows = preview_rows(page)
    assert_plays_the_terms(rehearsals, rows)
    assert rows["linear 3"] == (
        "linear halfway between floor and ideal 5 "
        "buyer 272 · delivery_days 4, support standard → "
        "merchant 400 · delivery_days 19, support none "
        "buyer 289 · delivery_days 4, support standard → "
        "merchant 370 · delivery_days 8, support none "
        "buyer 306 · delivery_days 4, support standard → "
        "merchant 340 · delivery_days 6, support none "
        "buyer 323 · delivery_days 5, support standard → "
        "merchant 323 · delivery_days 5, support none "
        "buyer accepts agreed at 323 USD delivery_days 5, support none"
    )
    issues = page.split('id="preview-issues">', 1)[1].split("</p>", 1)[0]
    assert "negotiate delivery_days, support," in issues
    for typed in ("19..4", "@0.25", "standard@2.5", 'value="1.5"'):
        assert typed in page  # played, and back as typed, to be saved as they are


def test_the_preview_plays_the_sealed_terms(
    browser: Client, shop_a: Merchant, rehearsals: list[Rehearsal]
) -> None:
    hosted_agent(shop_a, "hosted-a", strategy="linear", terms=SEALED_TERMS)
    before = written()
    # The agent page's preview, as saved; and the form's, with no limits typed.
    saved = browser.post("/agents/hosted-a/preview/")
    assert saved.status_code == 200
    assert "as the agent is saved" in saved.content.decode()
    assert_plays_the_terms(rehearsals, preview_rows(saved.content.decode()))
    rehearsals.clear()
    form = browser.post(
        "/agents/hosted-a/edit/",
        agent_form(strategy="linear", floor_price="", ideal_price="", preview="1"),
    )
    assert form.status_code == 200
    assert 'id="preview-limits"' not in form.content.decode()
    assert_plays_the_terms(rehearsals, preview_rows(form.content.decode()))
    assert written() == before


def test_an_agent_with_terms_settles_only_once_the_terms_match(
    browser: Client, rehearsals: list[Rehearsal]
) -> None:
    # It would reveal from round 1, but a reveal settles the price alone: the arbiter would
    # refuse it while an issue is open.
    page = browser.post(
        "/agents/new/",
        agent_form(
            strategy="linear",
            terms=TERMS,
            price_weight="1.5",
            settle_when="round",
            settle_from_round="1",
            preview="1",
        ),
    ).content.decode()
    rows = preview_rows(page)
    assert rows["reference 5"].endswith(
        "buyer 252 · delivery_days 5, support none → merchant reveals its limit → "
        "buyer reveals its limit no deal: no_zone"
    )
    assert_plays_the_terms(rehearsals, rows)
