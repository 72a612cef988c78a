"""API keys: ``Authorization: Bearer oanp_<prefix>_<secret>``, one agent id and role each."""

from __future__ import annotations

import hmac
import time
from functools import cache

from django.conf import settings
from django.core.cache import DEFAULT_CACHE_ALIAS, caches
from django.core.cache.backends.base import BaseCache
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from arbiter_app.models import AgentCredential
from arbiter_app.services import KEY_PREFIX, key_digest


def credential_for(header: str) -> AgentCredential | None:
    """The live credential an ``Authorization`` header names, or ``None``."""
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    key = key.strip()
    head, _, rest = key.partition("_")
    prefix, _, secret = rest.partition("_")  # the secret itself may hold "_"
    if head != KEY_PREFIX or not prefix or not secret:
        return None
    credential = AgentCredential.objects.filter(prefix=prefix, revoked_at__isnull=True).first()
    if credential is None or not hmac.compare_digest(credential.digest, key_digest(key)):
        return None
    return credential


class ApiKeyAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[AgentCredential, AgentCredential] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        credential = credential_for(header)
        if credential is None:
            raise AuthenticationFailed("the API key is unknown or revoked")
        return credential, credential

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="oanp"'


WINDOW_SECONDS = 60


@cache
def _budgets() -> BaseCache:
    # Django gives every request context a cache object of its own, and with Redis a connection
    # pool of its own: under ASGI that is a new connection per request. One object for the
    # process keeps one pool.
    return caches.create_connection(DEFAULT_CACHE_ALIAS)


class ApiKeyRateThrottle(BaseThrottle):
    """``settings.OANP_RATE_LIMIT_PER_MINUTE`` requests per API key in each clock minute,
    counted with one atomic increment in the shared cache."""

    def __init__(self) -> None:
        self.retry_after: float | None = None

    def allow_request(self, request: Request, view: object) -> bool:
        credential = request.auth
        if not isinstance(credential, AgentCredential):
            return True
        now = time.time()
        window = int(now // WINDOW_SECONDS) * WINDOW_SECONDS
        key = f"oanp-rate:{credential.prefix}:{window}"
        store = _budgets()
        store.add(key, 0, timeout=2 * WINDOW_SECONDS)
        try:
            count = store.incr(key)
        except ValueError:  # the counter expired between the two calls: a new window
            count = 1
        if count <= settings.OANP_RATE_LIMIT_PER_MINUTE:
            return True
        self.retry_after = window + WINDOW_SECONDS - now
        return False

    def wait(self) -> float | None:
        return self.retry_after
