"""The agent form's limits table: saving never loses limits. A save keeps every sealed limit
the form did not change, removing one is explicit, and a form that comes back (an error, a
preview) keeps what was typed without ever writing a stored limit into the page."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.test import Client

from oanp.agents.pricelist import PriceLimits, PriceList
from oanp.agents.tradeoffs import IssueLimits, TermsVault
from sessions_app.models import AgentProfile, Merchant
from sessions_app.vault import unseal
from tests.sessions_app.pages import error_summary_in
from tests.sessions_app.test_agents import agent_form
from tests.support.factories.accounts import hosted_agent, price_limits

pytestmark = pytest.mark.django_db

TERMS = TermsVault(
    Decimal(1), (IssueLimits("checked_bags", Decimal("0.5"), Decimal(0), Decimal(2)),)
)
STORED = PriceList(
    (
        PriceLimits(None, "USD", Decimal("281.37"), Decimal("402.19")),
        PriceLimits("SFO-LAX", "USD", Decimal("121.43"), Decimal("191.57")),
        PriceLimits(None, "EUR", Decimal("263.11"), Decimal("377.29")),
    ),
    terms=TERMS,
)
STORED_AMOUNTS = ("281.37", "402.19", "121.43", "191.57", "263.11", "377.29")


@pytest.fixture
def agent(shop_a: Merchant) -> AgentProfile:
    profile = hosted_agent(shop_a, "hosted-a")
    price_limits(profile, STORED)
    profile.refresh_from_db()
    return profile


def as_shown(**rows: str) -> dict[str, str]:
    """The edit form as the browser posts it: the three stored rows as the page shows them
    (each named by its ``was``, amounts empty), then ``rows`` typed over them."""
    data = agent_form(floor_price="", ideal_price="", stored=3)
    for n, row in enumerate(STORED.limits):
        data[f"limits-{n}-was"] = json.dumps([row.item, row.currency])
    return data | rows


def test_the_form_shows_where_limits_are_held_and_never_what_they_are(
    browser: Client, agent: AgentProfile
) -> None:
    page = browser.get("/agents/hosted-a/edit/").content.decode()
    table = page.split('id="price-rows"', 1)[1].split("</table>", 1)[0]
    assert "SFO-LAX" in table
    assert "EUR" in table
    assert table.count('name="limits-0-remove"') == 1
    for amount in STORED_AMOUNTS:
        assert amount not in page


def test_changing_one_row_keeps_the_others_and_the_terms(
    browser: Client, agent: AgentProfile
) -> None:
    data = as_shown(**{"limits-0-floor_price": "290", "limits-0-ideal_price": "410"})
    assert browser.post("/agents/hosted-a/edit/", data).status_code == 302
    agent.refresh_from_db()
    saved = unseal(agent.vault)
    assert saved.row(None, "USD") == PriceLimits(None, "USD", Decimal(290), Decimal(410))
    assert saved.row("SFO-LAX", "USD") == STORED.limits[1]
    assert saved.row(None, "EUR") == STORED.limits[2]
    assert saved.terms == TERMS


def test_a_save_that_types_no_limit_changes_none(browser: Client, agent: AgentProfile) -> None:
    assert browser.post("/agents/hosted-a/edit/", as_shown(display_name="B")).status_code == 302
    agent.refresh_from_db()
    assert unseal(agent.vault) == STORED


def test_removing_a_row_is_explicit(browser: Client, agent: AgentProfile) -> None:
    data = as_shown(**{"limits-1-remove": "on"})
    assert browser.post("/agents/hosted-a/edit/", data).status_code == 302
    agent.refresh_from_db()
    assert unseal(agent.vault).limits == (STORED.limits[0], STORED.limits[2])


def test_a_new_row_is_added_beside_the_stored_ones(browser: Client, agent: AgentProfile) -> None:
    data = as_shown(
        **{
            "limits-3-item": "SFO-SEA",
            "limits-3-currency": "jpy",
            "limits-3-floor_price": "21000",
            "limits-3-ideal_price": "36000",
        }
    )
    assert browser.post("/agents/hosted-a/edit/", data).status_code == 302
    agent.refresh_from_db()
    assert unseal(agent.vault).limits == (
        *STORED.limits,
        PriceLimits("SFO-SEA", "JPY", Decimal(21000), Decimal(36000)),
    )


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ({"limits-0-floor_price": "290"}, "Enter both a new floor and a new ideal"),
        (
            {"limits-2-floor_price": "290.123", "limits-2-ideal_price": "300"},
            "EUR takes at most 2 decimals",
        ),
        ({"limits-0-floor_price": "500", "limits-0-ideal_price": "450"}, "floor cannot be above"),
        (
            {
                "limits-3-currency": "USD",
                "limits-3-floor_price": "1",
                "limits-3-ideal_price": "2",
                "limits-0-remove": "on",
            },
            "Any item in USD is given two rows",
        ),
        ({"items_only": "on"}, "never uses an 'any item' row"),
    ],
)
def test_a_refused_save_changes_nothing_and_keeps_only_what_was_typed(
    browser: Client, agent: AgentProfile, rows: dict[str, str], message: str
) -> None:
    response = browser.post("/agents/hosted-a/edit/", as_shown(**rows))
    assert response.status_code == 400
    page = response.content.decode()
    assert message in error_summary_in(page)
    agent.refresh_from_db()
    assert unseal(agent.vault) == STORED
    for name, typed in rows.items():
        if name.endswith("_price"):
            assert f'value="{typed}"' in page  # back as typed
    for amount in STORED_AMOUNTS:
        assert amount not in page  # and never what is sealed


def test_limits_that_changed_meanwhile_are_not_overwritten(
    browser: Client, agent: AgentProfile
) -> None:
    data = as_shown(**{"limits-1-was": json.dumps(["SFO-SEA", "USD"]), "limits-1-remove": "on"})
    page = browser.post("/agents/hosted-a/edit/", data).content.decode()
    assert "The limits changed since this page was loaded" in error_summary_in(page)
    agent.refresh_from_db()
    assert unseal(agent.vault) == STORED


def test_more_rows_than_a_price_list_holds_is_a_clear_refusal(
    browser: Client, agent: AgentProfile
) -> None:
    data = as_shown(**{"limits-TOTAL_FORMS": "5000"})
    for n in range(3, 240):
        data |= {
            f"limits-{n}-item": f"item-{n}",
            f"limits-{n}-currency": "USD",
            f"limits-{n}-floor_price": "1",
            f"limits-{n}-ideal_price": "2",
        }
    response = browser.post("/agents/hosted-a/edit/", data)
    assert response.status_code == 400
    assert "at most 200" in error_summary_in(response.content.decode())
    agent.refresh_from_db()
    assert unseal(agent.vault) == STORED


@pytest.mark.parametrize(
    "was",
    ['["x", "ZZZ"]', '"ab"', '[null, ["USD"]]', "[" * 100_000, '{"a": 1}', "12", "null"],
)
def test_a_forged_row_name_is_refused_not_read(
    browser: Client, agent: AgentProfile, was: str
) -> None:
    data = as_shown(
        **{"limits-1-was": was, "limits-1-floor_price": "1", "limits-1-ideal_price": "2"}
    )
    response = browser.post("/agents/hosted-a/edit/", data)
    assert response.status_code == 400
    assert "The limits changed since this page was loaded" in error_summary_in(
        response.content.decode()
    )
    agent.refresh_from_db()
    assert unseal(agent.vault) == STORED


def test_after_an_error_the_stored_rows_still_say_what_they_are(
    browser: Client, agent: AgentProfile
) -> None:
    page = browser.post("/agents/hosted-a/edit/", as_shown(**{"limits-0-floor_price": "1"}))
    table = page.content.decode().split('id="price-rows"', 1)[1].split("</table>", 1)[0]
    cells = [row.split("</td>", 2)[:2] for row in table.split('<tr class="stored">')[1:]]
    shown = [(item.rsplit(">", 1)[-1], currency.rsplit(">", 1)[-1]) for item, currency in cells]
    assert shown == [("any item", "USD"), ("SFO-LAX", "USD"), ("any item", "EUR")]


def test_a_form_read_before_another_save_is_refused_not_merged(
    browser: Client, agent: AgentProfile
) -> None:
    page = browser.get("/agents/hosted-a/edit/").content.decode()
    version = page.split('name="limits_version" value="', 1)[1].split('"', 1)[0]
    first = as_shown(
        limits_version=version, **{"limits-0-floor_price": "290", "limits-0-ideal_price": "410"}
    )
    second = as_shown(
        limits_version=version, **{"limits-2-floor_price": "250", "limits-2-ideal_price": "360"}
    )
    assert browser.post("/agents/hosted-a/edit/", first).status_code == 302
    # The second tab was read before the first saved: its owner decided on limits that no
    # longer stand, so it is refused, to be reloaded, rather than saved over them.
    refused = browser.post("/agents/hosted-a/edit/", second)
    assert refused.status_code == 400
    assert "The limits changed since this page was loaded" in error_summary_in(
        refused.content.decode()
    )
    agent.refresh_from_db()
    assert unseal(agent.vault).row(None, "EUR") == STORED.limits[2]
    assert unseal(agent.vault).row(None, "USD").floor_price == 290


def new_rows(*numbers: int) -> dict[str, str]:
    """A new row typed in each of ``numbers``: item ``SFO-<n>`` in USD, 100+n to 200+n."""
    typed = {}
    for n in numbers:
        typed |= {
            f"limits-{n}-item": f"SFO-{n}",
            f"limits-{n}-currency": "USD",
            f"limits-{n}-floor_price": str(100 + n),
            f"limits-{n}-ideal_price": str(200 + n),
        }
    return typed


def test_add_a_row_returns_the_form_as_typed_with_one_more_empty_row(
    browser: Client, agent: AgentProfile
) -> None:
    # Half of row 1 typed, which a save would refuse: asking for room is not a save.
    typed = new_rows(3, 4, 5) | {"limits-0-floor_price": "290", "display_name": "Flights B"}
    response = browser.post("/agents/hosted-a/edit/", as_shown(**typed, add_row="1"))
    page = response.content.decode()
    assert response.status_code == 200
    assert error_summary_in(page) == ""
    assert '<p class="error">' not in page
    assert 'name="limits-TOTAL_FORMS" value="7"' in page
    assert 'name="limits-6-floor_price"' in page
    assert "limits-7-" not in page
    for name, value in typed.items():
        assert f'name="{name}" value="{value}"' in page
    for amount in STORED_AMOUNTS:
        assert amount not in page
    assert page.count('<tr class="stored">') == 3
    agent.refresh_from_db()
    assert agent.display_name != "Flights B"
    assert unseal(agent.vault) == STORED

    # The seventh row is saved as the others are.
    data = as_shown(**new_rows(3, 4, 5, 6), **{"limits-TOTAL_FORMS": "7"})
    assert browser.post("/agents/hosted-a/edit/", data).status_code == 302
    agent.refresh_from_db()
    added = [
        PriceLimits(f"SFO-{n}", "USD", Decimal(100 + n), Decimal(200 + n)) for n in range(3, 7)
    ]
    assert unseal(agent.vault).limits == (*STORED.limits, *added)


def test_a_new_agent_gets_rows_one_at_a_time_until_a_price_list_is_full(browser: Client) -> None:
    page = browser.post("/agents/new/", agent_form(add_row="1")).content.decode()
    assert 'name="limits-TOTAL_FORMS" value="4"' in page
    assert 'name="limits-0-floor_price" value="280"' in page
    assert 'name="add_row"' in page
    full = agent_form(add_row="1", **{"limits-TOTAL_FORMS": "5000"})
    response = browser.post("/agents/new/", full)
    page = response.content.decode()
    assert response.status_code == 200
    assert 'name="limits-TOTAL_FORMS" value="200"' in page
    assert 'name="add_row"' not in page
    assert not AgentProfile.objects.exists()
