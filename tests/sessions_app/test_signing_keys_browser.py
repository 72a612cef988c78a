"""In Chromium against the real ASGI server: a merchant's manager adds its agent's signing keys,
one pasted and one uploaded as a file, copies a kid, is refused a private key with nothing
stored, retires a key after confirming, and switches on the requirement that the agent sign
every envelope. Screenshots in var/screenshots; the section is judged by axe at both widths in
both schemes."""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import pytest
from django.db import connections
from playwright.sync_api import expect

from arbiter_app import selectors as arbiter
from arbiter_app.models import AgentKey
from oanp.wire.signing import SigningKey
from sessions_app.models import AgentProfile, MemberRole
from tests.conftest import LiveServer
from tests.sessions_app.browser import SCREENSHOTS, chromium, look, screenshot, sign_in
from tests.support.factories.accounts import PASSWORD, member, merchant

pytestmark = pytest.mark.django_db(transaction=True)

PASTED = SigningKey.from_ed25519_seed(bytes(32))
UPLOADED = SigningKey.from_ed25519_seed(bytes(range(32)))
T = TypeVar("T")


def off_the_loop(read: Callable[[], T]) -> T:
    """``read`` on a thread of its own: Django refuses its ORM on the thread where Playwright's
    event loop runs."""

    def once() -> T:
        try:
            return read()
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(once).result()


def keys_stored() -> int:
    return AgentKey.objects.filter(agent_id="skyways-ext").count()


def required() -> bool:
    return arbiter.signatures_required("skyways-ext")


def test_a_merchant_adds_retires_and_requires_signing_keys(
    live_arbiter: LiveServer, tmp_path: Path
) -> None:
    shop = merchant("skyways")
    AgentProfile.objects.create(merchant=shop, agent_id="skyways-ext", mode="external")
    member("mia", MemberRole.MERCHANT_MANAGER, shop)
    base = live_arbiter.url
    agent_page = f"{base}/agents/skyways-ext/"
    key_file = tmp_path / "skyways-ext.jwk"
    key_file.write_text(json.dumps(UPLOADED.public_jwk(), indent=2))
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
        page = context.new_page()
        sign_in(page, base, "mia", PASSWORD)
        page.goto(agent_page)
        section = page.locator("#signing")
        expect(section.locator(".empty")).to_contain_text("No signing keys")
        expect(page.locator("#signatures-switch")).to_have_attribute("aria-checked", "false")
        section.scroll_into_view_if_needed()
        screenshot(page, "signing-keys-empty")

        page.fill("#id_jwk", json.dumps(PASTED.public_jwk()))
        page.click("#party-key-form button:has-text('Add key')")
        page.wait_for_url(f"{agent_page}#signing-h")
        expect(page.locator(".messages")).to_have_text(
            f"Key {PASTED.kid} added: the agent may sign with it now."
        )
        pasted_row = page.locator("#signing-keys tbody tr", has_text=PASTED.kid[:10])
        expect(pasted_row).to_contain_text("Ed25519")
        expect(pasted_row).to_contain_text("in force")
        expect(pasted_row.locator("code")).to_have_attribute("title", PASTED.kid)

        page.set_input_files("#id_jwk_file", str(key_file))
        page.click("#party-key-form button:has-text('Add key')")
        page.wait_for_url(f"{agent_page}#signing-h")
        expect(page.locator(".messages")).to_have_text(
            f"Key {UPLOADED.kid} added: the agent may sign with it now."
        )
        expect(page.locator("#signing-keys tbody tr")).to_have_count(2)
        uploaded_row = page.locator("#signing-keys tbody tr", has_text=UPLOADED.kid[:10])
        expect(uploaded_row).to_contain_text("in force")

        uploaded_row.locator("button:has-text('Copy')").click()
        expect(uploaded_row.locator(".copy-status")).to_have_text("Copied.")
        assert page.evaluate("navigator.clipboard.readText()") == UPLOADED.kid
        look(page, "signing-keys-listed")
        section.screenshot(path=str(SCREENSHOTS / "signing-keys-section-listed.png"))

        page.fill("#id_jwk", json.dumps(PASTED.private_jwk()))
        page.click("#party-key-form button:has-text('Add key')")
        summary = page.locator("#party-key-form [data-error-summary]")
        expect(summary).to_contain_text(
            "This is a private key: paste the public key only. Nothing was stored."
        )
        # What was pasted is not sent back: the private key is in no page the browser keeps.
        expect(page.locator("#id_jwk")).to_have_value("")
        assert PASTED.private_jwk()["d"] not in page.content()
        assert off_the_loop(keys_stored) == 2
        look(page, "signing-keys-private-refused")
        section.screenshot(path=str(SCREENSHOTS / "signing-keys-section-refused.png"))

        page.goto(agent_page)
        pasted_row.locator("a:has-text('Retire…')").click()
        page.wait_for_url(f"{agent_page}signing-keys/{PASTED.kid}/retire/")
        expect(page.locator("main")).to_contain_text("Are you sure?")
        look(page, "signing-key-retire-confirm")
        page.click("text=Cancel")
        page.wait_for_url(f"{agent_page}#signing-h")
        expect(pasted_row).to_contain_text("in force")

        pasted_row.locator("a:has-text('Retire…')").click()
        page.click(f"button:has-text('Retire key {PASTED.kid[:10]}')")
        page.wait_for_url(f"{agent_page}#signing-h")
        expect(page.locator(".messages")).to_have_text(
            f"Key {PASTED.kid} retired: envelopes signed with it are refused."
        )
        expect(pasted_row.locator(".key-state")).to_contain_text("retired")
        expect(pasted_row.locator("a:has-text('Retire…')")).to_have_count(0)
        expect(uploaded_row).to_contain_text("in force")

        assert not off_the_loop(required)
        page.click("#signatures-switch")
        page.wait_for_url(f"{agent_page}#signing-h")
        expect(page.locator("#signatures-switch")).to_have_attribute("aria-checked", "true")
        expect(page.locator(".messages")).to_have_text(
            "Signatures required: this agent's unsigned envelopes are refused (signature_required)."
        )
        assert off_the_loop(required)
        look(page, "signing-keys-required")
        section.screenshot(path=str(SCREENSHOTS / "signing-keys-section-required.png"))
    retired = AgentKey.objects.get(agent_id="skyways-ext", kid=PASTED.kid)
    assert retired.retired_at is not None
