"""In Chromium against the real ASGI server, with axe-core injected: every page family, at a
1440 px desk and a 390 px phone, in the light scheme and the dark one (the stylesheet follows
prefers-color-scheme), has no WCAG 2.x A/AA violation and none of axe's best practices broken,
and fits its width. Forms are judged after a refused submit too, their error summaries showing.
Screenshots of a few phone pages in the dark in var/screenshots (a11y-*)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client, override_settings
from playwright.sync_api import Browser, Page, StorageState

from arbiter_app import services as arbiter_services
from arbiter_app.models import AgentCredential, Handoff, HandoffState, Session, TaskFailure
from oanp.wire.signing import SigningKey
from sessions_app import invitations
from sessions_app.models import (
    AuditEvent,
    Export,
    MemberRole,
    Merchant,
    OrganisationKind,
    PlatformAgent,
)
from sessions_app.tenancy import Scope
from tests.arbiter_app.test_deliveries import Receiver, Reply, Request
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
from tests.sessions_app.test_handoff_panel import SESSION, agree_and_hand_off
from tests.sessions_app.test_layout_browser import STICKING_OUT, page_width
from tests.support.factories.accounts import PASSWORD, hosted_agent, member, merchant
from tests.support.factories.agents import ClientNegotiation
from tests.support.factories.exports import discard_files, finished_export

pytestmark = pytest.mark.django_db

T = TypeVar("T")
LONG_ID = "skyfare-" + "transcontinental-" * 3 + "sfo-j"  # 64 characters
#: Who signs in for a case: an admin sees every page and every link of the navigation; an
#: operator is refused the admin's pages; a buyer platform's member sees its own agents; None
#: is nobody signed in.
ADMIN, OPERATOR, BUYER = "ada", "olga", "bea"
#: Phone screenshots of the dark scheme, to look at: var/screenshots/a11y-<page>-dark-390.png.
SHOWN = {
    "overview",
    "session-live",
    "session-ended",
    "replay",
    "agent-edit",
    "export-refused",
    "organisation",
    "invitation",
    "buyer-agent",
    "failed-tasks",
}


def shows_errors(page: Page) -> None:
    """The refused form's page, its error summary showing: judged as the user finds it."""
    page.wait_for_selector("[data-error-summary]")


def refused_sign_in(page: Page) -> None:
    page.fill("#id_username", ADMIN)
    page.fill("#id_password", "not the password")
    page.click("button[type=submit]")
    shows_errors(page)


def refused_export(page: Page) -> None:
    """One session, and no session id to export."""
    page.check("input[name=kind][value=session]")
    page.click("#export-form button[type=submit]")
    shows_errors(page)


def refused_agent(page: Page) -> None:
    page.click("button:has-text('Create agent')")
    shows_errors(page)


def refused_party_key(page: Page) -> None:
    """A signing key submitted with nothing pasted and no file chosen."""
    page.click("#party-key-form button[type=submit]")
    shows_errors(page)


def refused_organisation(page: Page) -> None:
    """A name of spaces: the browser lets it through, the server finds it empty."""
    page.fill("#id_name", "   ")
    page.click("#new-organisation button[type=submit]")
    shows_errors(page)


def shows_news(page: Page) -> None:
    """The banner of sessions opened since the page loaded, as the live list fetches it."""
    page.evaluate(
        "htmx.ajax('GET', '/sessions/?since=0', {target: '#session-news', swap: 'innerHTML'})"
    )
    page.wait_for_selector("#session-news a")


def asks_to_redeliver(page: Page) -> None:
    """The failed handoff selected for redelivery: its confirmation page."""
    page.check("#deliveries input[name=handoff]")
    page.click("#resend-selected")
    page.wait_for_selector("#confirm-resend")


def asks_to_retry(page: Page) -> None:
    """The failed delivery task's Retry: its confirmation page."""
    page.click("#failed-tasks button")
    page.wait_for_selector("#confirm-retry")


def asks_to_terminate(page: Page) -> None:
    """A live session ticked on the list for termination: its confirmation page."""
    page.check("#sessions input[name=session]")
    page.click("#terminate-selected")
    page.wait_for_selector("#confirm-terminate")


@dataclass(frozen=True)
class Case:
    name: str
    path: str
    user: str | None = ADMIN
    #: What to do on the page before it is judged, e.g. submit its form.
    act: Callable[[Page], None] | None = None


CASES = [
    Case("login", "/login/", user=None),
    Case("login-refused", "/login/", user=None, act=refused_sign_in),
    Case("overview", "/"),
    Case("sessions", "/sessions/"),
    Case("sessions-news", "/sessions/", act=shows_news),
    Case("sessions-refused", "/sessions/?opened_after=yesterday", act=shows_errors),
    Case("session-live", "/sessions/sess-live/"),
    Case("session-ended", f"/sessions/{SESSION}/"),
    Case("terminate-confirm", "/sessions/sess-live/terminate/"),
    Case("terminate-selected-confirm", "/sessions/?state=NEGOTIATING", act=asks_to_terminate),
    Case("sessions-filtered", "/sessions/?item=sfo&currency=usd&lasted_max=60"),
    Case("saved-views", "/views/"),
    Case("replay", f"/sessions/{SESSION}/replay/?step=5"),
    Case("replay-refused", f"/sessions/{SESSION}/replay/?step=0", act=shows_errors),
    Case("replay-live", "/sessions/sess-live/replay/"),
    Case("agents", "/agents/"),
    Case("agent", "/agents/hosted-sfo/"),
    Case("agent-external", "/agents/merchant-sfo/"),
    Case("agent-edit", "/agents/hosted-sfo/edit/"),
    Case("agent-new-refused", "/agents/new/", act=refused_agent),
    Case("key-revoke-confirm", "/agents/merchant-sfo/keys/{key}/revoke/"),
    Case("party-key-refused", "/agents/merchant-sfo/", act=refused_party_key),
    Case("party-key-retire-confirm", "/agents/merchant-sfo/signing-keys/{party_key}/retire/"),
    Case("agent-pause-confirm", "/agents/hosted-sfo/pause/"),
    Case("runner-key-rotate-confirm", "/agents/hosted-sfo/runner-key/rotate/"),
    Case("agent-claim", "/agents/cli-unclaimed/claim/"),
    Case("keys", "/keys/"),
    Case("rotate-confirm", "/keys/rotate/?alg=ES256"),
    Case("deliveries", "/deliveries/"),
    Case("delivery", "/deliveries/handoff/{handoff}/"),
    Case("redeliver-confirm", "/deliveries/?state=failed", act=asks_to_redeliver),
    Case("failed-tasks", "/tasks/failed/", user=OPERATOR),
    Case("failed-task-retry-confirm", "/tasks/failed/", user=OPERATOR, act=asks_to_retry),
    Case("exports", "/exports/"),
    Case("export-refused", "/exports/", act=refused_export),
    Case("audit", "/audit/"),
    Case("organisations", "/organisations/"),
    Case("organisation-refused", "/organisations/", act=refused_organisation),
    Case("organisation", "/organisations/{shop}/"),
    Case("people", "/people/"),
    Case("person", "/people/{person}/"),
    Case("account", "/account/"),
    Case("two-factor", "/account/two-factor/"),
    Case("buyer-agents", "/buyer-agents/", user=BUYER),
    Case("buyer-agent", "/buyer-agents/tripwise-1/", user=BUYER),
    Case("invitation", "{invitation}", user=None),
    Case("invitation-refused", "/invitations/not-a-link/", user=None),
    Case("password-reset", "/password-reset/", user=None),
    Case("not-found", "/sessions/no-such-session/"),
    Case("forbidden", "/keys/", user=OPERATOR),
]


@pytest.fixture(scope="module")
def dashboard(django_db_setup: None, django_db_blocker: Any) -> Iterator[dict[str, str]]:
    """For the whole module, since no case changes anything: an admin and an operator; merchant
    sfo with a hosted agent and an external one whose agreed session's handoff failed (ACP
    answered 400), and an invitation to it; a second session of the same agents still
    negotiating, past a verdict; a finished export with its files; two failed tasks; a buyer
    platform with an agent and a member. Yields what the paths need filled in. Everything goes
    at the end, as after any transactional test."""
    acp = Receiver(refuse).start()
    try:
        with django_db_blocker.unblock(), override_settings(OANP_ALLOW_PRIVATE_TARGETS=True):
            ada = member(ADMIN, MemberRole.ADMIN)
            olga = member(OPERATOR, MemberRole.OPERATOR)
            shop = merchant("sfo")
            invitation, _ = invitations.invite(
                actor=ada,
                scope=Scope(MemberRole.ADMIN, None, None),
                email="carol@example.com",
                role=MemberRole.MERCHANT_MEMBER,
                organisation=shop,
            )
            tripwise = Merchant.objects.create(
                name="Tripwise", slug="tripwise", kind=OrganisationKind.BUYER_PLATFORM
            )
            PlatformAgent.objects.create(organisation=tripwise, agent_id="tripwise-1")
            member(BUYER, MemberRole.BUYER_MEMBER, tripwise)
            hosted_agent(shop, "hosted-sfo")
            # Ids and names people choose, 64 characters without a space: they must wrap.
            long = hosted_agent(shop, LONG_ID)
            long.display_name = LONG_ID.upper()
            long.save(update_fields=["display_name"])
            AuditEvent.objects.create(
                actor=ada, action="agent.created", target=LONG_ID, detail={"agent_id": LONG_ID}
            )
            handoff, ended = agree_and_hand_off(Client(), shop, f"{acp.url}/acp")
            live = ClientNegotiation(
                Client(), ended.buyer_key, ended.merchant_key, "sess-live", "l-"
            )
            # An hour to answer in, the longest there is: a worker's timers, when one runs,
            # leave the session live for as long as the module takes.
            live.open(response_window_s=3600)
            live.run_until("offer.accept")
            # Paused once its session runs: the pages show a paused agent, which that
            # session does not mind.
            arbiter_services.set_availability(merchant_agent_id="merchant-sfo", state="paused")
            arbiter_services.issue_credential(agent_id="cli-unclaimed", role="merchant")
            key = AgentCredential.objects.get(agent_id="merchant-sfo", role="merchant")
            party_key, _ = arbiter_services.register_agent_key(
                agent_id="merchant-sfo", jwk=SigningKey.from_ed25519_seed(bytes(32)).public_jwk()
            )
            finished_export(User.objects.get(username=ADMIN))
            # A delivery task that failed, safe to retry, and an export's, retried elsewhere.
            for task, args, error, message in (
                ("arbiter_app.tasks.deliver_handoff", [handoff.pk], "OperationalError", "x" * 500),
                ("sessions_app.tasks.run_export", [1], "OSError", "No space left on device"),
            ):
                TaskFailure.objects.create(
                    task=task,
                    task_id="0f8e2c1a-5d7b-4c3e-9a61-2b4d8f0c7e35",
                    error=error,
                    message=message,
                    args=args,
                    failed_at=handoff.created_at,
                )
        yield {
            "handoff": str(handoff.pk),
            "key": str(key.pk),
            "party_key": party_key.kid,
            "shop": str(shop.pk),
            "person": str(olga.pk),
            "invitation": urlsplit(invitations.link(invitation)).path,
        }
    finally:
        with django_db_blocker.unblock():
            for export in Export.objects.all():
                discard_files(export)
        acp.stop()
        with django_db_blocker.unblock():
            call_command("flush", interactive=False, verbosity=0)


def refuse(request: Request) -> Reply:
    return 400, {}, json.dumps({"type": "invalid_request"}).encode()


class Tabs:
    """A tab for each user, width and scheme, opened when a case first needs it, in a browser
    context of its own (the user's cookies, the viewport, the colour scheme). Each case loads
    its page afresh in its tab: a new tab per case would start a new renderer process each
    time, which doubled the module's time."""

    def __init__(self, browser: Browser, base_url: str) -> None:
        self.browser = browser
        self.base_url = base_url
        self.opened: dict[tuple[str | None, str, Scheme], Page] = {}
        self.signed_in: dict[str, StorageState] = {}

    def __call__(self, user: str | None, width: str, scheme: Scheme) -> Page:
        key = (user, width, scheme)
        if key not in self.opened:
            context = self.browser.new_context(
                viewport=WIDTHS[width],
                color_scheme=scheme,
                storage_state=self.cookies(user) if user else None,
            )
            self.opened[key] = context.new_page()
        return self.opened[key]

    def cookies(self, user: str) -> StorageState:
        """``user``'s, signed in once for the module."""
        if user not in self.signed_in:
            context = self.browser.new_context()
            sign_in(context.new_page(), self.base_url, user, PASSWORD)
            self.signed_in[user] = context.storage_state()
            context.close()
        return self.signed_in[user]


#: Runs a function with the module's tabs on the thread that drives them, and returns what it
#: returns.
OnBrowser = Callable[[Callable[[Tabs], T]], T]


@pytest.fixture(scope="module")
def on_browser(dashboard: dict[str, str], live_arbiter: LiveServer) -> Iterator[OnBrowser[Any]]:
    """The module's one Chromium, driven from a thread of its own: Playwright keeps an event
    loop open on the thread that drives it, and Django refuses its ORM on such a thread, which
    each case's database fixture uses."""
    with ThreadPoolExecutor(max_workers=1) as thread:
        launched = chromium()
        tabs = Tabs(thread.submit(launched.__enter__).result(), live_arbiter.url)
        try:
            yield lambda work: thread.submit(work, tabs).result()
        finally:
            thread.submit(launched.__exit__, None, None, None).result()


def test_the_pages_are_judged_with_what_they_can_show(dashboard: dict[str, str]) -> None:
    """Offers, verdicts and a handoff on the session pages; a failed delivery to look into; a
    finished export's row with its files; a failed task to retry and one not."""
    live = Session.objects.get(session_id="sess-live")
    ended = Session.objects.get(session_id=SESSION)
    assert (live.phase, live.round, live.fair_rounds) == ("NEGOTIATING", 2, 1)
    assert (ended.phase, ended.fair_rounds) == ("AGREED", 2)
    assert Handoff.objects.get(pk=dashboard["handoff"]).state == HandoffState.FAILED
    assert Export.objects.get().state == Export.State.DONE
    assert TaskFailure.objects.filter(retried_at__isnull=True).count() == 2


def readable(violations: list[dict[str, Any]]) -> str:
    return "\n".join(
        f"{v['id']} ({v['impact']}): {v['help']}\n"
        + "\n".join(f"  {n['target']}: {n['why']}" for n in v["nodes"])
        for v in violations
    )


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_accessible(
    on_browser: OnBrowser[tuple[list[dict[str, Any]], int, list[str]]],
    dashboard: dict[str, str],
    live_arbiter: LiveServer,
    case: Case,
    width: str,
    scheme: Scheme,
) -> None:
    """No axe violation; and the page reflows to the width (WCAG 1.4.10), which axe cannot
    judge: nothing makes the page itself scroll sideways."""
    viewport = WIDTHS[width]["width"]

    def judge(tabs: Tabs) -> tuple[list[dict[str, Any]], int, list[str]]:
        page = tabs(case.user, width, scheme)
        page.goto(live_arbiter.url + case.path.format(**dashboard))
        if case.act:
            case.act(page)
        violations = axe_violations(page)
        wide = page_width(page)
        sticking_out = page.evaluate(STICKING_OUT, viewport) if wide > viewport else []
        if case.name in SHOWN and scheme == "dark" and width == "390":
            screenshot(page, f"a11y-{case.name}-{scheme}-{width}")
        return violations, wide, sticking_out

    violations, wide, sticking_out = on_browser(judge)
    assert not violations, readable(violations)
    assert wide <= viewport, f"{wide} px wide, past the {viewport} px screen: {sticking_out}"
