"""A circuit breaker for an optional dependency (Redis as cache or channel layer).

When such a dependency is away, every call to it costs a connection attempt or a timeout, and
the answer is known in advance. After a failure the breaker stays open for ``open_seconds``:
callers skip the dependency and take their fallback at once. Then one call tries again; its
success closes the breaker, so recovery needs no restart.
"""

from __future__ import annotations

import time


class Breaker:
    def __init__(self, *, open_seconds: float) -> None:
        self.open_seconds = open_seconds
        self._open_until = 0.0

    def allows(self) -> bool:
        """Whether to call the dependency now."""
        return time.monotonic() >= self._open_until

    def failed(self) -> None:
        self._open_until = time.monotonic() + self.open_seconds

    def succeeded(self) -> None:
        self._open_until = 0.0
