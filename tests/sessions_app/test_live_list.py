"""The sessions list shows new sessions without a reload, and holds still while paused."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User

from sessions_app.models import Membership, Role
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


def test_new_sessions_appear_live_unless_paused(live_arbiter: LiveServer) -> None:
    user = User.objects.create_user("operator", password="correct horse battery")
    Membership.objects.create(user=user, role=Role.OPERATOR)
    buyer = make_agent("buyer-001", "buyer")
    make_agent("merchant-sfo", "merchant")
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 700})
        sign_in(page, live_arbiter.url, "operator", "correct horse battery")
        page.goto(f"{live_arbiter.url}/sessions/")
        page.wait_for_selector("#connection[data-state=live]")
        page.wait_for_selector("tr.empty-row")
        page.evaluate("window.loadedOnce = true")

        open_session(live_arbiter, buyer, "sess-first")
        page.wait_for_selector("a:text('sess-first')")
        screenshot(page, "sessions-live")

        page.click("#pause")
        open_session(live_arbiter, buyer, "sess-while-paused")
        page.wait_for_selector("#pause[data-pending]")
        assert page.locator("a:text('sess-while-paused')").count() == 0
        screenshot(page, "sessions-paused")

        page.click("#pause")
        page.wait_for_selector("a:text('sess-while-paused')")
        assert page.evaluate("window.loadedOnce") is True
