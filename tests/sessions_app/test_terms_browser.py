"""A multi-issue session's page in Chromium against the real ASGI server, after both sides
revealed their weights: the terms of every offer with the concessions marked in a way that is
seen and heard, the agreed terms, the Pareto frontier drawn with the agreement on it; the page
fits 1440 px and a 390 px phone, in the light and the dark, and axe finds nothing wrong."""

from __future__ import annotations

import pytest
from django.test import Client

from sessions_app.models import MemberRole
from tests.conftest import LiveServer
from tests.sessions_app.browser import (
    SCHEMES,
    SCREENSHOTS,
    WIDTHS,
    Scheme,
    axe_violations,
    chromium,
    screenshot,
    sign_in,
)
from tests.support.factories.accounts import PASSWORD, member
from tests.support.factories.agents import ClientNegotiation, make_agent, post
from tests.support.factories.terms import ISSUES, terms_agents

pytestmark = pytest.mark.django_db(transaction=True)

SESSION = "sess-terms"
PATH = f"/sessions/{SESSION}/"


@pytest.fixture
def revealed(client: Client) -> ClientNegotiation:
    """An operator, ada, and an agreed terms session both sides revealed after the end."""
    member("ada", MemberRole.OPERATOR)
    run = ClientNegotiation(
        client,
        make_agent("buyer-001", "buyer"),
        make_agent("merchant-sfo", "merchant"),
        SESSION,
        agents=terms_agents(),
    )
    run.open(issues=ISSUES)
    run.finish()
    for key, agent in ((run.buyer_key, run.buyer), (run.merchant_key, run.merchant)):
        answer = post(client, key, agent.reveal(), path=f"/oanp/v0.1/sessions/{SESSION}/reveal")
        assert answer.status_code == 200, answer.content
    return run


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("size", WIDTHS)
def test_the_terms_and_the_frontier_show_in_either_scheme(
    revealed: ClientNegotiation, live_arbiter: LiveServer, size: str, scheme: Scheme
) -> None:
    base = live_arbiter.url
    offers = [e for e in revealed.log() if e["envelope"]["type"].startswith("offer.")]
    errors: list[str] = []
    with chromium() as browser:
        context = browser.new_context(viewport=WIDTHS[size], color_scheme=scheme)
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        sign_in(page, base, "ada", PASSWORD)
        # Once its socket opens, the page fetches its body again to catch up: judge the body
        # that stays, not the one about to be swapped out.
        page.add_init_script(
            "document.addEventListener('htmx:afterSettle', () => { window.caughtUp = true; });"
        )
        page.goto(f"{base}{PATH}")
        page.wait_for_function("() => window.caughtUp === true")
        assert page.locator("#terms tbody tr").count() == len(offers)
        marked = page.locator("#terms td.conceded")
        assert marked.count() > 0
        # Each mark is seen (the arrow) and heard (the words), not told by colour alone.
        first = marked.first
        assert first.locator(".conceded-mark").is_visible()
        assert "moved towards the other side" in first.inner_text()
        assert page.locator("#final-terms dt").all_inner_texts() == ["delivery_days", "support"]
        page.wait_for_function(
            "() => { const c = document.getElementById('frontier-chart');"
            " return c && Chart.getChart(c) !== undefined; }"
        )
        drawn = page.evaluate(
            "() => Chart.getChart(document.getElementById('frontier-chart'))"
            ".data.datasets.map((d) => [d.label, d.data.length])"
        )
        assert drawn[0][0] == "Pareto frontier"
        assert drawn[0][1] > 10
        assert ["Agreement", 1] in drawn
        assert page.locator("#frontier-chart").is_visible()
        assert page.locator("#frontier-distance").inner_text() != "–"
        wide = page.evaluate("document.documentElement.scrollWidth")
        assert wide <= page.evaluate("window.innerWidth"), f"{wide} px wide"
        screenshot(page, f"terms-{size}-{scheme}")
        # The two new parts up close, where a whole phone page shrinks them past reading.
        for part in ("terms", "trade-offs"):
            page.locator(f"#{part}").screenshot(
                path=str(SCREENSHOTS / f"terms-{size}-{scheme}-{part}.png")
            )
        violations = axe_violations(page)
        assert not violations, violations
        context.close()
    assert errors == []


def test_the_replay_shows_the_standing_terms_at_each_step(
    revealed: ClientNegotiation, live_arbiter: LiveServer
) -> None:
    base = live_arbiter.url
    log = revealed.log()
    errors: list[str] = []
    with chromium() as browser:
        page = browser.new_page(viewport=WIDTHS["1440"])
        page.on("pageerror", lambda error: errors.append(str(error)))
        sign_in(page, base, "ada", PASSWORD)
        page.goto(f"{base}{PATH}replay/")
        page.wait_for_selector("#replay-go", state="hidden")
        standing: dict[str, dict[str, object]] = {}
        for k, entry in enumerate(log, start=1):
            if k > 1:
                page.keyboard.press("ArrowRight")
            envelope = entry["envelope"]
            if envelope["type"].startswith("offer."):
                standing[envelope["sender"]["role"]] = envelope["payload"]["terms"]
            for role in ("buyer", "merchant"):
                terms = standing.get(role)
                words = ", ".join(f"{n}: {v}" for n, v in terms.items()) if terms else "–"
                assert page.inner_text(f"#standing-{role}-terms") == words, (k, role)
        assert page.inner_text("#issues-open") == "0"
    assert errors == []
