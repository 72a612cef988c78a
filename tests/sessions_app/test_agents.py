"""The /agents/ pages: merchants create and edit their agents and manage their API keys."""

from __future__ import annotations

import hashlib
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from arbiter_app.models import AgentCredential
from oanp.agents.pricelist import PriceLimits, PriceList
from sessions_app import services
from sessions_app.models import AgentProfile, AuditEvent, MemberRole, Merchant
from sessions_app.templatetags.ago import when
from sessions_app.vault import unseal
from sessions_app.views import agents as agents_views
from tests.sessions_app.pages import error_summary_in, messages_in
from tests.support.factories.accounts import hosted_agent, member, merchant, signed_in
from tests.support.factories.agents import make_agent

pytestmark = pytest.mark.django_db


def agent_form(**overrides: Any) -> dict[str, Any]:
    """The agent form as a browser posts it: limits typed in the first new row (USD, any
    item, 280 to 400 unless ``currency``, ``item``, ``floor_price``, ``ideal_price`` say
    otherwise; both prices empty: nothing typed there), after ``stored`` rows it shows."""
    row = {"currency": "USD", "item": "", "floor_price": "280", "ideal_price": "400"}
    row |= {name: overrides.pop(name) for name in list(row) if name in overrides}
    if not (row["floor_price"] or row["ideal_price"]):
        row = {}
    stored: int = overrides.pop("stored", 0)
    data = {
        "agent_id": "hosted-a",
        "display_name": "Flights A",
        "mode": "hosted",
        "strategy": "boulware",
        "limits-TOTAL_FORMS": str(stored + 3),
        "limits-INITIAL_FORMS": str(stored),
        "limits-MIN_NUM_FORMS": "0",
        "limits-MAX_NUM_FORMS": "1000",
    } | {f"limits-{stored}-{name}": value for name, value in row.items()}
    data.update(overrides)
    return data


def errors_of(response: Any) -> str:
    assert response.status_code == 400, response.status_code
    return str(response.content.decode())


# Creating and editing ------------------------------------------------------------------------


def test_an_empty_list_says_how_to_start(browser: Client) -> None:
    page = browser.get("/agents/").content.decode()
    assert "No agents yet" in page
    assert 'href="/agents/new/"' in page


def test_a_merchant_creates_a_hosted_agent_with_sealed_limits(
    browser: Client, alice: User, shop_a: Merchant
) -> None:
    response = browser.post(
        "/agents/new/",
        agent_form(**{"limits-1-item": "SFO-JFK", "limits-1-currency": "USD"})
        | {"limits-1-floor_price": "250.5", "limits-1-ideal_price": "390"},
    )
    assert response.status_code == 302
    assert response["Location"] == "/agents/hosted-a/"
    profile = AgentProfile.objects.get(agent_id="hosted-a")
    assert profile.merchant == shop_a
    assert (profile.mode, profile.strategy, profile.display_name) == (
        "hosted",
        "boulware",
        "Flights A",
    )
    limits = unseal(profile.vault)
    assert limits == PriceList(
        (
            PriceLimits(None, "USD", Decimal(280), Decimal(400)),
            PriceLimits("SFO-JFK", "USD", Decimal("250.5"), Decimal(390)),
        )
    )
    # The arbiter opens sessions only to a registered merchant: the hosted key exists.
    assert AgentCredential.objects.filter(
        agent_id="hosted-a", label=services.HOSTED_KEY_LABEL
    ).exists()
    event = AuditEvent.objects.get(action="agent.created")
    assert (event.actor, event.target) == (alice, "hosted-a")
    assert "280" not in str(event.detail)
    assert messages_in(browser.get("/agents/hosted-a/").content.decode()) == [
        "Agent hosted-a created."
    ]
    page = browser.get("/agents/").content.decode()
    assert "hosted-a" in page
    assert f"<td>{when(profile.created_at)}</td>" in page


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"agent_id": "has space"}, "An agent id is 1-64 characters"),
        ({"agent_id": ""}, "This field is required"),
        ({"floor_price": "500"}, "The floor cannot be above the ideal price"),
        ({"ideal_price": ""}, "Enter both the floor and the ideal price"),
        ({"floor_price": "", "ideal_price": ""}, "A hosted agent needs its limits"),
        ({"floor_price": "-3"}, "The floor must be more than 0 and less than 10^12"),
        ({"floor_price": "1e2"}, "The floor must be a number, as 280 or 279.99"),
        ({"floor_price": "0"}, "The floor must be more than 0"),
        ({"floor_price": "abc"}, "The floor must be a number"),
        ({"floor_price": "280.5", "currency": "JPY"}, "JPY takes no decimals"),
        ({"ideal_price": "400.125"}, "USD takes at most 2 decimals"),
        ({"currency": "XYZ"}, "XYZ is not an ISO 4217 currency code"),
        ({"currency": ""}, "Name the currency of these limits"),
        ({"strategy": "gambler"}, "Select a valid choice"),
        ({"mode": "telepathic"}, "Select a valid choice"),
        ({"limits-1-item": "SFO-JFK"}, "Name the currency of these limits"),
        (
            {
                "limits-1-currency": "USD",
                "limits-1-floor_price": "1",
                "limits-1-ideal_price": "2",
            },
            "Any item in USD is given two rows: keep one.",
        ),
    ],
)
def test_bad_input_gets_a_clear_error_and_changes_nothing(
    browser: Client, overrides: dict[str, str], message: str
) -> None:
    page = errors_of(browser.post("/agents/new/", agent_form(**overrides)))
    # Listed in the summary that takes the focus, the display name kept as typed.
    assert message in error_summary_in(page)
    assert 'value="Flights A"' in page
    assert not AgentProfile.objects.exists()
    # What was typed comes back as typed, so nothing has to be typed twice.
    if overrides.get("floor_price", "280") == "280" and "currency" not in overrides:
        assert 'value="280"' in page


def test_an_agent_id_that_holds_keys_already_is_taken(browser: Client) -> None:
    make_agent("merchant-elsewhere", "merchant")
    page = errors_of(browser.post("/agents/new/", agent_form(agent_id="merchant-elsewhere")))
    assert "This agent id is taken" in page
    hosted_agent(merchant("b"), "hosted-b")
    page = errors_of(browser.post("/agents/new/", agent_form(agent_id="hosted-b")))
    assert "This agent id is taken" in page


def test_an_external_agent_needs_no_limits(browser: Client) -> None:
    response = browser.post(
        "/agents/new/", agent_form(mode="external", floor_price="", ideal_price="")
    )
    assert response.status_code == 302
    profile = AgentProfile.objects.get(agent_id="hosted-a")
    assert profile.vault == b""
    assert not AgentCredential.objects.filter(agent_id="hosted-a").exists()


def test_forms_need_their_csrf_token(alice: User) -> None:
    strict = signed_in(alice, enforce_csrf_checks=True)
    assert strict.post("/agents/new/", agent_form()).status_code == 403
    page = strict.get("/agents/new/").content.decode()
    assert "csrfmiddlewaretoken" in page


def test_the_edit_form_never_shows_the_limits_and_keeps_them_when_left_empty(
    browser: Client, shop_a: Merchant
) -> None:
    profile = hosted_agent(shop_a, "hosted-a", floor="280", ideal="400")
    page = browser.get("/agents/hosted-a/edit/").content.decode()
    assert "saved rows show no amounts" in page.lower()
    assert "280" not in page
    response = browser.post(
        "/agents/hosted-a/edit/",
        agent_form(
            display_name="Renamed", floor_price="", ideal_price="", strategy="linear", stored=1
        ),
    )
    assert response.status_code == 302
    assert messages_in(browser.get(response["Location"]).content.decode()) == [
        "Agent hosted-a saved."
    ]
    profile.refresh_from_db()
    assert (profile.display_name, profile.strategy) == ("Renamed", "linear")
    assert unseal(profile.vault).limits[0].floor_price == Decimal(280)
    browser.post(
        "/agents/hosted-a/edit/",
        agent_form(display_name="Renamed", strategy="linear", floor_price="300", ideal_price="450"),
    )
    profile.refresh_from_db()
    assert unseal(profile.vault).limits[0].floor_price == Decimal(300)
    changes = [e.detail["changed"] for e in AuditEvent.objects.filter(action="agent.updated")]
    assert sorted(changes) == [["display_name", "strategy"], ["limits"]]


def test_the_agent_id_cannot_be_changed(browser: Client, shop_a: Merchant) -> None:
    hosted_agent(shop_a, "hosted-a")
    browser.post("/agents/hosted-a/edit/", agent_form(agent_id="renamed"))
    assert AgentProfile.objects.filter(agent_id="hosted-a").exists()
    assert not AgentProfile.objects.filter(agent_id="renamed").exists()


# Who may see and change what -----------------------------------------------------------------


def test_a_merchant_cannot_see_or_change_another_merchants_agent(
    browser: Client, shop_a: Merchant
) -> None:
    hosted_agent(shop_a, "hosted-a")
    other = hosted_agent(merchant("b"), "hosted-b")
    key = services.issue_key(
        actor=member("bob", MemberRole.MERCHANT_MANAGER, other.merchant), profile=other, label=""
    )
    assert "hosted-b" not in browser.get("/agents/").content.decode()
    assert browser.get("/agents/hosted-b/").status_code == 404
    assert browser.get("/agents/hosted-b/edit/").status_code == 404
    assert browser.post("/agents/hosted-b/edit/", agent_form()).status_code == 404
    assert browser.post("/agents/hosted-b/keys/", {"label": "x"}).status_code == 404
    revoke = f"/agents/hosted-b/keys/{key.credential.pk}/revoke/"
    assert browser.get(revoke).status_code == 404
    assert browser.post(revoke, {"confirmed": "yes"}).status_code == 404
    # Nor through one of its own agents' URLs.
    wrong_agent = f"/agents/hosted-a/keys/{key.credential.pk}/revoke/"
    assert browser.post(wrong_agent, {"confirmed": "yes"}).status_code == 404
    key.credential.refresh_from_db()
    assert key.credential.revoked_at is None
    assert AgentCredential.objects.filter(agent_id="hosted-b").count() == 2


def test_an_operator_looks_but_changes_nothing(shop_a: Merchant) -> None:
    hosted_agent(shop_a, "hosted-a")
    operator = signed_in(member("olga", MemberRole.OPERATOR))
    page = operator.get("/agents/").content.decode()
    assert "hosted-a" in page
    assert "New agent" not in page
    assert operator.get("/agents/hosted-a/").status_code == 200
    assert operator.get("/agents/new/").status_code == 403
    assert operator.post("/agents/new/", agent_form(agent_id="op-agent")).status_code == 403
    assert operator.get("/agents/hosted-a/edit/").status_code == 403
    assert operator.post("/agents/hosted-a/keys/", {"label": "x"}).status_code == 403
    assert not AgentProfile.objects.filter(agent_id="op-agent").exists()


def test_an_admin_creates_an_agent_for_any_merchant() -> None:
    shop_b = merchant("b")
    admin = signed_in(member("ada", MemberRole.ADMIN))
    assert "Merchant" in admin.get("/agents/new/").content.decode()
    response = admin.post("/agents/new/", agent_form(agent_id="hosted-b", merchant=shop_b.pk))
    assert response.status_code == 302
    assert AgentProfile.objects.get(agent_id="hosted-b").merchant == shop_b
    assert errors_of(admin.post("/agents/new/", agent_form(agent_id="hosted-c")))


def test_signed_out_visitors_are_sent_to_sign_in() -> None:
    response = Client().get("/agents/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


# API keys ------------------------------------------------------------------------------------


def test_a_new_key_is_shown_once_and_only_its_digest_is_stored(
    browser: Client, shop_a: Merchant, alice: User
) -> None:
    hosted_agent(shop_a, "hosted-a", strategy="reference")
    response = browser.post("/agents/hosted-a/keys/", {"label": "laptop"}, follow=True)
    assert response.redirect_chain == [("/agents/hosted-a/", 302)]
    assert response["Cache-Control"] == "no-store"
    page = response.content.decode()
    credential = AgentCredential.objects.get(agent_id="hosted-a", label="laptop")
    start = page.index('id="issued-key"')
    api_key = page[start:].split('value="', 1)[1].split('"', 1)[0]
    assert api_key.startswith(f"oanp_{credential.prefix}_")
    assert "shown this once" in page
    assert credential.digest == hashlib.sha256(api_key.encode()).hexdigest()
    row = AgentCredential.objects.filter(pk=credential.pk).values().get()
    assert all(api_key not in str(value) for value in row.values())
    # The key works with the API, and is never shown again, nor left in the user's session.
    headers = {"Authorization": f"Bearer {api_key}"}
    assert browser.get("/oanp/v0.1/sessions/none", headers=headers).status_code == 404
    again = browser.get("/agents/hosted-a/").content.decode()
    assert api_key not in again
    assert agents_views.ISSUED_KEY not in browser.session
    assert credential.prefix in again
    assert "laptop" in again
    event = AuditEvent.objects.get(action="key.issued")
    assert (event.actor, event.target, event.detail["prefix"]) == (
        alice,
        "hosted-a",
        credential.prefix,
    )


def test_a_revoked_key_no_longer_opens_the_api(
    browser: Client, shop_a: Merchant, alice: User
) -> None:
    profile = hosted_agent(shop_a, "hosted-a")
    issued = services.issue_key(actor=alice, profile=profile, label="ci")
    headers = {"Authorization": f"Bearer {issued.api_key}"}
    assert browser.get("/oanp/v0.1/sessions/none", headers=headers).status_code == 404
    revoke = f"/agents/hosted-a/keys/{issued.credential.pk}/revoke/"
    response = browser.post(revoke, {"confirmed": "yes"}, follow=True)
    assert response.redirect_chain == [("/agents/hosted-a/", 302)]
    assert f"Key {issued.credential.prefix} revoked." in response.content.decode()
    issued.credential.refresh_from_db()
    assert issued.credential.revoked_at is not None
    assert browser.get("/oanp/v0.1/sessions/none", headers=headers).status_code == 401
    assert AuditEvent.objects.filter(action="key.revoked", target="hosted-a").count() == 1
    page = browser.get("/agents/hosted-a/").content.decode()
    assert f"Revoke key {issued.credential.prefix}" not in page
    # Revoking twice is harmless and records nothing more.
    assert "no longer opens the API" in browser.get(revoke).content.decode()
    browser.post(revoke, {"confirmed": "yes"})
    assert AuditEvent.objects.filter(action="key.revoked").count() == 1


def test_the_hosted_runners_key_is_listed_but_not_revocable(
    browser: Client, shop_a: Merchant
) -> None:
    hosted_agent(shop_a, "hosted-a")
    hosted = AgentCredential.objects.get(agent_id="hosted-a", label=services.HOSTED_KEY_LABEL)
    page = browser.get("/agents/hosted-a/").content.decode()
    assert hosted.prefix in page
    assert f"Revoke key {hosted.prefix}" not in page
    revoke = f"/agents/hosted-a/keys/{hosted.pk}/revoke/"
    assert "This key is not revocable" in browser.get(revoke).content.decode()
    refused = browser.post(revoke, {"confirmed": "yes"}, follow=True).content.decode()
    assert "never shown, so it cannot leak" in refused
    hosted.refresh_from_db()
    assert hosted.revoked_at is None
    page = errors_of(browser.post("/agents/hosted-a/keys/", {"label": services.HOSTED_KEY_LABEL}))
    assert "This label is reserved" in page
