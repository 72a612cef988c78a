"""In Chromium against the real ASGI server: a handoff whose checkout came back at another
price shows as flagged on the deliveries list and on its page, and an operator resends it from
there, through the confirmation page; the flag is gone and the resend is audited. Each page is
screenshotted and judged by axe-core at both widths in both schemes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from arbiter_app.models import Handoff, HandoffState
from sessions_app.models import AuditEvent, MemberRole
from tests.arbiter_app.test_deliveries import Receiver, Reply, Request
from tests.conftest import LiveServer
from tests.sessions_app.browser import chromium, look, sign_in
from tests.sessions_app.test_handoff_panel import (
    SESSION,
    agree_and_hand_off,
    checkout_at_another_price,
)
from tests.support.factories.accounts import PASSWORD, member, merchant
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def acp_server() -> Iterator[Receiver]:
    """A checkout at a price other than the agreed one; then, busy, a 503 to every retry."""
    answered: list[int] = []

    def answer(request: Request) -> Reply:
        if answered:
            return 503, {}, b'{"type": "processing_error"}'
        answered.append(201)
        return checkout_at_another_price(request)

    server = Receiver(answer).start()
    yield server
    server.stop()


def test_a_flagged_handoff_is_shown_as_flagged_and_resent(
    settings: Any, live_arbiter: LiveServer, acp_server: Receiver
) -> None:
    settings.OANP_ALLOW_PRIVATE_TARGETS = True
    handoff, _ = agree_and_hand_off(Client(), merchant("sfo"), f"{acp_server.url}/acp")

    def flagged() -> bool:
        """the checkout at another price recorded, by this process or by a worker of the
        suite, which sees the committed handoff too and may have taken its attempt first"""
        done = Handoff.objects.filter(pk=handoff.pk, state=HandoffState.DELIVERED, flagged=True)
        return done.exists()

    wait_for(flagged, 60)
    member("olga", MemberRole.OPERATOR)
    base = live_arbiter.url
    with chromium() as browser:
        page = browser.new_page()
        sign_in(page, base, "olga", PASSWORD)
        page.goto(f"{base}/deliveries/")
        row = f"#deliveries tr:has(#select-handoff-{handoff.pk})"
        assert page.inner_text(f"{row} .badge") == "price mismatch flagged"
        page.select_option("#id_state", "flagged")
        page.click("#delivery-filters button[type=submit]")
        page.wait_for_url(f"{base}/deliveries/?*state=flagged*")
        look(page, "deliveries-flagged")
        page.click("#deliveries a:has-text('Attempts')")
        assert "price mismatch flagged" in page.inner_text("#delivery-outcome")
        assert "unit amount 35000 is not the agreed 34000" in page.inner_text("#delivery-outcome")
        look(page, "delivery-flagged")
        page.click("#resend-now")
        assert "Resend 1 delivery now?" in page.inner_text("#confirm-h")
        look(page, "delivery-resend-confirm")
        page.click("#confirm-resend")
        page.wait_for_url(f"{base}/deliveries/handoff/{handoff.pk}/")
        assert "Resending 1 delivery now." in page.inner_text(".messages")
        assert "flagged" not in page.inner_text("#delivery-outcome")
        look(page, "delivery-resent")
    handoff = Handoff.objects.get(pk=handoff.pk)
    assert not handoff.flagged
    assert handoff.state == HandoffState.PENDING
    event = AuditEvent.objects.get(action="handoff.redeliver", target=SESSION)
    assert event.detail == {"redelivered": True, "refused": ""}
