"""In Chromium against the real ASGI server: a merchant's manager pauses its hosted agent
after confirming; a buyer's agent that opens a new session with it is refused 422
``merchant_paused``, while the session it opened before goes on; resumed, the agent takes
sessions again. Each page is screenshotted and judged by axe at both widths in both schemes."""

from __future__ import annotations

import json

import httpx
import pytest

from arbiter_app.models import Entry
from sessions_app.models import MemberRole
from tests.conftest import LiveServer, Worker
from tests.sessions_app.browser import chromium, look, sign_in
from tests.support.api import COMMITS
from tests.support.factories.accounts import PASSWORD, hosted_agent, member, merchant
from tests.support.factories.agents import Agent, make_agent
from tests.support.factories.sessions import ITEM, envelope_json
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def open_session(base: str, buyer: Agent, session_id: str) -> httpx.Response:
    payload = {
        "merchant_agent_id": "skyways-sfo",
        "item": ITEM,
        "currency": "USD",
        "constraints_commit": COMMITS["buyer"],
    }
    body = envelope_json(
        "session.open", payload, role="buyer", agent=buyer.agent_id, session_id=session_id
    )
    return httpx.post(
        f"{base}/oanp/v0.1/envelopes",
        content=json.dumps(body),
        headers={**buyer.headers, "Content-Type": "application/json"},
        timeout=30,
    )


def answered(session_id: str) -> bool:
    return Entry.objects.filter(session__session_id=session_id, sender_role="merchant").exists()


def test_a_paused_agents_new_sessions_are_refused_and_its_page_says_so(
    live_arbiter: LiveServer, celery_worker_process: Worker
) -> None:
    shop = merchant("skyways")
    hosted_agent(shop, "skyways-sfo")
    member("mia", MemberRole.MERCHANT_MANAGER, shop)
    buyer = make_agent("buyer-tw", "buyer")
    base = live_arbiter.url
    assert open_session(base, buyer, "sess-before").status_code == 201
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        sign_in(page, base, "mia", PASSWORD)
        page.goto(f"{base}/agents/skyways-sfo/")
        assert page.inner_text("#availability") == "taking sessions"
        page.click("#lifecycle a:has-text('Pause…')")
        page.wait_for_url(f"{base}/agents/skyways-sfo/pause/")
        assert "Are you sure?" in page.inner_text("main")
        look(page, "agent-pause-confirm")
        page.click("button:has-text('Pause')")
        page.wait_for_url(f"{base}/agents/skyways-sfo/")
        assert "Agent skyways-sfo is paused." in page.inner_text(".messages")
        assert page.inner_text("#availability") == "paused"
        look(page, "agent-paused")

        refused = open_session(base, buyer, "sess-after")
        assert refused.status_code == 422
        assert refused.headers["Content-Type"].startswith("application/problem+json")
        assert refused.json()["code"] == "merchant_paused"
        # The session opened before the pause is still there, and still live.
        before = httpx.get(
            f"{base}/oanp/v0.1/sessions/sess-before", headers=buyer.headers, timeout=30
        )
        assert before.status_code == 200
        assert before.json()["state"] in ("OPENING", "NEGOTIATING")

        page.goto(f"{base}/agents/")
        row = page.locator("tr", has_text="skyways-sfo")
        assert "paused" in row.inner_text()
        look(page, "agents-paused")

        page.goto(f"{base}/agents/skyways-sfo/")
        page.click("#lifecycle a:has-text('Resume…')")
        page.click("button:has-text('Resume')")
        page.wait_for_url(f"{base}/agents/skyways-sfo/")
        assert page.inner_text("#availability") == "taking sessions"
    assert open_session(base, buyer, "sess-after").status_code == 201
    # The hosted agent answers on the suite's worker; the test ends once it has, so that none
    # of its work (the runner key it issues on first need) lands after this test's database
    # was emptied, in a later test's.
    wait_for(lambda: answered("sess-before") and answered("sess-after"), 30)
