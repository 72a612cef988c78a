"""In Chromium against the real ASGI server: the deliveries page filtered to the failed
handoffs, an attempt expanded to its request and response, and a selection of them resent.
Screenshots in var/screenshots."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from arbiter_app.models import HandoffState
from sessions_app.models import AuditEvent, MemberRole
from tests.arbiter_app.test_deliveries import Receiver
from tests.conftest import LiveServer
from tests.sessions_app.browser import chromium, screenshot, sign_in
from tests.sessions_app.test_deliveries_page import (  # noqa: F401 - acp_server is the fixture
    acp_server,
    failed_handoff,
)
from tests.sessions_app.test_handoff_panel import SESSION
from tests.support.factories.accounts import PASSWORD, member, merchant

pytestmark = pytest.mark.django_db(transaction=True)


def test_filter_expand_and_resend_a_selection(
    settings: Any,
    live_arbiter: LiveServer,
    acp_server: Receiver,  # noqa: F811
) -> None:
    settings.OANP_ALLOW_PRIVATE_TARGETS = True
    handoff = failed_handoff(Client(), merchant("sfo"), f"{acp_server.url}/acp")
    member("olga", MemberRole.OPERATOR)
    base = live_arbiter.url
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        sign_in(page, base, "olga", PASSWORD)
        page.click("nav >> text=Deliveries")
        page.select_option("#id_state", "failed")
        page.click("#delivery-filters button[type=submit]")
        page.wait_for_url(f"{base}/deliveries/?*state=failed*")
        table = page.inner_text("#deliveries")
        assert SESSION in table
        assert "400 (rejected)" in table
        page.click("#deliveries a:has-text('Attempts')")
        page.click("#attempts summary")
        # A worker of the suite may have made an attempt too: read them all.
        page.eval_on_selector_all(
            "#attempts details", "all => all.forEach(d => { d.open = true; })"
        )
        expanded = page.inner_text("#attempts")
        assert "Bearer [redacted]" in expanded
        assert "acp_123" not in page.content()
        assert "invalid_request" in expanded
        screenshot(page, "delivery-attempt")
        page.go_back()
        page.check(f"#select-handoff-{handoff.pk}")
        page.click("#resend-selected")
        assert "Resend 1 delivery now?" in page.inner_text("#confirm-h")
        page.click("#confirm-resend")
        page.wait_for_url(f"{base}/deliveries/handoff/{handoff.pk}/")
        assert "Resending 1 delivery now." in page.inner_text(".messages")
        screenshot(page, "deliveries-redelivered")
    handoff.refresh_from_db()
    assert handoff.state != HandoffState.FAILED
    assert AuditEvent.objects.filter(action="handoff.redeliver", target=SESSION).count() == 1
