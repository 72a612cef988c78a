"""The sessions list's filters and cursor pages, as an operator uses them."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

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
def test_htmx_asks_for_rows_only(operator: Client) -> None:
    rows = operator.get("/sessions/", HTTP_HX_REQUEST="true").content.decode()
    assert "<tr>" in rows
    assert "<form" not in rows
