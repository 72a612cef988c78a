"""Failed sign-ins, counted against the budget the API keeps for failed authentications per
client address (``OANP_AUTH_FAILURES_PER_MINUTE``, docs/protocol.md §14.7): one budget, so
an address guessing passwords on the dashboard is slowed like one guessing API keys."""

from __future__ import annotations

from collections.abc import Mapping

from arbiter_app import limits
from arbiter_app.limits import RateLimited, client_address

__all__ = ["RateLimited", "admit_sign_in", "count_failed_sign_in"]


def admit_sign_in(meta: Mapping[str, str]) -> None:
    """Refuse (:class:`RateLimited`) a request from an address past its budget this minute."""
    limits.check_address(client_address(meta))


def count_failed_sign_in(meta: Mapping[str, str]) -> None:
    limits.record_failure(client_address(meta))
