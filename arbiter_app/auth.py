"""API keys: ``Authorization: Bearer oanp_<prefix>_<secret>``, one agent id and role each."""

from __future__ import annotations

import hmac

from django.conf import settings
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

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


class ApiKeyRateThrottle(SimpleRateThrottle):
    """Requests per API key and minute, ``settings.OANP_RATE_LIMIT_PER_MINUTE``."""

    scope = "api_key"

    def get_rate(self) -> str:
        return f"{settings.OANP_RATE_LIMIT_PER_MINUTE}/min"

    def get_cache_key(self, request: Request, view: object) -> str | None:
        credential = request.auth
        if not isinstance(credential, AgentCredential):
            return None
        return self.cache_format % {"scope": self.scope, "ident": credential.prefix}
