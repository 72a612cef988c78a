"""What a dashboard page says back after an action, read from its HTML: the messages of the
site-wide live region and the error summary of a refused form."""

from __future__ import annotations

import html
import re

MESSAGES = re.compile(r'<div class="messages" role="status">(.*?)</div>', re.S)
SUMMARY = re.compile(r'<div class="error-summary"[^>]*\bdata-error-summary>(.*?)</div>', re.S)


def messages_in(page: str) -> list[str]:
    """The messages the page shows, as read; the region itself is on every page."""
    region = MESSAGES.search(page)
    assert region, "the page has no messages region"
    return [html.unescape(m) for m in re.findall(r"<p[^>]*>(.*?)</p>", region.group(1), re.S)]


def error_summary_in(page: str) -> str:
    """The page's error summary, its links kept, its text unescaped; "" when there is none."""
    found = SUMMARY.search(page)
    return html.unescape(found.group(1)) if found else ""
