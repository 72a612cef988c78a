"""In Chromium against the real ASGI server and Celery worker: an admin rotates the signing
key, exports (the page follows the export's progress without a reload), downloads a bundle
that ``oanp verify`` passes and a flipped byte fails, reads the audit log, and terminates a
live session after confirming."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.files.storage import default_storage
from django.test import Client

from arbiter_app.models import Session
from sessions_app.models import AgentProfile, Export, MemberRole, Membership, Merchant
from tests.conftest import ROOT, LiveServer, Worker
from tests.sessions_app.browser import chromium, screenshot, sign_in
from tests.support.factories.agents import ClientNegotiation, make_agent

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "correct horse battery"


def verify(path: Path) -> int:
    return subprocess.run(
        [sys.executable, "-m", "oanp.net.cli", "verify", str(path)],
        cwd=ROOT,
        capture_output=True,
        check=False,
    ).returncode


def test_an_admin_rotates_exports_verifies_and_terminates(
    live_arbiter: LiveServer, celery_worker_process: Worker, client: Client, tmp_path: Path
) -> None:
    merchant = Merchant.objects.create(name="Skyways", slug="skyways")
    AgentProfile.objects.create(merchant=merchant, agent_id="merchant-sfo", mode="external")
    buyer, seller = make_agent("buyer-001", "buyer"), make_agent("merchant-sfo", "merchant")
    agreed = ClientNegotiation(client, buyer, seller, "sess-done", "d-")
    agreed.open()
    agreed.finish()
    live = ClientNegotiation(client, buyer, seller, "sess-live", "l-")
    live.open()
    live.run_until("offer.counter")
    User.objects.create_user("admin", password=PASSWORD)
    Membership.objects.create(user=User.objects.get(username="admin"), role=MemberRole.ADMIN)

    base = live_arbiter.url
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900}, accept_downloads=True)
        sign_in(page, base, "admin", PASSWORD)

        page.click("nav >> text=Keys")
        assert page.locator("#keys tbody tr").count() == 1
        page.select_option("#alg", "ES256")
        page.click("button:has-text('Rotate now')")
        assert "Are you sure?" in page.inner_text("main")
        screenshot(page, "keys-rotate-confirm")
        page.click("button:has-text('Rotate to a new ES256 key')")
        page.wait_for_selector("#keys tbody tr >> nth=1")
        assert "Signing key rotated; the new ES256 key id is" in page.inner_text(".messages")
        assert page.locator("#keys tbody tr").first.inner_text().count("ES256") == 1
        assert page.locator("#keys .key-retiring").count() == 1
        screenshot(page, "keys")

        page.click("nav >> text=Exports")
        page.check("input[name=kind][value=range]")
        page.select_option("#id_preset", "24h")
        page.click("button:has-text('Export')")
        page.wait_for_url(f"{base}/exports/")
        page.evaluate("window.loadedOnce = true")
        page.wait_for_selector(".export-status[data-state=done]", timeout=30_000)
        assert page.evaluate("window.loadedOnce") is True  # htmx polled; no reload
        assert "finished" in page.inner_text(".export-status[data-state=done]")
        screenshot(page, "exports")
        with page.expect_download() as download:
            page.click("a:has-text('audit bundle (JSON, ')")
        bundle = tmp_path / "bundle.json"
        download.value.save_as(bundle)
        assert verify(bundle) == 0
        data = bytearray(bundle.read_bytes())
        at = data.index(b'"price":370') + len(b'"price":3')
        data[at : at + 1] = b"8"
        bundle.write_bytes(bytes(data))
        assert verify(bundle) == 1

        page.click("nav >> text=Audit log")
        actions = page.locator("#audit tbody td:nth-child(3)").all_inner_texts()
        assert actions[:3] == ["export.download", "export.request", "key.rotate"]
        screenshot(page, "audit")

        page.goto(f"{base}/sessions/sess-live/")
        page.click("text=Terminate session…")
        page.fill("textarea[name=detail]", "stopped for a test")
        screenshot(page, "terminate-confirm")
        page.click("button:has-text('Terminate session')")
        page.wait_for_url(f"{base}/sessions/sess-live/")
        page.wait_for_selector("text=operator_terminated")
        assert page.locator("text=Terminate session…").count() == 0
        screenshot(page, "session-terminated")

    assert Session.objects.get(session_id="sess-live").close_reason == "operator_terminated"
    for export in Export.objects.all():
        default_storage.delete(export.bundle.name)
        default_storage.delete(export.summary_csv.name)
