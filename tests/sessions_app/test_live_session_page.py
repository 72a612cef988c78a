"""An operator watches a session live: each round arrives without a reload, verdicts are
announced, and the chart's table holds exactly the log's prices."""

from __future__ import annotations

import json
from collections import deque
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User

from oanp.wire.settlement import NEVER_SETTLE, SettlePolicy
from sessions_app.models import MemberRole, Membership
from tests.conftest import LiveServer
from tests.sessions_app.browser import chromium, screenshot, sign_in
from tests.support.factories.agents import Agent, make_agent
from tests.support.factories.sessions import sfo_jfk_agents

pytestmark = pytest.mark.django_db(transaction=True)

SESSION = "sess-live-page"


class Stepper:
    """Two reference agents; each call to :meth:`step` posts exactly one envelope."""

    def __init__(
        self,
        client: httpx.Client,
        buyer_key: Agent,
        merchant_key: Agent,
        buyer_settles: SettlePolicy = NEVER_SETTLE,
    ) -> None:
        self.client = client
        self.buyer, self.merchant = sfo_jfk_agents(tag="live-", buyer_settles=buyer_settles)
        self.keys = {"buyer": buyer_key, "merchant": merchant_key}
        self.outbox: deque[tuple[str, dict[str, Any]]] = deque()
        self.log: list[dict[str, Any]] = []

    def open(self) -> None:
        opening = self.buyer.open(
            session_id=SESSION,
            merchant_agent_id="merchant-sfo",
            item={"route": "SFO-JFK", "date": "2026-04-28"},
            currency="USD",
            now=datetime.now(UTC),
        )
        self.outbox.append(("buyer", opening))
        self.step()

    def step(self) -> str:
        role, envelope = self.outbox.popleft()
        answer = self.client.post(
            "/oanp/v0.1/envelopes", content=json.dumps(envelope), headers=self.keys[role].headers
        )
        assert answer.status_code == 201, answer.text
        body = answer.json()
        for entry in [body["entry"], *body["arbiter"]]:
            self.log.append(entry)
            now = datetime.now(UTC)
            self.outbox.extend(("buyer", e) for e in self.buyer.receive(entry["envelope"], now))
            self.outbox.extend(
                ("merchant", e) for e in self.merchant.receive(entry["envelope"], now)
            )
        return str(envelope["type"])


@pytest.fixture
def operator() -> tuple[str, str]:
    user = User.objects.create_user("operator", password="correct horse battery")
    Membership.objects.create(user=user, role=MemberRole.OPERATOR)
    return "operator", "correct horse battery"


def test_an_operator_watches_each_round_arrive(
    live_arbiter: LiveServer, operator: tuple[str, str]
) -> None:
    buyer_key = make_agent("buyer-001", "buyer")
    merchant_key = make_agent("merchant-sfo", "merchant")
    with live_arbiter.client() as client, chromium() as browser:
        run = Stepper(client, buyer_key, merchant_key)
        run.open()
        assert run.step() == "session.ack"
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        sign_in(page, live_arbiter.url, *operator)
        page.goto(f"{live_arbiter.url}/sessions/{SESSION}/")
        page.wait_for_selector("#connection[data-state=live]")
        page.evaluate("window.loadedOnce = true")
        screenshot(page, "session-opened")

        while run.step() != "offer.counter":
            pass
        page.wait_for_selector("#round-1 .verdict.fair")
        page.wait_for_function(
            "() => document.getElementById('announcer').textContent.includes('Round 1: fair')"
        )
        screenshot(page, "session-round-1")

        while run.outbox:
            run.step()
        page.wait_for_selector("#round-2 .verdict.fair")
        page.wait_for_selector("text=signature verifies")
        assert page.evaluate("window.loadedOnce") is True  # the page was never reloaded
        screenshot(page, "session-agreed")

        shown = page.eval_on_selector_all(
            "#rounds tbody tr",
            "rows => rows.map("
            "r => [...r.querySelectorAll('th, td')].map(c => c.textContent.trim()))",
        )
    verdicts = [
        e["envelope"]["payload"] for e in run.log if e["envelope"]["type"] == "round.verdict"
    ]
    logged = [
        [str(v["round"]), str(v["buyer_price"]), str(v["merchant_price"]), v["status"]]
        for v in verdicts
    ]
    assert [[row[0], row[1], row[2].split(" ")[0], row[4]] for row in shown] == logged


def test_a_settlement_shows_both_limits_and_the_midpoint(
    live_arbiter: LiveServer, operator: tuple[str, str]
) -> None:
    buyer_key = make_agent("buyer-001", "buyer")
    merchant_key = make_agent("merchant-sfo", "merchant")
    with live_arbiter.client() as client, chromium() as browser:
        run = Stepper(client, buyer_key, merchant_key, buyer_settles=SettlePolicy("round", 2))
        run.open()
        while run.outbox:
            run.step()
        assert run.log[-1]["envelope"]["type"] == "session.agree"
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        sign_in(page, live_arbiter.url, *operator)
        page.goto(f"{live_arbiter.url}/sessions/{SESSION}/")
        panel = page.locator("#settlement")
        panel.wait_for()
        page.wait_for_load_state("networkidle")  # the chart draws after the page loads
        text = " ".join(panel.inner_text().split())
        # The settlement's reveals feed the analytics: no reveal after the end is needed.
        zone = " ".join(page.locator(".zone-scale").inner_text().split())
        screenshot(page, "session-settled")
    assert "Buyer's ceiling 420" in text
    assert "Merchant's floor 280" in text
    assert "Midpoint 350" in text
    assert "settled at 350 USD" in text
    assert zone == "floor 280 Nash 350 · agreed 350 ceiling 420"


def test_an_operator_watches_a_session_end(
    live_arbiter: LiveServer, operator: tuple[str, str]
) -> None:
    """Terminated from another tab, the watched page turns its indicator off, says who ended
    it, and its timeline gains the close, each entry with its time and the gap before it."""
    buyer_key = make_agent("buyer-001", "buyer")
    merchant_key = make_agent("merchant-sfo", "merchant")
    with live_arbiter.client() as client, chromium() as browser:
        run = Stepper(client, buyer_key, merchant_key)
        run.open()
        while run.step() != "offer.counter":
            pass
        tabs = browser.new_context(viewport={"width": 1280, "height": 900})
        page = tabs.new_page()
        sign_in(page, live_arbiter.url, *operator)
        page.goto(f"{live_arbiter.url}/sessions/{SESSION}/")
        page.wait_for_selector("#connection[data-state=live]")
        page.wait_for_load_state("networkidle")  # the chart draws after the page loads
        # One round is drawn as a pair of bars, not two lone dots.
        assert page.evaluate("Chart.getChart('price-chart').config.type") == "bar"
        assert page.evaluate("Chart.getChart('price-chart').scales.y.min") == 0
        assert page.locator("#idle").inner_text().endswith("since the last entry")
        page.evaluate("window.loadedOnce = true")
        screenshot(page, "session-live-one-round")

        other = tabs.new_page()  # the same operator, signed in, in another tab
        other.goto(f"{live_arbiter.url}/sessions/{SESSION}/terminate/")
        other.fill("#id_detail", "reported abuse")
        other.get_by_role("button", name="Terminate session").click()
        other.wait_for_url(f"{live_arbiter.url}/sessions/{SESSION}/")

        page.wait_for_selector("#connection[data-state=closed]")
        assert page.locator("#connection").inner_text() == "ended"
        assert page.locator("#idle").count() == 0
        assert page.locator("#turn").inner_text() == "nobody: the session has ended"
        terminated = page.locator("#terminated-by")
        assert terminated.inner_text() == "operator, less than a minute ago"
        assert (terminated.locator("time").get_attribute("title") or "").endswith(" UTC")
        assert page.evaluate("window.loadedOnce") is True  # ended without a reload
        rows = page.locator("#timeline > li")
        texts = [" ".join(t.split()) for t in rows.all_inner_texts()]
        page.locator("#timeline > li").last.locator("summary").click()
        screenshot(page, "session-ended-live")
        shown_json = page.locator("#timeline > li").last.locator("pre").inner_text()
    logged = [e["envelope"]["type"] for e in run.log] + ["session.close"]
    assert len(texts) == len(logged)
    for index, (shown, kind) in enumerate(zip(texts, logged, strict=True)):
        assert f"#{index + 1} " in shown
        assert kind in shown
        assert (" after the previous entry" in shown) == (index > 0)
    verdict = next(t for t in texts if "round.verdict" in t)
    assert "fair opening_moves" in verdict
    assert "operator_terminated (reported abuse)" in texts[-1]
    assert json.loads(shown_json)["envelope"]["payload"]["reason"] == "operator_terminated"
