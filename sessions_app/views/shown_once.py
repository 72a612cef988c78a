"""Secrets a page shows once (a new API key, a generated webhook secret, an invitation's link):
the action that made one seals it in the user's session across its redirect, and the one page
that shows it drops it from there, so a reload neither shows it again nor makes another."""

from __future__ import annotations

from django.http import HttpRequest

from sessions_app.vault import seal_text, unseal_text


def keep(request: HttpRequest, slot: str, secret: str, **about: object) -> None:
    request.session[slot] = {**about, "sealed": seal_text(secret).decode()}


def take(request: HttpRequest, slot: str, **expected: object) -> tuple[str, dict[str, object]]:
    """The secret kept in ``slot`` and what was said about it; ``("", {})`` when there is none,
    or it is not about ``expected`` (another agent's key is not shown on this agent's page)."""
    kept = request.session.pop(slot, None)
    if kept is None or any(kept.get(name) != value for name, value in expected.items()):
        return "", {}
    sealed = kept.pop("sealed")
    return unseal_text(sealed.encode()), kept
