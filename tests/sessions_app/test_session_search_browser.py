"""In Chromium against the real ASGI server, as an operator: a saved view reproduces its
filters, and a bulk terminate ends exactly the selected live sessions. Each page is
screenshotted and judged by axe at 1440 and 390 px in both schemes."""

from __future__ import annotations

import pytest
from django.test import Client

from arbiter_app.models import Session
from sessions_app.models import MemberRole, SavedView
from tests.conftest import LiveServer
from tests.sessions_app.browser import chromium, look, sign_in
from tests.support.factories.accounts import PASSWORD, member
from tests.support.factories.agents import ClientNegotiation, make_agent

pytestmark = pytest.mark.django_db(transaction=True)

ROUTES = {"find-1": "SFO-JFK", "find-2": "LAX-ORD", "find-3": "LAX-ORD", "find-4": "SFO-LAX"}


def test_a_saved_view_reproduces_its_filters_and_a_bulk_terminate_ends_the_selected(
    live_arbiter: LiveServer,
) -> None:
    member("olga", MemberRole.OPERATOR)
    buyer, seller = make_agent("buyer-001", "buyer"), make_agent("merchant-sfo", "merchant")
    for n, (session_id, route) in enumerate(ROUTES.items()):
        ClientNegotiation(Client(), buyer, seller, session_id=session_id, tag=f"{n}-").open(
            item={"route": route}, response_window_s=3600
        )
    base = live_arbiter.url
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        sign_in(page, base, "olga", PASSWORD)
        page.goto(f"{base}/sessions/")
        look(page, "sessions-search")
        # On a phone, no filter in force: the filters fold and the sessions come first.
        page.set_viewport_size({"width": 390, "height": 844})
        assert not page.is_visible("#session-filters")
        page.set_viewport_size({"width": 1440, "height": 900})

        page.fill("#id_item", "lax")
        page.click("#session-filters button[type=submit]")
        page.wait_for_url("**/sessions/?*item=lax*")
        shown = page.locator("#sessions tr[data-session]")
        assert sorted(shown.evaluate_all("rows => rows.map(r => r.dataset.session)")) == [
            "find-2",
            "find-3",
            "find-4",
        ]
        page.fill("#id_view_name", "Out of LAX")
        page.check("#id_view_shared")
        page.click("#save-view button[type=submit]")
        page.wait_for_url("**/sessions/?item=lax*")

        page.goto(f"{base}/sessions/")
        page.click("nav.saved-views a:has-text('Out of LAX')")
        page.wait_for_url("**/sessions/?item=lax")
        assert page.input_value("#id_item") == "lax"
        assert page.locator("#sessions tr[data-session]").count() == 3
        page.set_viewport_size({"width": 390, "height": 844})
        # A filter in force keeps the filters open on a phone, to say what is listed.
        assert page.is_visible("#session-filters")
        page.set_viewport_size({"width": 1440, "height": 900})
        look(page, "sessions-view")

        page.check("input[name=session][value=find-2]")
        page.check("input[name=session][value=find-4]")
        page.click("#terminate-selected")
        page.wait_for_selector("#confirm-terminate")
        assert page.inner_text("#confirm-list").count("find-") == 2
        look(page, "sessions-terminate-confirm")
        page.fill("#id_detail", "end of the test")
        page.click("#confirm-terminate")
        page.wait_for_url(f"{base}/sessions/")
        assert "2 sessions terminated." in page.inner_text(".messages")
        page.goto(f"{base}/views/")
        look(page, "saved-views")
    assert SavedView.objects.get().query == "item=lax"
    phases = dict(Session.objects.values_list("session_id", "phase"))
    assert phases["find-2"] == phases["find-4"] == "CLOSED"
    assert phases["find-1"] != "CLOSED"
    assert phases["find-3"] != "CLOSED"
