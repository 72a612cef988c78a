"""A merchant lists its agent in the arbiter's directory from the agent page: a description,
currencies and a catalog, checked field by field, recorded in the audit log, and seen by
buyers' agents through GET /oanp/v0.1/merchants."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from arbiter_app.models import Listing
from sessions_app.models import AgentProfile, AuditEvent, MemberRole, Merchant
from sessions_app.templatetags.ago import when
from tests.sessions_app.pages import error_summary_in, messages_in
from tests.sessions_app.test_agents import agent_form
from tests.support.factories.accounts import member, merchant, signed_in
from tests.support.factories.agents import Agent, make_agent

pytestmark = pytest.mark.django_db

PAGE = "/agents/hosted-a/"
LISTING = "/agents/hosted-a/listing/"
CATALOG = [{"route": "SFO-JFK", "cabin": "economy"}, {"route": "SFO-LAX", "cabin": "business"}]


@pytest.fixture
def browser(alice: User, agent_a: AgentProfile) -> Client:
    return signed_in(alice)


@pytest.fixture
def buyer(db: None) -> Agent:
    return make_agent("buyer-001", "buyer")


def listing_form(**overrides: Any) -> dict[str, Any]:
    data = {
        "listed": "on",
        "description": "Flights out of SFO.",
        "currencies": "usd, EUR",
        "catalog": json.dumps(CATALOG, indent=2),
    }
    data.update(overrides)
    return {name: value for name, value in data.items() if value is not None}


def directory(client: Client, buyer: Agent) -> list[dict[str, Any]]:
    response = client.get("/oanp/v0.1/merchants", headers=buyer.headers)
    assert response.status_code == 200, response.content
    listed: list[dict[str, Any]] = response.json()
    return listed


def test_a_merchant_lists_its_agent_for_buyers_to_find(
    browser: Client, alice: User, buyer: Agent
) -> None:
    assert "Not listed" in browser.get(PAGE).content.decode()
    response = browser.post(LISTING, listing_form())
    assert response.status_code == 302
    assert response["Location"] == f"{PAGE}#listing-h"
    [entry] = directory(browser, buyer)
    assert entry["agent_id"] == "hosted-a"
    assert entry["merchant"] == "Merchant a"
    assert entry["description"] == "Flights out of SFO."
    assert entry["currencies"] == ["USD"]  # of USD and EUR, the one it holds limits in
    assert entry["catalog"] == CATALOG
    # Nothing of the agent's private side: its limits (280/400) and its strategy.
    assert "280" not in json.dumps(entry)
    assert "reference" not in json.dumps(entry)
    event = AuditEvent.objects.get(action="listing.saved")
    assert (event.actor, event.target) == (alice, "hosted-a")
    assert event.detail == {
        "listed": True,
        "currencies": ["USD"],
        "catalog_items": 2,
        "changed": ["listed", "description", "currencies", "catalog"],
    }
    # The page shows the listing as saved, ready to change.
    page = browser.get(PAGE).content.decode()
    assert messages_in(page) == ["Listing saved; the agent is listed in the arbiter's directory."]
    row = Listing.objects.get()
    assert f"<dt>Updated</dt><dd>{when(row.updated_at)}</dd>" in page
    assert 'name="listed" id="id_listed" checked' in page
    assert "USD, EUR" in page
    assert "SFO-LAX" in page


def test_unlisting_keeps_the_listing_but_buyers_no_longer_see_it(
    browser: Client, buyer: Agent
) -> None:
    browser.post(LISTING, listing_form())
    assert len(directory(browser, buyer)) == 1
    assert browser.post(LISTING, listing_form(listed=None)).status_code == 302
    assert directory(browser, buyer) == []
    row = Listing.objects.get(merchant_agent_id="hosted-a")
    assert (row.listed, row.description) == (False, "Flights out of SFO.")
    last = AuditEvent.objects.filter(action="listing.saved").first()
    assert last is not None
    assert last.detail["changed"] == ["listed"]
    # Neither was seen yet: both are said, in order.
    assert messages_in(browser.get(PAGE).content.decode()) == [
        "Listing saved; the agent is listed in the arbiter's directory.",
        "Listing saved, not listed.",
    ]
    # Saved unchanged: recorded, with nothing changed.
    browser.post(LISTING, listing_form(listed=None))
    last = AuditEvent.objects.filter(action="listing.saved").first()
    assert last is not None
    assert last.detail["changed"] == []


def test_an_unlisted_draft_needs_no_currency(browser: Client) -> None:
    response = browser.post(LISTING, listing_form(listed=None, currencies="", catalog=""))
    assert response.status_code == 302
    row = Listing.objects.get()
    assert (row.listed, row.currencies, row.catalog) == (False, [], "[]")


BIG_ITEM = {"route": "SFO-JFK", "note": "x" * 4100}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"currencies": "USD, XYZ"}, "&#x27;XYZ&#x27; is not an ISO 4217 code."),
        ({"currencies": "usd USD"}, "USD is given twice."),
        ({"currencies": ""}, "A listed agent names at least one currency."),
        ({"description": "x" * 1001}, "Ensure this value has at most 1000 characters"),
        ({"description": "bold \x1b[1m"}, "Must not hold the control character U+001B."),
        ({"catalog": "[{"}, "The catalog is not valid JSON"),
        ({"catalog": '[{"a": 1, "a": 2}]'}, "The catalog is not valid JSON"),
        ({"catalog": '{"route": "SFO-JFK"}'}, "Must be a list of item objects."),
        ({"catalog": '[{"route": "SFO-JFK"}, "SFO-LAX"]'}, "Item 2: must be a JSON object."),
        ({"catalog": json.dumps([BIG_ITEM])}, "Item 1: must be at most 4096 bytes."),
        ({"catalog": '[{"n": 1e400}]'}, "Item 1, n: beyond ±(2^53-1)."),
        ({"catalog": json.dumps([{"n": n} for n in range(51)])}, "Must hold at most 50 items."),
        (
            {"catalog": json.dumps([{"note": "y" * 1400, "n": n} for n in range(50)])},
            "Must be at most 65536 bytes in all.",
        ),
    ],
)
def test_bad_input_gets_a_clear_error_and_changes_nothing(
    browser: Client, buyer: Agent, overrides: dict[str, str], message: str
) -> None:
    response = browser.post(LISTING, listing_form(**overrides))
    assert response.status_code == 400
    page = response.content.decode()
    assert message in page, page[page.find('id="listing-form"') :][:3000]
    # The form's summary lists it, with a link to the field, and takes the focus (forms.js).
    assert message in error_summary_in(page).replace("'", "&#x27;")
    assert "The listing was not saved. Please fix:" in error_summary_in(page)
    assert not Listing.objects.exists()
    assert not AuditEvent.objects.filter(action="listing.saved").exists()
    assert directory(browser, buyer) == []
    # What was typed comes back to be corrected: a listing holds nothing secret.
    if "description" in overrides and "\x1b" not in overrides["description"]:
        assert overrides["description"] in page


def test_a_bad_change_leaves_the_saved_listing_as_it_was(browser: Client, buyer: Agent) -> None:
    browser.post(LISTING, listing_form())
    before = Listing.objects.values().get()
    response = browser.post(LISTING, listing_form(currencies="ZZZ", description="changed"))
    assert response.status_code == 400
    assert Listing.objects.values().get() == before
    assert directory(browser, buyer)[0]["description"] == "Flights out of SFO."
    assert AuditEvent.objects.filter(action="listing.saved").count() == 1


def test_the_form_needs_its_csrf_token(alice: User, agent_a: AgentProfile) -> None:
    strict = signed_in(alice, enforce_csrf_checks=True)
    assert strict.post(LISTING, listing_form()).status_code == 403
    assert not Listing.objects.exists()


# Who may change it ---------------------------------------------------------------------------


def test_another_merchants_member_can_neither_see_nor_change_it(
    browser: Client, buyer: Agent
) -> None:
    browser.post(LISTING, listing_form())
    bob = member("bob", MemberRole.MERCHANT_MANAGER, merchant("b"))
    other = signed_in(bob)
    assert other.post(LISTING, listing_form(description="hijacked")).status_code == 404
    assert other.post(LISTING, listing_form(listed=None)).status_code == 404
    assert other.get(PAGE).status_code == 404
    assert directory(browser, buyer)[0]["description"] == "Flights out of SFO."
    assert not AuditEvent.objects.filter(actor=bob).exists()


def test_an_operator_sees_the_listing_but_cannot_change_it(browser: Client, buyer: Agent) -> None:
    browser.post(LISTING, listing_form())
    operator = signed_in(member("olga", MemberRole.OPERATOR))
    page = operator.get(PAGE).content.decode()
    assert 'id="listing-state"' in page
    assert "SFO-LAX" in page
    assert 'id="listing-form"' not in page
    assert operator.post(LISTING, listing_form(listed=None)).status_code == 403
    assert len(directory(browser, buyer)) == 1


def test_an_admin_lists_any_merchants_agent(agent_a: AgentProfile, buyer: Agent) -> None:
    admin = signed_in(member("ada", MemberRole.ADMIN))
    assert admin.post(LISTING, listing_form()).status_code == 302
    assert directory(admin, buyer)[0]["merchant"] == "Merchant a"


def test_an_external_agent_is_shown_once_it_has_a_key(
    browser: Client, shop_a: Merchant, alice: User, buyer: Agent
) -> None:
    browser.post(
        "/agents/new/",
        {
            "agent_id": "external-a",
            "mode": "external",
            "strategy": "reference",
            "limits-TOTAL_FORMS": "0",
            "limits-INITIAL_FORMS": "0",
        },
    )
    assert browser.post("/agents/external-a/listing/", listing_form()).status_code == 302
    assert directory(browser, buyer) == []
    page = browser.get("/agents/external-a/").content.decode()
    assert "not shown until the agent has an API key" in page
    browser.post("/agents/external-a/keys/", {"label": "its process"})
    assert [e["agent_id"] for e in directory(browser, buyer)] == ["external-a"]


def test_the_directory_lists_the_currencies_a_hosted_agent_holds_limits_in(
    browser: Client, agent_a: AgentProfile, buyer: Agent
) -> None:
    # hosted-a holds USD limits only: listed in USD and EUR, it is shown in USD alone, so a
    # buyer's agent never picks a currency it would decline.
    assert browser.post(LISTING, listing_form()).status_code == 302
    assert directory(browser, buyer)[0]["currencies"] == ["USD"]
    # The owner's choice is kept: EUR limits added later show EUR too.
    eur = {"limits-0-currency": "EUR", "limits-0-floor_price": "250", "limits-0-ideal_price": "380"}
    edited = agent_form(agent_id="hosted-a", floor_price="", ideal_price="") | eur
    assert browser.post("/agents/hosted-a/edit/", edited).status_code == 302
    assert directory(browser, buyer)[0]["currencies"] == ["USD", "EUR"]
    assert 'value="USD, EUR"' in browser.get(PAGE).content.decode()
    # A choice it holds none of: listed in what it holds rather than in nothing.
    assert browser.post(LISTING, listing_form(currencies="JPY")).status_code == 302
    assert directory(browser, buyer)[0]["currencies"] == ["USD", "EUR"]
