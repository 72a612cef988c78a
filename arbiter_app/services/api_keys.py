"""API keys: issued once in full, kept only as a SHA-256, revoked with immediate effect on
every stream opened with them."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from django.db import transaction
from django.utils import timezone

from arbiter_app import credential_cache, events
from arbiter_app.models import (
    AgentCredential,
    AgentRole,
)
from oanp.wire.envelope import IDENTIFIER_RULE, is_identifier

KEY_PREFIX = "oanp"
#: As long as the name of a key's owner may be.
MAX_OWNER_CHARS = AgentCredential._meta.get_field("owner").max_length


@dataclass(frozen=True, slots=True)
class IssuedKey:
    credential: AgentCredential
    #: The whole key. It is shown this once; only its SHA-256 is stored.
    api_key: str


def key_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def issue_credential(
    *,
    agent_id: str,
    role: str,
    label: str = "",
    expires_at: datetime | None = None,
    owner: str = "",
) -> IssuedKey:
    """A new API key for ``agent_id`` speaking as ``role``, issued to ``owner`` (none when
    empty), refused like a revoked one from ``expires_at`` on; ``ValueError`` for a bad id,
    role or owner, or an expiry already past."""
    if not is_identifier(agent_id):
        raise ValueError(f"agent id {agent_id!r} is not {IDENTIFIER_RULE}")
    if role not in AgentRole.values:
        raise ValueError(f"role {role!r} is not one of {', '.join(AgentRole.values)}")
    if len(owner) > MAX_OWNER_CHARS:
        raise ValueError(f"an owner's name is at most {MAX_OWNER_CHARS} characters")
    if expires_at is not None and expires_at <= timezone.now():
        raise ValueError("a key's expiry must be in the future")
    prefix = secrets.token_hex(6)
    api_key = f"{KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(24)}"
    credential = AgentCredential.objects.create(
        agent_id=agent_id,
        role=role,
        prefix=prefix,
        digest=key_digest(api_key),
        label=label,
        expires_at=expires_at,
        owner=owner,
    )
    return IssuedKey(credential, api_key)


def assign_owner(*, agent_id: str, role: str, owner: str) -> int:
    """Record ``owner`` on every key ever issued to ``agent_id`` as ``role``, as when an
    organisation claims an agent issued to nobody; how many keys. ``ValueError`` for an owner
    too long. The ``self_dealing`` check reads owners as they stand at each open."""
    if not owner or len(owner) > MAX_OWNER_CHARS:
        raise ValueError(f"an owner's name is 1 to {MAX_OWNER_CHARS} characters")
    return AgentCredential.objects.filter(agent_id=agent_id, role=role).update(owner=owner)


def record_use(*, credential: AgentCredential) -> None:
    """Note that ``credential`` authenticated a request now. One UPDATE by key, no lock taken:
    a use recorded a moment late, or twice, harms nothing."""
    now = timezone.now()
    AgentCredential.objects.filter(pk=credential.pk).update(last_used_at=now)
    credential.last_used_at = now


def revoke_credential(*, credential: AgentCredential) -> None:
    revoke_credentials(agent_id=credential.agent_id, prefix=credential.prefix)


def revoke_credentials(*, agent_id: str, prefix: str | None = None) -> list[AgentCredential]:
    """Revoke the agent's live key with ``prefix``, or every live key of the agent when
    ``prefix`` is ``None``; the keys revoked now. Every stream opened with one of them ends
    within seconds (:mod:`arbiter_app.api.streams`)."""
    with transaction.atomic():
        live = AgentCredential.objects.select_for_update().filter(
            agent_id=agent_id, revoked_at__isnull=True
        )
        if prefix is not None:
            live = live.filter(prefix=prefix)
        revoked = list(live.order_by("created_at", "pk"))
        now = timezone.now()
        AgentCredential.objects.filter(pk__in=[c.pk for c in revoked]).update(revoked_at=now)
        for credential in revoked:
            credential.revoked_at = now
        prefixes = [c.prefix for c in revoked]
        if prefixes:
            # Forgotten now and again once committed: a thread of this process may have
            # found a key live in between, before the revocation was visible.
            credential_cache.forget(prefixes)
            transaction.on_commit(partial(credential_cache.forget, prefixes))
            transaction.on_commit(partial(events.announce_revocation, prefixes=prefixes))
    return revoked
