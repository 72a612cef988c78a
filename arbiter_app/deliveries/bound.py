"""The bound on deliveries per target: at most ``OANP_DELIVERIES_PER_TARGET`` attempts in flight
at once to one origin (scheme, host and port), so that a slow or hanging receiver holds that
many of the delivery worker's threads and no more, and everyone else's deliveries go on.

An attempt in flight is one with a live lease in the database: unanswered, and started within
its lease. They are counted in the transaction that would take the next lease, under a lock
per origin held until it commits, so two workers never both see room for the last place. An
attempt that finds none is deferred: its delivery falls due again a moment later, with its
retry budget untouched.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial

import httpx
from django.conf import settings
from django.db import connection, transaction

from arbiter_app.deliveries import outbound
from arbiter_app.models import CallbackCursor, DeliveryAttempt, Handoff

#: How long a deferred delivery waits, at least; each waits up to twice as long, so that those
#: deferred together do not all come back at the same moment.
DEFER_SECONDS = 2.0
#: The first key of the per-origin advisory locks (the second is the origin's hash): a space of
#: their own, apart from any other lock the database takes.
_LOCK_SPACE = 0x0A4E_0D11


def origin_of(url: str) -> str:
    """Where an attempt to ``url`` goes, as the bound counts it: scheme, host and port, the
    port written even when it is the scheme's own."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        # Such a URL is refused before any request (outbound.pin): it counts on its own.
        return url
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    host = f"[{parsed.host}]" if ":" in parsed.host else parsed.host
    return f"{parsed.scheme}://{host}:{port}"


def _lock(origin: str) -> None:
    if connection.vendor != "postgresql":
        # SQLite's transactions take the write lock at BEGIN (the settings' IMMEDIATE): one
        # runs at a time, and needs no lock of its own.
        return
    # A transaction's lock, not a session's: it ends with the commit or the rollback however
    # the task fares, and holds behind a pooler in transaction mode (PgBouncer) too.
    digest = hashlib.blake2b(origin.encode(), digest_size=4).digest()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(%s, %s)",
            [_LOCK_SPACE, int.from_bytes(digest, "big", signed=True)],
        )


def has_room(origin: str, now: datetime) -> bool:
    """Within the transaction that would take an attempt's lease: whether an attempt to
    ``origin`` may start at ``now``. Locks the origin until that transaction ends, so whoever
    asks next counts the lease it takes."""
    _lock(origin)
    live = DeliveryAttempt.objects.filter(
        origin=origin, outcome="", started_at__gt=now - outbound.lease()
    )
    return live.count() < settings.OANP_DELIVERIES_PER_TARGET


def defer(
    delivery: Handoff | CallbackCursor, *, now: datetime, send: Callable[[int, float], bool]
) -> None:
    """Within the transaction that found no room: make the delivery due again a moment after
    ``now``, and ask the worker for it then (``send``, once the transaction commits); should
    the broker be away, the sweep finds it due."""
    wait = random.uniform(DEFER_SECONDS, 2 * DEFER_SECONDS)  # noqa: S311 - a spread, not a secret
    delivery.next_attempt_at = now + timedelta(seconds=wait)
    delivery.save(update_fields=["next_attempt_at"])
    transaction.on_commit(partial(send, delivery.pk, wait), robust=True)
