"""An agent's page lists its latest deliveries, each leading to its attempts, and links to
the deliveries page filtered to the agent; a merchant sees only its own agents' deliveries."""

# ruff: noqa: F811 - the deliveries page's fixtures are imported to be these tests' parameters

from __future__ import annotations

from typing import Any

import pytest

from arbiter_app.models import AgentCallback, CallbackCursor, Handoff
from sessions_app.models import AgentProfile, MemberRole, Merchant
from sessions_app.views import agents as agents_view
from tests.sessions_app.test_deliveries_page import (  # noqa: F401 - fixtures
    LIST,
    acp_server,
    callback,
    failed,
    listed,
    operator,
    shop,
)
from tests.sessions_app.test_handoff_panel import SESSION
from tests.support.factories.accounts import member, merchant, signed_in

pytestmark = pytest.mark.django_db

AGENT_PAGE = "/agents/merchant-sfo/"


def section(page: Any) -> str:
    assert page.status_code == 200
    html: str = page.content.decode()
    return html.split('id="deliveries-section"', 1)[1].split("</section>", 1)[0]


@pytest.fixture
def rail_callback(failed: Handoff) -> CallbackCursor:
    """Another merchant's agent with a callback of its own on the same session."""
    AgentProfile.objects.create(merchant=merchant("rail"), agent_id="rail-1", mode="external")
    hook = AgentCallback.objects.create(
        agent_id="rail-1", role="merchant", url="https://rail.example/hook", secret_encrypted=b""
    )
    return CallbackCursor.objects.create(callback=hook, session=failed.session)


def test_the_agent_page_lists_its_deliveries_newest_first_with_their_attempts(
    failed: Handoff, callback: CallbackCursor, rail_callback: CallbackCursor, shop: Merchant
) -> None:
    alice = signed_in(member("alice", MemberRole.MERCHANT_MANAGER, shop))
    shown = section(alice.get(AGENT_PAGE))
    rows = shown.split("<tbody>", 1)[1].split("<tr>")[1:]
    assert len(rows) == 2
    # The callback came after the handoff: it is listed first.
    assert "https://hooks.example/oanp" in rows[0]
    assert f'href="/deliveries/callback/{callback.pk}/"' in rows[0]
    assert f"{failed.target.endpoint}/checkout_sessions" in rows[1]
    assert f'href="/deliveries/handoff/{failed.pk}/"' in rows[1]
    assert f'href="/sessions/{SESSION}/"' in rows[1]
    assert '<span class="badge bad">failed</span>' in rows[1]
    assert "<td>400 (rejected)</td>" in rows[1]
    assert "<td>1</td>" in rows[1]  # its one attempt
    assert "rail.example" not in shown
    assert 'type="checkbox"' not in shown
    assert 'href="/deliveries/?agent=merchant-sfo"' in shown


def test_the_page_shows_only_the_latest_few(
    failed: Handoff, callback: CallbackCursor, monkeypatch: pytest.MonkeyPatch, shop: Merchant
) -> None:
    monkeypatch.setattr(agents_view, "AGENT_PAGE_DELIVERIES", 1)
    shown = section(signed_in(member("alice", MemberRole.MERCHANT_MANAGER, shop)).get(AGENT_PAGE))
    assert "hooks.example" in shown
    assert "checkout_sessions" not in shown


def test_an_agent_without_deliveries_says_so(rail_callback: CallbackCursor) -> None:
    AgentProfile.objects.create(merchant=merchant("rail"), agent_id="rail-2", mode="external")
    shown = section(operator().get("/agents/rail-2/"))
    assert "No handoff or callback of this agent's sessions yet." in shown
    assert "<table" not in shown


def test_the_deliveries_page_filters_by_agent(
    failed: Handoff, callback: CallbackCursor, rail_callback: CallbackCursor, shop: Merchant
) -> None:
    olga = operator()
    sfo = listed(olga.get(LIST, {"agent": "merchant-sfo"}))
    assert sfo.count("<tr>") == 3
    assert "rail.example" not in sfo
    rail = listed(olga.get(LIST, {"agent": "rail-1", "kind": "callback"}))
    assert rail.count("<tr>") == 2
    assert "rail.example" in rail
    assert "No delivery matches." in listed(olga.get(LIST, {"agent": "rail-1", "kind": "handoff"}))
    page = olga.get(LIST, {"agent": "rail-1"}).content.decode()
    assert '<option value="rail-1" selected>rail-1</option>' in page


@pytest.mark.parametrize("agent", ["rail-1", "nobody", "x" * 500, "merchant-sfo "])
def test_an_agent_out_of_scope_is_a_clear_400(
    failed: Handoff, rail_callback: CallbackCursor, shop: Merchant, agent: str
) -> None:
    alice = signed_in(member("alice", MemberRole.MERCHANT_MANAGER, shop))
    page = alice.get(LIST, {"agent": agent})
    assert page.status_code == 400
    html = page.content.decode()
    assert 'id="filter-errors"' in html
    assert "is not an agent in your scope." in html
    assert 'id="deliveries"' not in html
    # Another merchant's agent page is not there at all.
    assert alice.get("/agents/rail-1/").status_code == 404
