"""Rate limits, in docs/protocol.md §14's order of refusals.

Two budgets, each counted per clock minute:

- ``OANP_RATE_LIMIT_PER_MINUTE`` requests per API key. Every authenticated request is charged
  when it arrives, but the 429 is answered last, where section 7 lists it: a throttled key's
  malformed body still gets its 400 and its replay its 200; only a request that would change
  or read something is refused (:meth:`Charge.admit`).
- ``OANP_AUTH_FAILURES_PER_MINUTE`` failed authentications per client address. Past it, the
  address gets 429 before its key is even looked up, so a flood of made-up keys costs no
  database query.

The counters live in the shared cache (Redis), so every server process counts against one
budget. While the cache is away, each process counts on its own (the same limits, per
process) and tries the cache again after a few seconds: the API keeps answering and stays
limited, and the budgets are shared again once the cache is back.

On Redis a count is one round trip, ``INCR`` and ``EXPIRE`` pipelined, on one client for the
process: through Django's cache API it took three (``SET NX``, ``EXISTS``, ``INCR``), each on
a client built for the call. A request whose key the process already knows live takes one
round trip for the address's check and the key's count together (a script run by Redis:
:func:`check_address_and_charge`). Elsewhere (the development default's memory cache) the
cache API counts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import redis
from django.conf import settings
from django.core.cache import DEFAULT_CACHE_ALIAS, caches
from django.core.cache.backends.base import BaseCache
from django.core.cache.backends.redis import RedisCache

from arbiter_app.breaker import Breaker
from arbiter_app.refusals import RateLimited

log = logging.getLogger(__name__)

WINDOW_SECONDS = 60


@cache
def _shared() -> BaseCache:
    # Django gives every request context a cache object of its own, and with Redis a connection
    # pool of its own: under ASGI that is a new connection per request. One object for the
    # process keeps one pool.
    return caches.create_connection(DEFAULT_CACHE_ALIAS)


@cache
def redis_client() -> redis.Redis | None:
    """The process's client of the shared cache's Redis, when the cache is on Redis."""
    if not isinstance(_shared(), RedisCache):
        return None
    config = settings.CACHES[DEFAULT_CACHE_ALIAS]
    return redis.Redis.from_url(str(config["LOCATION"]), **config.get("OPTIONS", {}))


def _name(key: str, window: int) -> str:
    return f"oanp-rate:{key}:{window}"


#: While open, counting skips the shared cache and uses this process's own counters.
cache_breaker = Breaker(open_seconds=5.0)
_local: Counter[str] = Counter()
_local_window = 0
_local_lock = threading.Lock()


def _count_locally(key: str, window: int) -> int:
    global _local_window
    with _local_lock:
        if window != _local_window:  # a new minute: the old counters are done with
            _local.clear()
            _local_window = window
        _local[key] += 1
        return _local[key]


def _shared_count(key: str, window: int) -> int:
    name = _name(key, window)
    client = redis_client()
    if client is not None:
        stored = _shared().make_and_validate_key(name)  # the name the cache API reads
        pipe = client.pipeline(transaction=False)
        pipe.incr(stored)
        pipe.expire(stored, 2 * WINDOW_SECONDS)
        count, _ = pipe.execute()
        return int(count)
    store = _shared()
    store.add(name, 0, timeout=2 * WINDOW_SECONDS)
    try:
        return int(store.incr(name))
    except ValueError:  # the counter expired between the two calls: a new window
        return 1


def _count(key: str, window: int) -> int:
    """One more request under ``key`` in the minute starting at ``window``; the count so far."""
    if cache_breaker.allows():
        try:
            count = _shared_count(key, window)
        except Exception as error:
            log.warning("rate limits counted per process, the cache is away: %r", error)
            cache_breaker.failed()
        else:
            cache_breaker.succeeded()
            return count
    return _count_locally(key, window)


def current_window() -> tuple[int, float]:
    now = time.time()
    window = int(now // WINDOW_SECONDS) * WINDOW_SECONDS
    return window, window + WINDOW_SECONDS - now


@dataclass(frozen=True, slots=True)
class Charge:
    """A request's charge against its key's budget; :meth:`admit` refuses it if over."""

    over: RateLimited | None = None

    def admit(self) -> None:
        """Called once every other check passed, just before the request acts."""
        if self.over is not None:
            raise self.over


def charge(prefix: str) -> Charge:
    window, remaining = current_window()
    return _charged(_count(f"key:{prefix}", window), remaining)


def _charged(count: int, remaining: float) -> Charge:
    if count <= settings.OANP_RATE_LIMIT_PER_MINUTE:
        return Charge()
    return Charge(
        RateLimited(
            f"this API key made over {settings.OANP_RATE_LIMIT_PER_MINUTE} requests this minute",
            retry_after=remaining,
        )
    )


def client_address(meta: Mapping[str, str]) -> str:
    """The address a request's failed authentications count against, API keys and dashboard
    sign-ins alike: its ``REMOTE_ADDR``, the client as oanp_site.forwarded found it."""
    return meta.get("REMOTE_ADDR") or "unknown"


def check_address(address: str) -> None:
    """Refuse an address that failed authentication too often this minute."""
    window, remaining = current_window()
    failures = _peek(f"failed:{address}", window)
    if failures >= settings.OANP_AUTH_FAILURES_PER_MINUTE:
        raise _address_refused(address, remaining)


def _address_refused(address: str, remaining: float) -> RateLimited:
    return RateLimited(
        f"too many requests without a valid API key from {address} this minute",
        retry_after=remaining,
    )


#: :func:`check_address`, then :func:`charge` only when the address may go on, in one script.
_ADMIT = """
local failures = tonumber(redis.call('GET', KEYS[1]) or '0')
if failures >= tonumber(ARGV[1]) then return 0 end
local count = redis.call('INCR', KEYS[2])
redis.call('EXPIRE', KEYS[2], ARGV[2])
return count
"""


def check_address_and_charge(address: str, prefix: str) -> Charge:
    """:func:`check_address` and then :func:`charge`, for a key already known live, so that
    no look-up comes between them: on Redis in one round trip, a script that counts the key's
    request only when its address may go on, as the two calls would."""
    client = redis_client()
    if client is None or not cache_breaker.allows():
        check_address(address)
        return charge(prefix)
    window, remaining = current_window()
    names = [
        _shared().make_and_validate_key(_name(key, window))
        for key in (f"failed:{address}", f"key:{prefix}")
    ]
    try:
        count = int(
            _admit_script()(
                keys=names,
                args=[settings.OANP_AUTH_FAILURES_PER_MINUTE, 2 * WINDOW_SECONDS],
                client=client,
            )
        )
    except Exception as error:
        log.warning("rate limits counted per process, the cache is away: %r", error)
        cache_breaker.failed()
        check_address(address)
        return charge(prefix)
    cache_breaker.succeeded()
    if count == 0:
        raise _address_refused(address, remaining)
    return _charged(count, remaining)


@cache
def _admit_script() -> Any:
    client = redis_client()
    assert client is not None  # asked for only on Redis
    return client.register_script(_ADMIT)


def record_failure(address: str) -> None:
    window, _ = current_window()
    _count(f"failed:{address}", window)


def _peek(key: str, window: int) -> int:
    if cache_breaker.allows():
        name = _name(key, window)
        client = redis_client()
        try:
            if client is None:
                value = _shared().get(name)
            else:
                value = client.get(_shared().make_and_validate_key(name))
        except Exception:
            cache_breaker.failed()
        else:
            cache_breaker.succeeded()
            return int(value or 0)
    with _local_lock:
        return _local[key] if window == _local_window else 0
