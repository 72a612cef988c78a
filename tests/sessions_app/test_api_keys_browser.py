"""In Chromium against the real ASGI server: a merchant issues an API key that expires, copies
it with the copy button, revokes it after confirming; and the exports form shows only the
chosen kind's input, and after a refused submit starts from its error summary."""

from __future__ import annotations

import pytest

from sessions_app.models import MemberRole
from tests.conftest import LiveServer
from tests.sessions_app.browser import chromium, screenshot, sign_in
from tests.support.factories.accounts import PASSWORD, hosted_agent, member, merchant

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_merchant_issues_copies_and_revokes_a_key(live_arbiter: LiveServer) -> None:
    shop = merchant("skyways")
    hosted_agent(shop, "skyways-sfo")
    member("mia", MemberRole.MERCHANT_MANAGER, shop)
    base = live_arbiter.url
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
        page = context.new_page()
        sign_in(page, base, "mia", PASSWORD)
        page.goto(f"{base}/agents/skyways-sfo/")
        page.fill("#id_label", "ci runner")
        page.select_option("#id_expires", "30d")
        page.click("button:has-text('Issue key')")
        api_key = page.input_value("#issued-key")
        assert api_key.startswith("oanp_")
        prefix = api_key.split("_")[1]
        assert f"Key {prefix} issued." in page.inner_text(".messages")

        page.click("button[data-copy=issued-key]")
        page.wait_for_selector(".copy-status:has-text('Copied.')")
        assert page.evaluate("navigator.clipboard.readText()") == api_key
        row = page.locator("#keys tr", has_text="ci runner")
        assert "never" in row.locator(".last-used").inner_text()
        assert "active" in row.inner_text()
        screenshot(page, "agent-key-copied")

        row.locator("a:has-text('Revoke')").click()
        page.wait_for_url(f"{base}/agents/skyways-sfo/keys/*/revoke/")
        assert "Are you sure?" in page.inner_text("main")
        screenshot(page, "agent-key-revoke-confirm")
        page.click("text=Cancel")
        page.wait_for_url(f"{base}/agents/skyways-sfo/")
        assert "revoked" not in page.locator("#keys tr", has_text="ci runner").inner_text()

        page.locator("#keys tr", has_text="ci runner").locator("a:has-text('Revoke')").click()
        page.click(f"button:has-text('Revoke key {prefix}')")
        page.wait_for_url(f"{base}/agents/skyways-sfo/")
        assert f"Key {prefix} revoked." in page.inner_text(".messages")
        assert "revoked" in page.locator("#keys tr", has_text="ci runner").inner_text()
        screenshot(page, "agent-key-revoked")


def test_the_exports_form_shows_the_chosen_kinds_input_and_its_errors(
    live_arbiter: LiveServer,
) -> None:
    member("ada", MemberRole.ADMIN)
    merchant("skyways")
    base = live_arbiter.url
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        sign_in(page, base, "ada", PASSWORD)
        page.goto(f"{base}/exports/")
        # The range is chosen first: its input alone shows.
        assert page.is_visible("#id_preset")
        assert not page.is_visible("#id_session_id")
        assert not page.is_visible("#id_merchant")
        page.check("input[name=kind][value=session]")
        assert page.is_visible("#id_session_id")
        assert not page.is_visible("#id_preset")
        screenshot(page, "exports-form-session")

        page.click("button:has-text('Export')")
        summary = page.locator("[data-error-summary]")
        assert "Enter a session id." in summary.inner_text()
        assert page.evaluate("document.activeElement.hasAttribute('data-error-summary')")
        assert page.is_visible("#id_session_id")  # the kind stays chosen, its input shown
        page.fill("#id_session_id", "sess-nowhere")
        page.click("button:has-text('Export')")
        assert "No session 'sess-nowhere' in your sessions." in summary.inner_text()
        screenshot(page, "exports-form-error")

        page.check("input[name=kind][value=merchant]")
        assert page.is_visible("#id_merchant")
        page.click("button:has-text('Export')")
        page.wait_for_url(f"{base}/exports/")
        assert "queued" in page.inner_text(".messages")
        screenshot(page, "exports-queued")
