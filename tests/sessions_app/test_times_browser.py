"""In Chromium against the real ASGI server: times read relative ("3 hours ago", "in 29 days")
with the exact UTC time on hover, kept current, rows that arrive later included; exact times,
the overview's hours among them, in the viewer's zone; the list's UTC inputs saying so; an
action's message and a refused form's error summary, which takes the focus, in light and
dark."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.test import Client
from django.utils import timezone

from arbiter_app.models import AgentCredential, Listing, Session
from sessions_app import services
from sessions_app.models import AgentProfile, MemberRole
from tests.conftest import LiveServer
from tests.sessions_app.browser import chromium, screenshot, sign_in
from tests.support.factories.accounts import PASSWORD, hosted_agent, member, merchant
from tests.support.factories.agents import ClientNegotiation, make_agent

pytestmark = pytest.mark.django_db(transaction=True)


def exact(moment: datetime | None) -> str:
    """What a time's title says: its moment to the second, in UTC."""
    assert moment is not None
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


def test_times_read_relative_with_the_exact_utc_time_on_hover(
    live_arbiter: LiveServer, client: Client
) -> None:
    shop = merchant("skyways")
    profile = hosted_agent(shop, "skyways-sfo")
    mia = member("mia", MemberRole.MERCHANT_MANAGER, shop)
    issued = services.issue_key(actor=mia, profile=profile, label="ci", lifetime=timedelta(days=30))
    AgentCredential.objects.filter(pk=issued.credential.pk).update(
        created_at=timezone.now() - timedelta(hours=3, minutes=5)
    )
    key = AgentCredential.objects.get(pk=issued.credential.pk)
    AgentProfile.objects.create(merchant=shop, agent_id="merchant-sfo", mode="external")
    buyer, seller = make_agent("buyer-001", "buyer"), make_agent("merchant-sfo", "merchant")
    ClientNegotiation(client, buyer, seller, "sess-times", "t-").open()
    opened = Session.objects.get(session_id="sess-times").opened_at
    base = live_arbiter.url
    with chromium() as browser:
        # Half an hour off any whole hour from UTC, so a time shown in UTC cannot pass.
        page = browser.new_page(viewport={"width": 1280, "height": 900}, timezone_id="Asia/Kolkata")
        # A clock of the test's own, so that "kept current" is seen without waiting a minute.
        page.clock.install()
        sign_in(page, base, "mia", PASSWORD)
        page.goto(f"{base}/agents/skyways-sfo/")
        created, expires = page.locator("#keys tr", has_text="ci").locator("time").all()
        assert created.inner_text() == "3 hours ago"
        assert re.fullmatch(r"in (29|30) days", expires.inner_text())
        created.hover()
        assert created.get_attribute("title") == exact(key.created_at)
        assert expires.get_attribute("title") == exact(key.expires_at)
        assert created.get_attribute("datetime") == key.created_at.astimezone(UTC).isoformat(
            timespec="seconds"
        )

        page.goto(f"{base}/sessions/")
        first = page.locator("#session-rows tr", has_text="sess-times").locator("time").last
        assert first.inner_text() == "less than a minute ago"
        assert first.get_attribute("title") == exact(opened)
        page.clock.fast_forward("03:00")
        page.wait_for_function(
            "() => document.querySelector('#session-rows time:last-of-type')"
            ".textContent === '3 minutes ago'"
        )
        # Rows added after the page loaded (as the list's paging and live updates add them)
        # read relative as soon as they arrive: the server's own rows, appended by htmx.
        page.evaluate(
            "htmx.ajax('GET', '/sessions/', {target: '#session-rows', swap: 'beforeend'})"
        )
        page.wait_for_function("() => document.querySelectorAll('#session-rows tr').length === 2")
        added = page.locator("#session-rows tr").last.locator("time[data-relative]")
        assert added.count() == 2
        for time in added.all():
            assert time.inner_text() == "3 minutes ago"
        assert added.last.get_attribute("title") == exact(opened)
        screenshot(page, "times-sessions-list")
        # The zone as the browser names it (Chromium's ICU still calls it Calcutta).
        assert page.inner_text("header.top [data-zone]") in {"Asia/Kolkata", "Asia/Calcutta"}

        # Exact times are the viewer's, with UTC on hover.
        page.goto(f"{base}/sessions/sess-times/")
        received = page.locator(".timeline-when time").first
        assert received.get_attribute("title") == exact(opened)
        kolkata = opened.astimezone(ZoneInfo("Asia/Kolkata"))
        assert received.inner_text() == f"{kolkata:%Y-%m-%d %H:%M:%S}"
        screenshot(page, "times-session-timeline")

        # The overview counts by the hours of UTC and labels each by its start in the viewer's
        # zone: half past, in Kolkata, in the table and on the chart alike.
        page.goto(f"{base}/")
        last = page.locator("#hourly tbody tr").last.locator("time")
        start = datetime.fromisoformat(last.get_attribute("datetime") or "")
        local_start = start.astimezone(ZoneInfo("Asia/Kolkata"))
        assert local_start.minute == 30
        assert last.text_content() == f"{local_start:%Y-%m-%d %H:%M}"
        assert last.get_attribute("title") == exact(start)
        labels = page.evaluate("Chart.getChart('hourly-chart').data.labels")
        assert labels[-1] == f"{local_start:%H:%M}"
        assert page.inner_text("#hourly-zone [data-zone]") in {"Asia/Kolkata", "Asia/Calcutta"}
        # The list's From and To stay in UTC, as the URL keeps them, and say so.
        page.goto(f"{base}/sessions/")
        assert page.get_by_label("From, in UTC").count() == 1
        hint = page.inner_text("#utc-inputs")
        assert "read in UTC, not in your zone (Asia/" in hint


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_message_and_an_error_summary_in_each_scheme(
    live_arbiter: LiveServer, scheme: str
) -> None:
    shop = merchant("skyways")
    hosted_agent(shop, "skyways-sfo")
    member("mia", MemberRole.MERCHANT_MANAGER, shop)
    base = live_arbiter.url
    with chromium() as browser:
        context = browser.new_context(
            viewport={"width": 1100, "height": 900},
            color_scheme="dark" if scheme == "dark" else "light",
        )
        page = context.new_page()
        sign_in(page, base, "mia", PASSWORD)
        page.goto(f"{base}/agents/skyways-sfo/")
        assert page.inner_text(".messages") == ""
        page.fill("#id_label", "laptop")
        page.click("button:has-text('Issue key')")
        prefix = page.input_value("#issued-key").split("_")[1]
        assert page.inner_text(".messages") == f"Key {prefix} issued."
        assert page.get_attribute(".messages", "role") == "status"
        screenshot(page, f"message-{scheme}")

        page.check("#id_listed")
        page.fill("#id_currencies", "USD, XYZ")
        page.fill("#id_description", "Flights out of SFO.")
        page.click("button:has-text('Save listing')")
        summary = page.locator("[data-error-summary]")
        assert "'XYZ' is not an ISO 4217 code." in summary.inner_text()
        assert page.evaluate("document.activeElement.hasAttribute('data-error-summary')")
        # What was typed is kept; the link leads to the field that needs fixing.
        assert page.input_value("#id_description") == "Flights out of SFO."
        assert page.input_value("#id_currencies") == "USD, XYZ"
        assert page.inner_text(".messages") == ""
        screenshot(page, f"error-summary-{scheme}")
        summary.locator("a[href='#id_currencies']").click()
        assert page.evaluate("document.activeElement.id") == "id_currencies"
    assert not Listing.objects.exists()
