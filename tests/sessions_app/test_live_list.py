"""The sessions list announces new sessions without a reload and never throws away the rows
the user loaded."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User

from sessions_app.models import MemberRole, Membership
from tests.conftest import LiveServer
from tests.sessions_app.browser import chromium, screenshot, sign_in
from tests.support.factories.agents import Agent, make_agent
from tests.support.factories.sessions import sfo_jfk_agents

pytestmark = pytest.mark.django_db(transaction=True)


def open_session(live: LiveServer, buyer: Agent, session_id: str) -> None:
    agent, _ = sfo_jfk_agents(tag=f"{session_id}-")
    opening = agent.open(
        session_id=session_id,
        merchant_agent_id="merchant-sfo",
        item={"route": "SFO-JFK"},
        currency="USD",
        now=datetime.now(UTC),
    )
    with live.client() as client:
        answer = client.post(
            "/oanp/v0.1/envelopes", content=json.dumps(opening), headers=buyer.headers
        )
    assert answer.status_code == 201, answer.text


def test_new_sessions_are_announced_and_loaded_rows_stay(live_arbiter: LiveServer) -> None:
    user = User.objects.create_user("operator", password="correct horse battery")
    Membership.objects.create(user=user, role=MemberRole.OPERATOR)
    buyer = make_agent("buyer-001", "buyer")
    make_agent("merchant-sfo", "merchant")
    # One more than a page and then some, so that "More sessions" has rows to load.
    for n in range(1, 53):
        open_session(live_arbiter, buyer, f"sess-{n:03}")
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 700})
        sign_in(page, live_arbiter.url, "operator", "correct horse battery")
        page.goto(f"{live_arbiter.url}/sessions/")
        page.wait_for_selector("#connection[data-state=live]")
        rows = page.locator("#session-rows tr[id^=row-]")
        assert rows.count() == 50
        page.click("text=More sessions")
        page.wait_for_selector("a:text('sess-001')")
        assert rows.count() == 52
        page.evaluate("window.loadedOnce = true")

        open_session(live_arbiter, buyer, "sess-new")
        page.wait_for_selector("#session-news:has-text('1 new session, show')")
        # The rows the user loaded are all still there, and nothing was re-rendered.
        assert rows.count() == 52
        assert page.locator("a:text('sess-001')").count() == 1
        assert page.locator("a:text('sess-new')").count() == 0
        assert page.evaluate("window.loadedOnce") is True
        screenshot(page, "sessions-announced")

        page.click("#session-news a:text('show')")
        page.wait_for_selector("#session-rows tr:first-child a:text('sess-new')")
        assert rows.count() == 50
