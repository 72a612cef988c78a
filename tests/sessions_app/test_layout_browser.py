"""In Chromium against the real ASGI server: every page fits a 390 px phone, where wide tables
scroll in their own box and the navigation folds into a menu; buttons keep WCAG AA contrast
in the dark scheme; session times read "… ago" with the exact UTC time on hover."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from playwright.sync_api import Page

from sessions_app.models import MemberRole
from tests.conftest import LiveServer
from tests.sessions_app.browser import chromium, screenshot, sign_in
from tests.sessions_app.test_styles import contrast
from tests.support.factories.accounts import PASSWORD, hosted_agent, member, merchant
from tests.support.factories.agents import ClientNegotiation, make_agent

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = {"width": 390, "height": 844}
#: Every page of the navigation, and one of each kind behind it (an admin sees them all).
PAGES = {
    "overview": "/",
    "sessions": "/sessions/",
    "session": "/sessions/sess-agreed/",
    "agents": "/agents/",
    "agent": "/agents/skyways-sfo/",
    "deliveries": "/deliveries/",
    "keys": "/keys/",
    "exports": "/exports/",
    "audit": "/audit/",
}
#: Pages with filled buttons of both kinds: the accent (Sign out, …) and the danger one.
DARK_PAGES = {
    "overview": "/",
    "session": "/sessions/sess-agreed/",
    "agent": "/agents/skyways-sfo/",
    "rotate": "/keys/rotate/?alg=ES256",
}
#: The colours every visible filled button is drawn with: its text, and its fill, as hex.
BUTTON_COLOURS = """() => [...document.querySelectorAll("button")]
  .filter((b) => b.checkVisibility())
  .map((b) => [getComputedStyle(b), b.textContent.trim()])
  .map(([style, label]) => [style.color, style.backgroundColor, label])
  .filter(([, fill]) => fill !== "rgba(0, 0, 0, 0)")"""


@pytest.fixture
def dashboard(client: Client) -> None:
    """An admin, ada; a hosted agent of skyways; an agreed session with an external merchant."""
    member("ada", MemberRole.ADMIN)
    hosted_agent(merchant("skyways"), "skyways-sfo")
    buyer, seller = make_agent("buyer-001", "buyer"), make_agent("merchant-sfo", "merchant")
    negotiation = ClientNegotiation(client, buyer, seller, session_id="sess-agreed", tag="a-")
    negotiation.open()
    negotiation.finish()


def hex_of(css_colour: str) -> str:
    r, g, b = (int(n) for n in re.findall(r"\d+", css_colour)[:3])
    return f"#{r:02x}{g:02x}{b:02x}"


def page_width(page: Page) -> int:
    return int(page.evaluate("document.documentElement.scrollWidth"))


#: What sticks out past the right edge, outside any box of its own that scrolls: to say what
#: made a page too wide.
STICKING_OUT = """(width) => [...document.querySelectorAll("body *")]
  .filter((e) => e.getBoundingClientRect().right > width && e.checkVisibility())
  .filter((e) => !e.parentElement.closest("table, pre"))
  .filter((e) => ![...e.children].some((c) => c.getBoundingClientRect().right > width))
  .map((e) => `${e.tagName}#${e.id}.${e.className} ${e.getBoundingClientRect().right}`)
  .slice(0, 5)"""


@pytest.mark.usefixtures("dashboard")
def test_every_page_fits_a_phone_with_its_menu_folded(live_arbiter: LiveServer) -> None:
    base = live_arbiter.url
    with chromium() as browser:
        page = browser.new_page(viewport=PHONE)
        sign_in(page, base, "ada", PASSWORD)
        for name, path in PAGES.items():
            page.goto(f"{base}{path}")
            assert page_width(page) <= PHONE["width"], (name, page.evaluate(STICKING_OUT, 390))
            screenshot(page, f"phone-{name}")

        page.goto(f"{base}/sessions/")
        table = page.locator("main table").first
        scrolls = "t => t.scrollWidth > t.clientWidth && getComputedStyle(t).overflowX === 'auto'"
        assert table.evaluate(scrolls), "the list's table should scroll in its own box"

        sessions = page.locator("nav[aria-label=Main] >> text=Sessions")
        assert not sessions.is_visible()
        page.click("summary:has-text('Menu')")
        assert sessions.is_visible()
        assert page_width(page) <= PHONE["width"]
        screenshot(page, "phone-menu-open")
        sessions.click()
        page.wait_for_url(f"{base}/sessions/")


@pytest.mark.usefixtures("dashboard")
def test_a_wide_screen_shows_the_navigation_without_a_menu(live_arbiter: LiveServer) -> None:
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        sign_in(page, live_arbiter.url, "ada", PASSWORD)
        assert not page.locator("summary:has-text('Menu')").is_visible()
        for link in ("Overview", "Sessions", "Agents", "Deliveries", "Keys", "Exports", "Audit"):
            assert page.locator(f"nav[aria-label=Main] >> text={link}").is_visible(), link


@pytest.mark.usefixtures("dashboard")
def test_filled_buttons_meet_aa_contrast_in_the_dark(live_arbiter: LiveServer) -> None:
    base = live_arbiter.url
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900}, color_scheme="dark")
        sign_in(page, base, "ada", PASSWORD)
        fills: set[str] = set()
        for name, path in DARK_PAGES.items():
            page.goto(f"{base}{path}")
            for text, fill, label in page.evaluate(BUTTON_COLOURS):
                ratio = contrast(hex_of(text), hex_of(fill))
                assert ratio >= 4.5, f"{label!r} on {name}: {ratio:.2f}:1"
                fills.add(hex_of(fill))
            screenshot(page, f"dark-{name}")
        # Both fills were judged: the accent (Sign out, …) and the danger (Rotate to a new key).
        assert {"#7ab0f0", "#ff8a80"} <= fills


@pytest.mark.usefixtures("dashboard")
def test_session_times_read_how_long_ago_with_the_exact_time_on_hover(
    live_arbiter: LiveServer,
) -> None:
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        sign_in(page, live_arbiter.url, "ada", PASSWORD)
        opened = page.locator("main tr:has-text('sess-agreed') time")
        assert opened.inner_text() == "less than a minute ago"
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", opened.get_attribute("title"))
        # An hour on, the same element says so without a reload: the script's minutely update.
        page.clock.install()
        page.reload()
        page.clock.fast_forward(61 * 60 * 1000)
        assert opened.inner_text() == "1 hour ago"
