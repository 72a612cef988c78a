"""API keys: ``Authorization: Bearer oanp_<prefix>_<secret>``, one agent id and role each."""

from __future__ import annotations

import hmac

from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request

from arbiter_app import credential_cache, limits
from arbiter_app.models import AgentCredential
from arbiter_app.refusals import WWW_AUTHENTICATE, Unauthorized
from arbiter_app.services.api_keys import KEY_PREFIX, key_digest, record_use


def _presented(header: str) -> tuple[str, str] | None:
    """The key of a ``Bearer`` header and its prefix, when it has the shape of one."""
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    key = key.strip()
    head, _, rest = key.partition("_")
    prefix, _, secret = rest.partition("_")  # the secret itself may hold "_"
    if head != KEY_PREFIX or not prefix or not secret:
        return None
    return key, prefix


def credential_for(header: str) -> AgentCredential | None:
    """The live (neither revoked nor expired) credential an ``Authorization`` header names, or
    ``None``. Its use is recorded at most once a minute per process."""
    presented = _presented(header)
    if presented is None:
        return None
    key, prefix = presented
    digest = key_digest(key)
    credential = credential_cache.recall(digest)
    if credential is None:
        credential = AgentCredential.objects.filter(prefix=prefix, revoked_at__isnull=True).first()
        if (
            credential is None
            or credential.expired
            or not hmac.compare_digest(credential.digest, digest)
        ):
            return None
        credential_cache.remember(digest, credential)
    _used(credential)
    return credential


def remembered(header: str) -> AgentCredential | None:
    """:func:`credential_for` when this process found the key live lately
    (:mod:`arbiter_app.credential_cache`), with no query; ``None`` when it must be looked up."""
    presented = _presented(header)
    credential = None if presented is None else credential_cache.recall(key_digest(presented[0]))
    if credential is not None:
        _used(credential)
    return credential


def _used(credential: AgentCredential) -> None:
    if credential_cache.use_record_due(credential.prefix):
        record_use(credential=credential)


def authenticate(header: str, address: str) -> AgentCredential | None:
    """The credential of a request's ``Authorization`` header, or ``None`` (a 401): a failure
    is counted against the client's address, and an address past its budget of failures is
    refused (:class:`~arbiter_app.limits.RateLimited`) before its key is looked up."""
    limits.check_address(address)
    credential = credential_for(header) if header else None
    if credential is None:
        limits.record_failure(address)
    return credential


class ApiKeyAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[AgentCredential, AgentCredential] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        credential = authenticate(header, limits.client_address(request.META))
        if credential is None:
            raise Unauthorized.of(has_key=bool(header))
        return credential, credential

    def authenticate_header(self, request: Request) -> str:
        return WWW_AUTHENTICATE
