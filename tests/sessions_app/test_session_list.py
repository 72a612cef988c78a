"""The sessions list's filters and cursor pages, as an operator uses them, and its FilterSet
on its own: what each filter lets through, which values it refuses, whose sessions it sees."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.http import QueryDict
from django.test import Client
from django.utils import timezone

from arbiter_app.models import Session
from sessions_app import selectors
from sessions_app.filters import SessionFilter
from sessions_app.models import AgentProfile, Membership, Merchant, Role
from sessions_app.views import sessions as views
from tests.support.factories.agents import ClientNegotiation, make_agent, post

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator() -> Client:
    user = User.objects.create_user("operator", password="pw")
    Membership.objects.create(user=user, role=Role.OPERATOR)
    browser = Client(HTTP_HOST="localhost")
    browser.force_login(user)
    return browser


@pytest.fixture
def sessions(client: Client) -> None:
    """sess-agreed (fair, agreed), sess-reneged (violated), sess-open (no verdict yet)."""
    buyer = make_agent("buyer-001", "buyer")
    merchant = make_agent("merchant-sfo", "merchant")
    shop = Merchant.objects.create(name="Shop", slug="shop")
    AgentProfile.objects.create(merchant=shop, agent_id="merchant-sfo", mode="external")
    agreed = ClientNegotiation(client, buyer, merchant, session_id="sess-agreed", tag="a-")
    agreed.open()
    agreed.finish()
    reneged = ClientNegotiation(client, buyer, merchant, session_id="sess-reneged", tag="r-")
    reneged.open()
    reneged.run_until("offer.propose", 340)
    key, propose = reneged.peek()
    lowered = copy.deepcopy(propose)
    lowered["payload"]["price"] = 300
    assert post(client, key, lowered).status_code == 201
    ClientNegotiation(client, buyer, merchant, session_id="sess-open", tag="o-").open()


def listed(browser: Client, query: str) -> set[str]:
    page = browser.get(f"/sessions/?{query}").content.decode()
    return {name for name in ("sess-agreed", "sess-reneged", "sess-open") if name in page}


@pytest.mark.usefixtures("sessions")
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", {"sess-agreed", "sess-reneged", "sess-open"}),
        ("state=AGREED", {"sess-agreed"}),
        ("violation=yes", {"sess-reneged"}),
        ("verdict=violated", {"sess-reneged"}),
        ("verdict=fair", {"sess-agreed", "sess-reneged"}),
        ("q=open", {"sess-open"}),
        ("merchant=shop", {"sess-agreed", "sess-reneged", "sess-open"}),
        ("merchant=elsewhere", set()),
        ("agent=merchant-sfo&state=CLOSED", {"sess-reneged"}),
        ("range=1h", {"sess-agreed", "sess-reneged", "sess-open"}),
        (
            "state=bogus&verdict=nonsense&range=forever",
            {"sess-agreed", "sess-reneged", "sess-open"},
        ),
    ],
)
def test_filters(operator: Client, query: str, expected: set[str]) -> None:
    assert listed(operator, query) == expected


@pytest.mark.usefixtures("sessions")
def test_cursor_pages_walk_every_session_once(operator: Client, monkeypatch: Any) -> None:
    monkeypatch.setattr(views, "PAGE_SIZE", 2)
    first = operator.get("/sessions/")
    assert first.context["next_cursor"] is not None
    second = operator.get(f"/sessions/?before={first.context['next_cursor']}")
    assert second.context["next_cursor"] is None
    seen = [s.session_id for s in first.context["sessions"]] + [
        s.session_id for s in second.context["sessions"]
    ]
    assert sorted(seen) == ["sess-agreed", "sess-open", "sess-reneged"]


@pytest.mark.usefixtures("sessions")
@pytest.mark.parametrize("cursor", ["²", "-1", "1e3", "x"])
def test_a_cursor_that_is_not_a_row_number_starts_from_the_top(
    operator: Client, cursor: str
) -> None:
    """ "²" passes str.isdigit but not int(): it must not be a 500."""
    page = operator.get("/sessions/", {"before": cursor})
    assert page.status_code == 200
    assert {s.session_id for s in page.context["sessions"]} == {
        "sess-agreed",
        "sess-open",
        "sess-reneged",
    }


@pytest.mark.usefixtures("sessions")
def test_htmx_asks_for_rows_only(operator: Client) -> None:
    rows = operator.get("/sessions/", HTTP_HX_REQUEST="true").content.decode()
    assert "<tr>" in rows
    assert "<form" not in rows


# The FilterSet on its own -------------------------------------------------------------------

EVERY = {"sess-agreed", "sess-reneged", "sess-open", "sess-elsewhere"}


@pytest.fixture
def elsewhere(client: Client, sessions: None) -> None:
    """Beside the three: sess-elsewhere, opened 90 minutes ago by buyer-002 with merchant-lax,
    the agent of another merchant ("elsewhere")."""
    other = Merchant.objects.create(name="Elsewhere", slug="elsewhere")
    AgentProfile.objects.create(merchant=other, agent_id="merchant-lax", mode="external")
    buyer = make_agent("buyer-002", "buyer")
    lax = make_agent("merchant-lax", "merchant")
    ClientNegotiation(client, buyer, lax, session_id="sess-elsewhere", tag="e-").open()
    Session.objects.filter(session_id="sess-elsewhere").update(
        opened_at=timezone.now() - timedelta(minutes=90)
    )


def scope_of(role: str, merchant: str | None = None) -> selectors.Scope:
    user = User.objects.create_user(f"{role}-{merchant}", password="pw")
    Membership.objects.create(
        user=user,
        role=role,
        merchant=None if merchant is None else Merchant.objects.get(slug=merchant),
    )
    found = selectors.scope_of(user)
    assert found is not None
    return found


def filtered(scope: selectors.Scope, query: str) -> SessionFilter:
    return selectors.session_filter(scope, QueryDict(query))


def through(found: SessionFilter) -> set[str]:
    return set(found.qs.values_list("session_id", flat=True))


@pytest.mark.usefixtures("elsewhere")
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", EVERY),
        ("state=AGREED", {"sess-agreed"}),
        ("state=CLOSED", {"sess-reneged"}),
        ("state=OPENING", {"sess-open", "sess-elsewhere"}),
        ("merchant=shop", {"sess-agreed", "sess-reneged", "sess-open"}),
        ("merchant=elsewhere", {"sess-elsewhere"}),
        ("merchant=nobody", set()),
        # Slugs are matched as given: blanks around one name no merchant.
        ("merchant=%20shop", set()),
        ("agent=merchant-lax", {"sess-elsewhere"}),
        ("agent=buyer-002", {"sess-elsewhere"}),
        ("agent=%20merchant-sfo%20", {"sess-agreed", "sess-reneged", "sess-open"}),
        ("verdict=fair", {"sess-agreed", "sess-reneged"}),
        ("verdict=violated", {"sess-reneged"}),
        ("verdict=fair_but_stuck", set()),
        ("violation=yes", {"sess-reneged"}),
        ("range=1h", {"sess-agreed", "sess-reneged", "sess-open"}),
        ("range=24h", EVERY),
        ("q=OPEN", {"sess-open"}),
        ("q=%20else%20", {"sess-elsewhere"}),
        ("agent=merchant-sfo&verdict=fair&state=AGREED", {"sess-agreed"}),
        ("state=OPENING&range=1h", {"sess-open"}),
    ],
)
def test_each_filter_narrows_as_it_should(query: str, expected: set[str]) -> None:
    found = filtered(scope_of(Role.OPERATOR), query)
    assert found.is_valid(), found.errors
    assert through(found) == expected


@pytest.mark.usefixtures("elsewhere")
@pytest.mark.parametrize(
    ("query", "refused", "expected"),
    [
        ("state=bogus", {"state"}, EVERY),
        # Stored sessions are never EVALUATING, so it is no choice.
        ("state=EVALUATING", {"state"}, EVERY),
        ("state=agreed", {"state"}, EVERY),
        ("verdict=nonsense", {"verdict"}, EVERY),
        ("violation=no", {"violation"}, EVERY),
        ("range=forever", {"range"}, EVERY),
        # A bad value leaves its own filter out; the others still apply.
        ("state=bogus&verdict=violated", {"state"}, {"sess-reneged"}),
        ("range=1y&verdict=nonsense&q=elsewhere", {"range", "verdict"}, {"sess-elsewhere"}),
    ],
)
def test_a_bad_value_is_reported_and_left_out(
    query: str, refused: set[str], expected: set[str]
) -> None:
    found = filtered(scope_of(Role.OPERATOR), query)
    assert not found.is_valid()
    assert set(found.errors) == refused
    assert through(found) == expected


@pytest.mark.usefixtures("elsewhere")
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", {"sess-agreed", "sess-reneged", "sess-open"}),
        # The merchant filter is not a merchant member's: another tenant's slug is ignored.
        ("merchant=elsewhere", {"sess-agreed", "sess-reneged", "sess-open"}),
        ("agent=merchant-lax", set()),
        ("q=elsewhere", set()),
        ("state=OPENING", {"sess-open"}),
    ],
)
def test_a_merchant_member_filters_only_its_own_sessions(query: str, expected: set[str]) -> None:
    found = filtered(scope_of(Role.MERCHANT, "shop"), query)
    assert "merchant" not in found.form.fields
    assert found.is_valid(), found.errors
    assert through(found) == expected
