"""Rows the sessions list shows are redrawn in place as their sessions move on, the rows
loaded with "More sessions" included, without taking the focus or announcing anything."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth.models import User

from sessions_app.models import MemberRole, Membership
from tests.conftest import LiveServer
from tests.sessions_app.browser import chromium, screenshot, sign_in
from tests.sessions_app.test_live_list import open_session
from tests.support.factories.agents import Agent, make_agent
from tests.support.factories.sessions import sfo_jfk_agents

pytestmark = pytest.mark.django_db(transaction=True)

WATCHED = "sess-watched"


def submit(live: LiveServer, key: Agent, envelope: dict[str, Any]) -> None:
    with live.client() as client:
        answer = client.post(
            "/oanp/v0.1/envelopes", content=json.dumps(envelope), headers=key.headers
        )
    assert answer.status_code == 201, answer.text


def test_a_shown_row_follows_its_session_and_older_rows_stay(live_arbiter: LiveServer) -> None:
    user = User.objects.create_user("watcher", password="correct horse battery")
    Membership.objects.create(user=user, role=MemberRole.OPERATOR)
    buyer_key = make_agent("buyer-001", "buyer")
    merchant_key = make_agent("merchant-sfo", "merchant")
    buyer, merchant = sfo_jfk_agents(tag=f"{WATCHED}-")
    opening = buyer.open(
        session_id=WATCHED,
        merchant_agent_id="merchant-sfo",
        item={"route": "SFO-JFK"},
        currency="USD",
        now=datetime.now(UTC),
    )
    submit(live_arbiter, buyer_key, opening)
    # Newer sessions besides, so that the watched one is among the older rows.
    for n in range(1, 52):
        open_session(live_arbiter, buyer_key, f"sess-{n:03}")
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        sign_in(page, live_arbiter.url, "watcher", "correct horse battery")
        page.goto(f"{live_arbiter.url}/sessions/")
        page.wait_for_selector("#connection[data-state=live]")
        rows = page.locator("#session-rows tr[id^=row-]")
        assert rows.count() == 50
        page.click("text=More sessions")
        page.wait_for_selector(f"a:text('{WATCHED}')")
        assert rows.count() == 52
        page.evaluate("window.loadedOnce = true")
        watched = page.locator(f"#session-rows tr[data-session='{WATCHED}']")
        outcome = watched.locator("td.outcome")
        assert outcome.inner_text() == "opened, merchant to acknowledge"
        link = watched.locator(f"a:text('{WATCHED}')")
        link.focus()

        # The merchant acknowledges and the buyer proposes: round 1, the merchant to move.
        now = datetime.now(UTC)
        for envelope in merchant.receive(opening, now):
            submit(live_arbiter, merchant_key, envelope)
            for answer in buyer.receive(envelope, now):
                submit(live_arbiter, buyer_key, answer)
        row = f"#session-rows tr[data-session='{WATCHED}']"
        # Cells are replaced, not edited: wait on the row's present cell, not an old handle.
        page.wait_for_selector(f"{row} td.outcome:text-is('round 1, merchant to move')")
        assert watched.locator(".state").inner_text() == "negotiating"

        # The buyer withdraws: the row says how the session ended.
        submit(live_arbiter, buyer_key, buyer.withdraw(datetime.now(UTC)))
        page.wait_for_selector(f"{row} td.outcome:text-is('closed: withdrawn by buyer')")
        assert watched.locator(".state").inner_text() == "closed"
        assert watched.get_attribute("data-live") is None
        screenshot(page, "sessions-row-updated")

        # In place: the same rows, in the same order, nothing reloaded, the focus kept.
        assert rows.count() == 52
        assert page.locator("#session-rows tr").nth(51).get_attribute("data-session") == WATCHED
        assert page.locator("a:text('sess-001')").count() == 1
        assert page.evaluate("window.loadedOnce") is True
        assert page.evaluate("document.activeElement.textContent") == WATCHED
        # Nothing opened, so the live region has nothing to say.
        assert page.locator("#session-news").inner_text() == ""
