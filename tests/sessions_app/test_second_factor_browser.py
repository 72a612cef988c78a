"""In Chromium against the real ASGI server: an operator sets up two-step sign-in from the
account page by typing the secret the page shows into an "app" (the test computes its codes),
keeps the recovery codes, then signs in again with the password and a code, and once more
with a recovery code after a wrong one; the pages pass axe-core and fit a 390 px phone."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from sessions_app.models import MemberRole
from tests.conftest import LiveServer
from tests.sessions_app.browser import (
    WIDTHS,
    app_code,
    axe_violations,
    chromium,
    screenshot,
    sign_in,
)
from tests.support.factories.accounts import PASSWORD, member

pytestmark = pytest.mark.django_db(transaction=True)


def fits(page: Page) -> bool:
    return bool(page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth"))


def test_an_operator_sets_up_an_app_and_signs_in_with_its_code(live_arbiter: LiveServer) -> None:
    member("mia", MemberRole.OPERATOR)
    base = live_arbiter.url
    with chromium() as browser:
        page = browser.new_page(viewport=WIDTHS["1440"])
        sign_in(page, base, "mia", PASSWORD)
        page.click("header >> text=mia")
        page.click("text=Set up two-step sign-in")
        page.wait_for_url(f"{base}/account/two-factor/")
        assert page.locator("img.qr").evaluate("(img) => img.naturalWidth > 0")
        secret = page.inner_text("#secret")
        assert axe_violations(page) == []
        screenshot(page, "two-factor-enrol-1440")
        page.set_viewport_size(WIDTHS["390"])
        assert fits(page)
        screenshot(page, "two-factor-enrol-390")

        page.fill("#id_code", app_code(secret))
        page.click("button:has-text('Turn on')")
        codes = page.locator("#recovery-codes li").all_inner_texts()
        assert len(codes) == 10
        assert fits(page)
        screenshot(page, "two-factor-recovery-codes-390")
        page.click("text=I have kept them: go on")
        page.wait_for_url(f"{base}/")

        page.click("button:has-text('Sign out')")
        page.wait_for_url(f"{base}/login/")
        page.fill("#id_username", "mia")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/login/code/")
        assert axe_violations(page) == []
        assert fits(page)
        screenshot(page, "two-factor-code-390")
        # The app's next code, since the one the setup used is spent.
        page.fill("#id_code", app_code(secret, 1))
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/")
        page.set_viewport_size(WIDTHS["1440"])
        page.goto(f"{base}/account/")
        assert "On: signing in takes your password and a code" in page.inner_text("#two-step-state")
        screenshot(page, "two-factor-account-1440")

        # Again, the app lost: a wrong code is refused, a recovery code signs in.
        page.click("button:has-text('Sign out')")
        page.wait_for_url(f"{base}/login/")
        page.fill("#id_username", "mia")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/login/code/")
        # Six digits, so the app's check refuses it and the recovery codes' does not wait.
        page.fill("#id_code", "000000" if app_code(secret) != "000000" else "111111")
        page.click("button[type=submit]")
        assert "This code is wrong or was used already" in page.inner_text(".error-summary")
        screenshot(page, "two-factor-code-wrong-1440")
        page.fill("#id_code", codes[0])
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/")
        assert "9 left" in page.inner_text(".messages")
