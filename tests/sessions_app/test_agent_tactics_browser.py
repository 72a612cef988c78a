"""In Chromium against the real ASGI server: a merchant tunes a hosted agent's strategy on the
agent form (only the chosen strategy's fields shown, the server's errors on its fields),
previews it against the reference buyers without saving, then saves it; without script the
form shows every strategy's group under its name."""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import pytest
from django.db import connection

from sessions_app.models import AgentProfile, MemberRole
from tests.conftest import LiveServer
from tests.sessions_app.browser import SCREENSHOTS, axe_violations, chromium, screenshot, sign_in
from tests.support.factories.accounts import PASSWORD, member, merchant

pytestmark = pytest.mark.django_db(transaction=True)

T = TypeVar("T")


def outside_the_browsers_loop(read: Callable[[], T]) -> T:
    """``read`` the database from a thread of its own: Playwright's thread runs an event
    loop, where Django refuses synchronous queries."""

    def run() -> T:
        try:
            return read()
        finally:
            connection.close()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(run).result()


def saved_agents() -> list[AgentProfile]:
    return outside_the_browsers_loop(lambda: list(AgentProfile.objects.all()))


def test_a_merchant_tunes_previews_and_saves_a_hosted_agent(live_arbiter: LiveServer) -> None:
    member("mia", MemberRole.MERCHANT_MANAGER, merchant("skyways"))
    base = live_arbiter.url
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        sign_in(page, base, "mia", PASSWORD)
        page.goto(f"{base}/agents/new/")
        # The reference strategy is chosen: its group alone shows, and no settle round.
        assert page.is_visible("#tactics-reference")
        assert not page.is_visible("#tactics-boulware")
        assert not page.is_visible("#id_settle_from_round")
        page.select_option("#id_strategy", "boulware")
        assert page.is_visible("#tactics-boulware")
        assert not page.is_visible("#tactics-reference")
        assert page.get_attribute("#id_boulware__exponent", "placeholder") == "0.2"

        page.fill("#id_agent_id", "skyways-boulware")
        page.fill("#id_limits-0-currency", "USD")
        page.fill("#id_limits-0-floor_price", "280")
        page.fill("#id_limits-0-ideal_price", "400")
        page.fill("#id_boulware__exponent", "50")
        page.fill("#id_boulware__inventory_pressure", "1.5")
        page.check("input[name=settle_when][value=round]")
        assert page.is_visible("#id_settle_from_round")
        page.click("button:has-text('Create agent')")
        group = page.locator("#tactics-boulware")
        assert group.is_visible()
        errors = group.locator(".error").all_inner_texts()
        assert errors == [
            "Exponent e is a number from 0.05 to 20.",
            "Inventory pressure is a number from 0 to 1.",
        ]
        assert "Say from which round it settles: 1 to 20." in page.inner_text(".settle")
        assert page.input_value("#id_boulware__exponent") == "50"  # kept, to be corrected
        assert page.input_value("#id_limits-0-floor_price") == "280"  # kept as typed
        screenshot(page, "agent-tactics-errors")
        assert saved_agents() == []

        page.fill("#id_boulware__exponent", "0.5")
        page.fill("#id_boulware__inventory_pressure", "0.2")
        page.fill("#id_settle_from_round", "4")
        page.click("button:has-text('Preview, without saving')")
        table = page.locator("#preview-runs")
        table.wait_for()
        rows = table.locator("tbody tr")
        assert rows.count() == 6
        assert [rows.nth(n).get_attribute("data-buyer") for n in range(6)] == [
            "reference",
            "boulware",
            "conceder",
            "linear",
            "tit-for-tat",
            "reference",
        ]
        # Pressure 0.2 on Boulware's ideal: it opens at 400 - 0.2 x 120 = 376.
        assert "merchant 376" in rows.nth(0).inner_text()
        assert "no deal" in rows.nth(5).locator(".outcome").inner_text()
        assert page.is_visible("#preview-limits")
        assert page.is_visible("#tactics-boulware")  # the form as it was posted
        screenshot(page, "agent-preview")
        assert saved_agents() == []

        # The limits typed before the preview are still there: saved as they stand.
        assert page.input_value("#id_limits-0-ideal_price") == "400"
        page.click("button:has-text('Create agent')")
        page.wait_for_url(f"{base}/agents/skyways-boulware/")
        [profile] = saved_agents()
        assert profile.parameters["exponent"] == "0.5"
        assert (profile.settle_when, profile.settle_from_round) == ("round", 4)
        page.goto(f"{base}/agents/skyways-boulware/edit/")
        assert page.input_value("#id_boulware__exponent") == "0.5"
        assert page.is_visible("#id_settle_from_round")
        screenshot(page, "agent-tactics-edit")

        # The agent page plays the agent as saved, as new sessions will meet it.
        page.goto(f"{base}/agents/skyways-boulware/")
        page.click("#preview-saved")
        saved_runs = page.locator("#preview-runs tbody tr")
        saved_runs.first.wait_for()
        assert saved_runs.count() == 6
        assert "merchant 376" in saved_runs.nth(0).inner_text()
        assert "as the agent is saved" in page.inner_text("#preview")
        screenshot(page, "agent-page-preview")

        # Without script, every strategy's group shows, each under its name.
        bare = browser.new_context(
            java_script_enabled=False, viewport={"width": 1280, "height": 900}
        )
        plain = bare.new_page()
        sign_in(plain, base, "mia", PASSWORD)
        plain.goto(f"{base}/agents/new/")
        for name in ("reference", "boulware", "conceder", "linear", "tit-for-tat"):
            assert plain.is_visible(f"#tactics-{name}")
        assert plain.is_visible("#id_settle_from_round")
        screenshot(plain, "agent-tactics-no-script")
        bare.close()


def test_the_preview_plays_an_agents_terms(live_arbiter: LiveServer) -> None:
    member("mia", MemberRole.MERCHANT_MANAGER, merchant("skyways"))
    base = live_arbiter.url
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        sign_in(page, base, "mia", PASSWORD)
        page.goto(f"{base}/agents/new/")
        page.fill("#id_agent_id", "skyways-terms")
        page.select_option("#id_strategy", "linear")
        page.fill("#id_limits-0-currency", "USD")
        page.fill("#id_limits-0-floor_price", "280")
        page.fill("#id_limits-0-ideal_price", "400")
        # Many days and no support are its ideal; it weighs the days little, support much.
        page.fill("#id_terms", "delivery_days=19..4@0.25\nsupport=none..standard@2.5")
        page.fill("#id_price_weight", "1.5")
        page.click("button:has-text('Preview, without saving')")
        rows = page.locator("#preview-runs tbody tr")
        rows.first.wait_for()
        assert rows.count() == 6
        assert "negotiate delivery_days, support" in page.inner_text("#preview-issues")
        # Each move carries its terms after the price, and the outcome the agreed ones.
        first = rows.nth(0).locator("ol.moves li").first.inner_text()
        assert first == (
            "buyer 272 · delivery_days 4, support standard → "
            "merchant 400 · delivery_days 19, support none"
        )
        outcomes = rows.locator(".outcome").all_inner_texts()
        for outcome in outcomes[:5]:
            assert re.fullmatch(r"agreed at [\d.]+ USD\s+delivery_days \d+, support none", outcome)
        assert outcomes[5].startswith("no deal")
        assert page.input_value("#id_terms").startswith("delivery_days=19..4")  # kept as typed
        assert axe_violations(page) == []
        screenshot(page, "agent-preview-terms")
        page.locator("#preview").screenshot(path=str(SCREENSHOTS / "agent-preview-terms-table.png"))
        assert saved_agents() == []
