"""API keys this process looked up lately, so that a burst of envelopes costs one query.

A process trusts a key it found live for :func:`ttl_seconds` (``OANP_CREDENTIAL_CACHE_SECONDS``,
one second by default; 0 turns the memory off): a revocation made anywhere is
honoured by every process within that, and by the revoking process at once (it forgets the
keys it revoked); an expiry is honoured at once, since the key carries its own. Keys are held
by their digest, never in the clear.

It also remembers when it last recorded each key's use, so that a key's "last used" costs one
write per key and process every :data:`USE_RECORD_SECONDS`, not one per request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection

from django.conf import settings

from arbiter_app.models import AgentCredential

#: Past this many keys the expired ones go, and if none has, all of them.
MAX_KEYS = 10_000
#: How often one process records a key's use at most: the dashboard shows it to the minute.
USE_RECORD_SECONDS = 60.0

_lock = threading.Lock()
_found: dict[str, tuple[float, AgentCredential]] = {}
_recorded: dict[str, float] = {}


def ttl_seconds() -> float:
    """How long a key found live is trusted without asking the database again."""
    return float(settings.OANP_CREDENTIAL_CACHE_SECONDS)


def recall(digest: str) -> AgentCredential | None:
    """The credential of the key with this digest, if it was found live within the TTL."""
    with _lock:
        hit = _found.get(digest)
    if hit is None or hit[0] <= time.monotonic() or hit[1].expired:
        return None
    return hit[1]


def remember(digest: str, credential: AgentCredential) -> None:
    ttl = ttl_seconds()
    if ttl <= 0:
        return
    now = time.monotonic()
    with _lock:
        if len(_found) >= MAX_KEYS:
            for stale in [d for d, (until, _) in _found.items() if until <= now]:
                del _found[stale]
            if len(_found) >= MAX_KEYS:
                _found.clear()
        _found[digest] = (now + ttl, credential)


def use_record_due(prefix: str) -> bool:
    """Whether this process should record a use of the key with ``prefix`` now; once it says
    yes, it says no for that key until :data:`USE_RECORD_SECONDS` have passed."""
    now = time.monotonic()
    with _lock:
        if now < _recorded.get(prefix, float("-inf")):
            return False
        if len(_recorded) >= MAX_KEYS:
            _recorded.clear()
        _recorded[prefix] = now + USE_RECORD_SECONDS
    return True


def forget(prefixes: Collection[str]) -> None:
    """Drop the keys with these prefixes: this process honours their revocation at once."""
    with _lock:
        for digest in [d for d, (_, c) in _found.items() if c.prefix in prefixes]:
            del _found[digest]


def forget_all() -> None:
    with _lock:
        _found.clear()
        _recorded.clear()
