"""Headless Chromium for the dashboard's tests (Debian's, driven by Playwright).

The pages come with a Content-Security-Policy without 'unsafe-eval' or 'unsafe-inline', and
the tests drive them under it: ``page.wait_for_function`` takes a function (``"() => …"``),
since Playwright evaluates an expression anew on each poll, which the policy refuses; and a
script is evaluated, not added as an inline <script>."""

from __future__ import annotations

import time
from base64 import b32decode
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from django_otp.oath import TOTP
from playwright.sync_api import Browser, Page, ViewportSize, sync_playwright

from tests.conftest import ROOT

CHROMIUM = "/usr/bin/chromium"
# Without these, Chromium keeps calling home from a machine with no way out.
QUIET = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = ROOT / "var" / "screenshots"
#: A desk's width and a phone's.
WIDTHS: dict[str, ViewportSize] = {
    "1440": {"width": 1440, "height": 900},
    "390": {"width": 390, "height": 844},
}
Scheme = Literal["light", "dark"]
#: The stylesheet follows prefers-color-scheme: each is judged.
SCHEMES: tuple[Scheme, ...] = ("light", "dark")
#: axe-core, vendored with the tests: injected from disk, so checking a page needs no network.
AXE = ROOT / "tests" / "vendor" / "axe-core" / "axe.min.js"
#: The rules of WCAG 2.0, 2.1 and 2.2 at levels A and AA, the usual bar of conformance (2.2
#: adds a minimum size for what a finger taps, which a phone's user needs), and axe's best
#: practices: they judge what WCAG leaves open and the pages care about (landmarks holding all
#: content, one h1 and no skipped heading level, unique landmark names). AAA is no bar the
#: pages set; axe's experimental rules, which change between releases, run only when named.
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]
#: Each violation as a failure message reads it: which rule, how bad, and where.
AXE_RUN = """async (tags) => {
  // Only the violations are read: axe then spares itself the details of what passed.
  const results = await axe.run(document, {
    runOnly: { type: "tag", values: tags },
    resultTypes: ["violations"],
  });
  return results.violations.map((v) => ({
    id: v.id,
    impact: v.impact,
    help: v.help,
    nodes: v.nodes.map((n) => ({ target: n.target.join(" "), why: n.failureSummary })),
  }));
}"""


@contextmanager
def chromium() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=QUIET)
        try:
            yield browser
        finally:
            browser.close()


def sign_in(page: Page, base_url: str, username: str, password: str) -> None:
    page.goto(f"{base_url}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base_url}/")


def screenshot(page: Page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def axe_violations(page: Page) -> list[dict[str, Any]]:
    """What axe-core finds wrong with the page as it stands, by ``AXE_TAGS``."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        # Evaluated, not added as a <script>: the pages' Content-Security-Policy refuses inline
        # scripts, and the suite judges the pages under it.
        page.evaluate(AXE.read_text())
    violations: list[dict[str, Any]] = page.evaluate(AXE_RUN, AXE_TAGS)
    return violations


def look(page: Page, name: str) -> None:
    """Screenshot the page as it stands at each width in each scheme
    (var/screenshots/<name>-<scheme>-<width>.png), and judge each with axe-core; the page is
    left at the desk's width in the light scheme."""
    for scheme in SCHEMES:
        page.emulate_media(color_scheme=scheme)
        for width, viewport in WIDTHS.items():
            page.set_viewport_size(viewport)
            screenshot(page, f"{name}-{scheme}-{width}")
            assert axe_violations(page) == [], (name, scheme, width)
    page.emulate_media(color_scheme="light")
    page.set_viewport_size(WIDTHS["1440"])


def app_code(secret: str, steps_ahead: int = 0) -> str:
    """What an authenticator app given ``secret`` (as the set-up page shows it) shows now, or
    ``steps_ahead`` periods of 30 s on."""
    totp = TOTP(b32decode(secret.replace(" ", "")))
    totp.time = time.time() + 30 * steps_ahead
    return f"{totp.token():06d}"
