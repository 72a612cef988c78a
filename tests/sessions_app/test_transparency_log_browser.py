"""In Chromium against the real server: an admin's audit page shows the transparency log's card
with a witness that cosigned the first checkpoint and then stopped answering. The alert says
since when and why, the witness's row says so too, the checkpoint served is the one it
cosigned, with its cosignature and the note as the log serves it, and the verifier key copies.
The page is screenshotted at a desk's and a phone's width in both schemes, and judged by axe."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from playwright.sync_api import expect

from arbiter_app.log_records import LogCheckpoint
from arbiter_app.tlog.keys import log_identity
from sessions_app.models import MemberRole
from tests.conftest import serve, suite_database_url
from tests.sessions_app.browser import SCREENSHOTS, chromium, look, sign_in
from tests.support.factories.accounts import PASSWORD, member
from tests.support.factories.agents import Agent, ClientNegotiation, make_agent
from tests.support.factories.witnesses import checkpoint_sent, running_witness

pytestmark = pytest.mark.django_db(transaction=True)

#: The log's name, the same in this process (which signs) and in the server (which shows it).
ORIGIN = "audit-page.test/oanp-log"


def negotiate(client: Client, parties: tuple[Agent, Agent], session_id: str) -> None:
    negotiation = ClientNegotiation(client, *parties, session_id, f"{session_id}-")
    negotiation.open()
    negotiation.finish()


def test_the_audit_page_shows_a_witness_that_stopped_answering(
    client: Client, tmp_path: Path, settings: Any
) -> None:
    settings.OANP_LOG_ORIGIN = ORIGIN
    settings.OANP_WITNESS_QUORUM = 1
    parties = make_agent("buyer-001", "buyer"), make_agent("merchant-sfo", "merchant")
    member("admin", MemberRole.ADMIN)
    with running_witness(tmp_path) as witness:
        settings.OANP_WITNESSES = [witness.line]
        negotiate(client, parties, "sess-cosigned")
        checkpoint_sent(timezone.now() - timedelta(minutes=12))
        witness.stop()
        negotiate(client, parties, "sess-after")
        checkpoint_sent()  # finds the witness gone
    cosigned = LogCheckpoint.objects.get(size=9)
    served_note = cosigned.note + cosigned.cosignatures.get().line
    verifier_key = log_identity()["verifier_key"]

    env = {
        "DATABASE_URL": suite_database_url(),
        "OANP_LOG_ORIGIN": ORIGIN,
        "OANP_WITNESSES": witness.line,
        "OANP_WITNESS_QUORUM": "1",
    }
    with serve(env) as server, chromium() as browser:
        context = browser.new_context(
            viewport={"width": 1440, "height": 900},
            permissions=["clipboard-read", "clipboard-write"],
        )
        page = context.new_page()
        sign_in(page, server.url, "admin", PASSWORD)
        page.click("nav >> text=Audit log")
        card = page.locator("#transparency-log")
        expect(card.get_by_role("alert")).to_have_text(
            re.compile(
                rf"Witness {re.escape(witness.name)} stopped answering: it last answered "
                r"12 minutes ago, cosigning size 9\. Last tried less than a minute ago: "
                r"\[Errno 111\] Connection refused\. The log goes on without its cosignature "
                r"and sends it the next checkpoint\."
            ),
            use_inner_text=True,
        )
        expect(card.locator("#witnesses tbody tr td")).to_have_text(
            [witness.name, "stopped answering", "size 9", "12 minutes ago"]
        )
        expect(card.locator("#log-size")).to_have_text("18 entries")
        expect(card.locator("#checkpoint-size")).to_have_text("9")
        expect(card.locator("#cosignatures tbody td").first).to_have_text(witness.name)
        expect(card.locator("#log-note pre")).to_be_hidden()
        card.locator("#log-note summary").click()
        expect(card.locator("#log-note pre")).to_have_text(served_note, use_inner_text=True)

        copy = card.locator("button[data-copy=log-key]")
        copy.click()
        expect(copy.locator("xpath=..").locator(".copy-status")).to_have_text("Copied.")
        assert page.evaluate("() => navigator.clipboard.readText()") == verifier_key

        look(page, "audit-transparency-log")
        card.screenshot(path=str(SCREENSHOTS / "audit-transparency-log-card.png"))
        context.close()
