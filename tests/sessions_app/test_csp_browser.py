"""In Chromium against the real ASGI server: every page family, the accessibility suite's and
Django's admin, comes with a strict Content-Security-Policy (this origin only, nothing inline,
no framing) and works under it: the browser reports no violation, the charts draw, the live
pages connect their WebSockets, the zone of agreement keeps its proportions and the ACP
secret shown once is selected on a click. So does the page of a server without its database.
Screenshots in var/screenshots (csp-*)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
from django.contrib.auth.models import User
from django.test import Client
from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, Page, Response

from arbiter_app.models import Session
from sessions_app.vault import seal_text
from sessions_app.views.agents import ACP_SECRET
from tests.conftest import LiveServer, serve
from tests.sessions_app.browser import SCREENSHOTS, chromium, screenshot, sign_in
from tests.sessions_app.test_accessibility_browser import (  # noqa: F401 - dashboard is the fixture
    ADMIN,
    CASES,
    Case,
    dashboard,
)
from tests.support.factories.accounts import PASSWORD
from tests.support.factories.agents import ClientNegotiation, make_agent, post

pytestmark = pytest.mark.django_db

T = TypeVar("T")
#: A superuser, for Django's admin.
ROOT = "root"
#: An agreed session both sides revealed their limits after: the zone of agreement is drawn.
REVEALED = "sess-revealed"
#: What a page's policy must say: nothing but this origin, nothing inline, no framing.
STRICT = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'none'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
}
#: Each violation the page meets, from the event the browser fires for it. Added to every
#: document before its own scripts run; the console says it too, across navigations.
LISTEN = """window.cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.cspViolations.push(event.effectiveDirective + " refused " + (event.blockedURI || "?") +
    " at " + event.sourceFile + ":" + event.lineNumber + " " + JSON.stringify(event.sample));
});"""
#: A webhook secret the agent page shows once.
SECRET = "whsec_c2VjcmV0IHNob3duIG9uY2U="
#: Pages whose screenshots are worth a look (var/screenshots/csp-<case>.png).
SHOWN = {"overview", "session-revealed", "replay", "agent", "csrf-refused", "admin-session"}


def forged_sign_in(page: Page) -> None:
    """A sign-in whose form lost its CSRF token: Django's refusal page."""
    page.fill("#id_username", ADMIN)
    page.fill("#id_password", PASSWORD)
    page.evaluate("document.querySelector('[name=csrfmiddlewaretoken]').value = 'x'.repeat(64)")
    with page.expect_navigation() as refused:
        page.click("button[type=submit]")
    assert refused.value is not None
    assert refused.value.status == 403


def admin_sign_in(page: Page, base_url: str) -> None:
    # Django's admin login leads to the dashboard's, which may ask for a second factor too.
    page.goto(f"{base_url}/admin/login/?next=/admin/")
    page.wait_for_url(f"{base_url}/login/?next=/admin/")
    page.fill("#id_username", ROOT)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base_url}/admin/")


CSP_CASES = [
    *CASES,
    Case("session-revealed", f"/sessions/{REVEALED}/"),
    Case("not-found-signed-out", "/no-such-page/", user=None),
    Case("csrf-refused", "/login/", user=None, act=forged_sign_in),
    Case("admin-login", "/admin/login/", user=None),
    Case("admin", "/admin/", user=ROOT),
    Case("admin-sessions", "/admin/arbiter_app/session/?phase__exact=AGREED", user=ROOT),
    Case("admin-session", "/admin/arbiter_app/session/{session}/change/", user=ROOT),
    Case("admin-credentials", "/admin/arbiter_app/agentcredential/", user=ROOT),
    Case("admin-users", "/admin/auth/user/", user=ROOT),
    Case("admin-user", "/admin/auth/user/{root}/change/", user=ROOT),
    Case("admin-user-add", "/admin/auth/user/add/", user=ROOT),
]


@pytest.fixture(scope="module")
def pages(dashboard: dict[str, str], django_db_blocker: Any) -> dict[str, str]:  # noqa: F811
    """The accessibility suite's dashboard, and: a session whose parties revealed their limits
    after agreeing, and a superuser. What the paths need filled in."""
    with django_db_blocker.unblock():
        client = Client()
        buyer, seller = make_agent("buyer-csp", "buyer"), make_agent("merchant-csp", "merchant")
        run = ClientNegotiation(client, buyer, seller, REVEALED, "r-")
        run.open()
        run.finish()
        for key, agent in ((run.buyer_key, run.buyer), (run.merchant_key, run.merchant)):
            response = post(client, key, agent.reveal(), f"/oanp/v0.1/sessions/{REVEALED}/reveal")
            assert response.status_code == 200, response.content
        root = User.objects.create_superuser(ROOT, password=PASSWORD)
        session = Session.objects.get(session_id=REVEALED)
    return {**dashboard, "root": str(root.pk), "session": str(session.pk)}


@dataclass
class Seen:
    """What the browser met since the case began: its documents and the console's reports of
    violations (the events of the document on screen are read from the page)."""

    documents: list[Response] = field(default_factory=list)
    reports: list[str] = field(default_factory=list)


class Tabs:
    """A tab for each user, in a browser context of its own that listens for violations."""

    def __init__(self, browser: Browser, base_url: str) -> None:
        self.browser = browser
        self.base_url = base_url
        self.opened: dict[str | None, tuple[Page, Seen]] = {}

    def __call__(self, user: str | None) -> tuple[Page, Seen]:
        if user not in self.opened:
            context = self.context()
            if user == ROOT:
                page = context.new_page()
                admin_sign_in(page, self.base_url)
                page.close()
            elif user is not None:
                page = context.new_page()
                sign_in(page, self.base_url, user, PASSWORD)
                page.close()
            self.opened[user] = watched(context.new_page())
        page, seen = self.opened[user]
        seen.documents.clear()
        seen.reports.clear()
        return page, seen

    def context(self) -> BrowserContext:
        context = self.browser.new_context(viewport={"width": 1280, "height": 900})
        context.add_init_script(LISTEN)
        return context


def watched(page: Page) -> tuple[Page, Seen]:
    seen = Seen()

    def console(message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text:
            seen.reports.append(message.text)

    def response(answer: Response) -> None:
        if answer.request.resource_type == "document":
            seen.documents.append(answer)

    page.on("console", console)
    page.on("response", response)
    return page, seen


OnBrowser = Callable[[Callable[[Tabs], T]], T]


@pytest.fixture(scope="module")
def on_browser(pages: dict[str, str], live_arbiter: LiveServer) -> Iterator[OnBrowser[Any]]:
    """One Chromium for the module, driven from a thread of its own (as the accessibility
    suite's: Django refuses its ORM on a thread where Playwright's event loop runs)."""
    with ThreadPoolExecutor(max_workers=1) as thread:
        launched = chromium()
        tabs = Tabs(thread.submit(launched.__enter__).result(), live_arbiter.url)
        try:
            yield lambda work: thread.submit(work, tabs).result()
        finally:
            thread.submit(launched.__exit__, None, None, None).result()


def policy(header: str | None) -> dict[str, str]:
    directives = [d.split(None, 1) for d in (header or "").split(";") if d.strip()]
    return {d[0]: d[1] if len(d) > 1 else "" for d in directives}


@dataclass
class Judged:
    """A page as the browser had it: each document's status and policy, the violations."""

    documents: list[tuple[str, int, str | None]]
    violations: list[str]


def judge(page: Page, seen: Seen, name: str) -> Judged:
    """After the page's scripts have done what loading it sets off (a live page's first
    refresh included)."""
    page.wait_for_load_state("networkidle")
    violations = seen.reports + page.evaluate("window.cspViolations || []")
    if name in SHOWN:
        screenshot(page, f"csp-{name}")
    documents = [
        (d.url, d.status, d.header_value("content-security-policy")) for d in seen.documents
    ]
    return Judged(documents, violations)


def assert_strict(judged: Judged) -> None:
    assert judged.documents, "no page was loaded"
    for url, status, header in judged.documents:
        said = policy(header)
        assert said, f"{url} ({status}) came with no Content-Security-Policy"
        for directive, sources in STRICT.items():
            assert said.get(directive) == sources, f"{url}: {directive} is {said.get(directive)}"
        assert "unsafe" not in (header or ""), f"{url}: {header}"
    assert not judged.violations, "\n".join(judged.violations)


@pytest.mark.parametrize("case", CSP_CASES, ids=[case.name for case in CSP_CASES])
def test_every_page_has_a_strict_policy_and_breaks_none_of_it(
    on_browser: OnBrowser[Judged], pages: dict[str, str], live_arbiter: LiveServer, case: Case
) -> None:
    def visit(tabs: Tabs) -> Judged:
        page, seen = tabs(case.user)
        page.goto(live_arbiter.url + case.path.format(**pages))
        if case.act:
            case.act(page)
        return judge(page, seen, case.name)

    assert_strict(on_browser(visit))


def test_the_charts_draw_and_the_live_pages_connect_under_the_policy(
    on_browser: OnBrowser[dict[str, Any]], pages: dict[str, str], live_arbiter: LiveServer
) -> None:
    """Chart.js draws on its canvases; the WebSockets to the same host count as 'self'."""

    def visit(tabs: Tabs) -> dict[str, Any]:
        page, seen = tabs(ADMIN)
        found: dict[str, Any] = {}
        page.goto(f"{live_arbiter.url}/")
        found["overview"] = page.evaluate("Boolean(Chart.getChart('hourly-chart'))")
        page.goto(f"{live_arbiter.url}/sessions/")
        page.wait_for_selector("#connection[data-state=live]")
        page.goto(f"{live_arbiter.url}/sessions/sess-live/")
        page.wait_for_selector("#connection[data-state=live]")
        # Connected, the page fetches its body again (htmx) and draws the chart anew.
        page.wait_for_load_state("networkidle")
        found["session"] = page.evaluate("Boolean(Chart.getChart('price-chart'))")
        found["violations"] = seen.reports + page.evaluate("window.cspViolations")
        return found

    found = on_browser(visit)
    assert found == {"overview": True, "session": True, "violations": []}


def test_the_zone_of_agreement_keeps_its_proportions(
    on_browser: OnBrowser[dict[str, float]], pages: dict[str, str], live_arbiter: LiveServer
) -> None:
    """Each side's share of the bar, and the Nash point's place along it, as the table says
    (to the whole percent: how the stylesheet writes them)."""

    def measure(tabs: Tabs) -> dict[str, float]:
        page, _ = tabs(ADMIN)
        page.goto(f"{live_arbiter.url}/sessions/{REVEALED}/")
        measured: dict[str, float] = page.evaluate(
            """() => {
              const box = (s) => document.querySelector(s).getBoundingClientRect();
              const bar = box(".zone-bar");
              const share = (s) => 100 * box(s).width / bar.width;
              return { merchant: share(".zone-merchant"), buyer: share(".zone-buyer"),
                       nash: 100 * (box(".zone-mark").left - bar.left) / bar.width };
            }"""
        )
        measured["said_merchant"] = float(
            page.inner_text("#merchant-surplus").split("(")[1].split()[0]
        )
        return measured

    measured = on_browser(measure)
    # The bar's border and the mark's own width take a pixel or two of the percentages.
    assert measured["merchant"] == pytest.approx(measured["said_merchant"], abs=1.0)
    assert measured["merchant"] + measured["buyer"] == pytest.approx(100, abs=1.0)
    assert measured["nash"] == pytest.approx(50, abs=1.0)


@pytest.fixture(scope="module")
def acp_secret_shown(pages: dict[str, str], django_db_blocker: Any) -> str:
    """A session of the admin's as the ACP form's view leaves it when it generated a secret,
    to be shown once on the agent's page: its key, for the browser's cookie."""
    with django_db_blocker.unblock():
        client = Client()
        assert client.login(username=ADMIN, password=PASSWORD)
        session = client.session
        session[ACP_SECRET] = {"agent_id": "hosted-sfo", "sealed": seal_text(SECRET).decode()}
        session.save()
        return str(session.session_key)


def test_the_acp_secret_shown_once_is_selected_on_a_click(
    on_browser: OnBrowser[Any], acp_secret_shown: str, live_arbiter: LiveServer
) -> None:
    """No onclick="…": the page's script selects it, and offers to copy it."""

    def click(tabs: Tabs) -> tuple[Judged, str, bool]:
        context = tabs.context()
        context.add_cookies(
            [{"name": "sessionid", "value": acp_secret_shown, "url": live_arbiter.url}]
        )
        page, seen = watched(context.new_page())
        page.goto(f"{live_arbiter.url}/agents/hosted-sfo/")
        page.click("#acp-secret")
        selected = page.evaluate(
            "(() => { const f = document.getElementById('acp-secret');"
            " return f.value.slice(f.selectionStart, f.selectionEnd); })()"
        )
        copy = page.is_visible("button[data-copy=acp-secret]")
        judged = judge(page, seen, "agent-acp-secret")
        page.locator("#acp-h").scroll_into_view_if_needed()
        page.screenshot(path=str(SCREENSHOTS / "csp-agent-acp-secret.png"))
        context.close()
        return judged, selected, copy

    judged, selected, copy = on_browser(click)
    assert_strict(judged)
    assert selected == SECRET
    assert copy


def test_the_page_of_a_server_without_its_database_has_the_policy_too() -> None:
    """A server whose database refuses connections: the dashboard answers its 503 page."""
    nowhere = {"DATABASE_URL": "postgres://postgres@127.0.0.1:9/nowhere"}
    with serve(nowhere) as server, chromium() as browser:
        context = browser.new_context()
        context.add_init_script(LISTEN)
        page, seen = watched(context.new_page())
        # The session behind the cookie is what needs the database.
        context.add_cookies([{"name": "sessionid", "value": "x" * 32, "url": server.url}])
        page.goto(f"{server.url}/sessions/")
        judged = judge(page, seen, "unavailable")
        screenshot(page, "csp-unavailable")
        heading = page.inner_text("h1")
    assert [status for _, status, _ in judged.documents] == [503]
    assert heading == "Temporarily unavailable"
    assert_strict(judged)
