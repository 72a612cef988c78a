"""Signing keys: rotation, by an admin or by the policy's schedule. Each rotation makes a new
key active and retires the one it replaces, which stays published while agents still see it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from arbiter_app import signing_keys
from arbiter_app.models import KeyState, SigningKey


def rotate_signing_key(*, alg: str | None = None, now: datetime | None = None) -> SigningKey:
    """Make a new key active; the one it replaces retires but stays in the JWKS for now."""
    now = now or timezone.now()
    fresh = signing_keys.generate(alg or settings.OANP_SIGNING_ALG)
    with transaction.atomic():
        current = list(SigningKey.objects.select_for_update().filter(state=KeyState.ACTIVE))
        for old in current:
            old.state, old.retiring_at = KeyState.RETIRING, now
            old.save(update_fields=["state", "retiring_at"])
        return signing_keys.store(fresh, now=now)


def maintain_signing_keys(*, now: datetime | None = None) -> tuple[SigningKey | None, int]:
    """The rotation policy: a new key when the active one is ``OANP_KEY_ROTATION_DAYS`` old;
    a retiring key retired ``OANP_KEY_OVERLAP_DAYS`` after it was replaced.

    Returns the new active key, if one was made, and how many keys retired. Retired keys
    leave the JWKS but stay at ``/oanp/v0.1/keys`` for good.
    """
    now = now or timezone.now()
    active = signing_keys.ensure_active_key()
    rotated = None
    if now - active.activated_at >= timedelta(days=settings.OANP_KEY_ROTATION_DAYS):
        rotated = rotate_signing_key(now=now)
    overlap_ended = now - timedelta(days=settings.OANP_KEY_OVERLAP_DAYS)
    retired = SigningKey.objects.filter(
        state=KeyState.RETIRING, retiring_at__lte=overlap_ended
    ).update(state=KeyState.RETIRED, retired_at=now)
    return rotated, retired
