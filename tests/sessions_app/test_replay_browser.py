"""The replay page in Chromium against the real ASGI server: the keys, the slider and the
links step through the log with no request, the address follows the step, and at every step
the checklist and the standing prices on screen are what the offline auditor and
``oanp.audit.replay`` compute from the entries up to it; the page fits 1440 px and a 390 px phone,
in the light and the dark, and axe finds nothing wrong with it."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from playwright.sync_api import Page

from oanp.audit.invariants import audit_log
from oanp.audit.replay import replay
from sessions_app.models import MemberRole
from tests.conftest import LiveServer
from tests.sessions_app.browser import (
    SCHEMES,
    WIDTHS,
    Scheme,
    axe_violations,
    chromium,
    screenshot,
    sign_in,
)
from tests.support.factories.accounts import PASSWORD, member
from tests.support.factories.agents import ClientNegotiation, make_agent

pytestmark = pytest.mark.django_db(transaction=True)

SESSION = "sess-replay"
PATH = f"/sessions/{SESSION}/replay/"

#: The step on screen, read back from the page as a person sees it.
ON_SCREEN = """() => ({
  url: window.location.search,
  slider: document.getElementById("id_step").value,
  position: document.getElementById("replay-position").textContent,
  type: document.querySelector('[data-field="entry.type"]').textContent,
  buyer: document.getElementById("standing-buyer").textContent,
  merchant: document.getElementById("standing-merchant").textContent,
  checks: [...document.querySelectorAll("#replay-checks > li")].map((li) => ({
    invariant: li.dataset.invariant,
    status: li.querySelector(".check-status").textContent,
    problems: [...li.querySelectorAll(".problems > li")].map((p) => p.textContent),
    notes: [...li.querySelectorAll(".notes > li")].map((n) => n.textContent),
  })),
  verdicts: document.querySelectorAll("#replay-verdicts tbody tr:not(:has(.empty))").length,
  offers: document.querySelectorAll("#replay-offers tbody tr:not(:has(.empty))").length,
})"""


@pytest.fixture
def agreed(client: Client) -> dict[str, Any]:
    """An operator, ada, and an agreed session; its log and the arbiter's key set."""
    member("ada", MemberRole.OPERATOR)
    run = ClientNegotiation(
        client, make_agent("buyer-001", "buyer"), make_agent("merchant-sfo", "merchant"), SESSION
    )
    run.open()
    return {"log": run.finish(), "jwks": client.get("/.well-known/jwks.json").json()}


def expected(log: list[dict[str, Any]], keys: Any, k: int) -> dict[str, Any]:
    """What step k must show: the auditor's report and the replay of the first k entries."""
    frame = replay(log[:k], keys)[-1]
    standing = frame.as_json()["standing"]
    audit = audit_log(log[:k], keys)
    return {
        "url": f"?step={k}",
        "slider": str(k),
        "position": f"{k} of {len(log)}",
        "type": log[k - 1]["envelope"]["type"],
        **{role: "–" if price is None else str(price) for role, price in standing.items()},
        "checks": [
            {
                "invariant": r.invariant,
                "status": r.status.value,
                "problems": r.problems,
                "notes": r.notes,
            }
            for r in audit.results.values()
        ],
        "verdicts": len(frame.verdicts),
        "offers": len(frame.offers),
    }


def open_replay(page: Page, base: str, query: str = "") -> list[str]:
    """Go to the replay; the requests made from then on (stepping must make none)."""
    requests: list[str] = []
    page.goto(f"{base}{PATH}{query}")
    page.wait_for_selector("#replay-go", state="hidden")  # the script has taken over
    page.on("request", lambda request: requests.append(request.url))
    return requests


def test_keys_step_through_the_log_as_the_auditor_reads_it(
    agreed: dict[str, Any], live_arbiter: LiveServer
) -> None:
    log, keys, base = agreed["log"], agreed["jwks"], live_arbiter.url
    errors: list[str] = []
    with chromium() as browser:
        page = browser.new_page(viewport=WIDTHS["1440"])
        page.on("pageerror", lambda error: errors.append(str(error)))
        sign_in(page, base, "ada", PASSWORD)
        requests = open_replay(page, base)
        assert page.evaluate(ON_SCREEN) == {**expected(log, keys, 1), "url": ""}
        for k in range(2, len(log) + 1):
            page.keyboard.press("ArrowRight")
            assert page.evaluate(ON_SCREEN) == expected(log, keys, k), f"step {k}"
        page.keyboard.press("ArrowRight")  # past the end: stays there
        assert page.evaluate(ON_SCREEN) == expected(log, keys, len(log))
        for k in range(len(log) - 1, 0, -1):
            page.keyboard.press("ArrowLeft")
            assert page.evaluate(ON_SCREEN) == expected(log, keys, k), f"back to step {k}"
        page.keyboard.press("End")
        assert page.evaluate(ON_SCREEN) == expected(log, keys, len(log))
        page.keyboard.press("Home")
        assert page.evaluate(ON_SCREEN) == expected(log, keys, 1)

        page.click("#replay-next")
        page.click("#replay-next")
        assert page.evaluate(ON_SCREEN) == expected(log, keys, 3)
        page.click("#replay-prev")
        assert page.evaluate(ON_SCREEN) == expected(log, keys, 2)
        # The slider's own keys move it, and the page with it, one step each.
        page.focus("#id_step")
        page.keyboard.press("ArrowRight")
        assert page.evaluate(ON_SCREEN) == expected(log, keys, 3)
        page.fill("#id_step", "7")
        assert page.evaluate(ON_SCREEN) == expected(log, keys, 7)
        assert requests == [], "stepping asked the server"

        # The address is the step: opened again, it shows that step, drawn by the server.
        page.reload()
        assert page.evaluate(ON_SCREEN) == expected(log, keys, 7)
        with_script_off = browser.new_context(java_script_enabled=False, viewport=WIDTHS["1440"])
        bare = with_script_off.new_page()
        sign_in(bare, base, "ada", PASSWORD)
        bare.goto(f"{base}{PATH}?step=7")
        assert bare.evaluate(ON_SCREEN) == expected(log, keys, 7)
        bare.click("#replay-next")
        bare.wait_for_url(f"{base}{PATH}?step=8")
        with_script_off.close()
    assert errors == []


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("size", WIDTHS)
def test_the_replay_fits_the_screen_in_either_scheme(
    agreed: dict[str, Any], live_arbiter: LiveServer, size: str, scheme: Scheme
) -> None:
    base = live_arbiter.url
    with chromium() as browser:
        context = browser.new_context(viewport=WIDTHS[size], color_scheme=scheme)
        page = context.new_page()
        sign_in(page, base, "ada", PASSWORD)
        # Step 4: the merchant's counter, whose verdict the log still owes (I5 fails there).
        open_replay(page, base, "?step=4")
        wide = page.evaluate("document.documentElement.scrollWidth")
        assert wide <= page.evaluate("window.innerWidth"), f"{wide} px wide"
        assert page.locator("#replay-chart").is_visible()
        assert page.locator("#replay-checks .check.fail").count() == 1
        screenshot(page, f"replay-{size}-{scheme}")
        page.keyboard.press("End")
        assert page.evaluate("document.documentElement.scrollWidth") <= WIDTHS[size]["width"]
        screenshot(page, f"replay-{size}-{scheme}-end")
        violations = axe_violations(page)
        assert not violations, violations
        context.close()
