"""The keys a merchant agent signs its envelopes with, as its owner keeps them from the agent's
page (docs/protocol.md §17): registered, retired, and whether every envelope of the agent must
be signed.

The arbiter checks every signature against these keys, so it keeps them
(:mod:`arbiter_app.services`); this module reads them for the page and audits each act. An
audit detail names a key by its kid and algorithm only: a private key pasted by mistake is
refused before anything is kept (:mod:`sessions_app.party_key_forms`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from arbiter_app import selectors as arbiter
from arbiter_app import services as arbiter_services
from arbiter_app.models import AgentKey
from sessions_app.models import AgentProfile
from sessions_app.services import audit

#: How many characters of a kid (a 43-character thumbprint) a table shows: enough to tell an
#: agent's few keys apart at a glance; the full kid is in the row's title and copy button.
SHORT_KID_CHARS = 10


@dataclass(frozen=True)
class KeyRow:
    """One registered key as the agent's page shows it."""

    kid: str
    alg: str
    registered_at: datetime
    retired_at: datetime | None
    #: The public JWK as registered, indented: what the owner compares with its own copy.
    jwk_text: str

    @property
    def short_kid(self) -> str:
        return f"{self.kid[:SHORT_KID_CHARS]}…"

    @property
    def in_force(self) -> bool:
        return self.retired_at is None


def _row(key: AgentKey) -> KeyRow:
    return KeyRow(
        kid=key.kid,
        alg=key.jwk.get("alg", ""),
        registered_at=key.registered_at,
        retired_at=key.retired_at,
        jwk_text=json.dumps(key.jwk, indent=2),
    )


def key_rows(profile: AgentProfile) -> list[KeyRow]:
    """The agent's keys, newest first, retired ones too: they still check old signatures."""
    return [_row(key) for key in reversed(arbiter.agent_keys(profile.agent_id))]


def key_row(profile: AgentProfile, kid: str) -> KeyRow | None:
    """The agent's key ``kid``; ``None`` when it registered no such key."""
    return next((row for row in key_rows(profile) if row.kid == kid), None)


def signatures_required(profile: AgentProfile) -> bool:
    return arbiter.signatures_required(profile.agent_id)


@transaction.atomic
def register_key(
    *, actor: AbstractBaseUser, profile: AgentProfile, jwk: object
) -> tuple[KeyRow, bool]:
    """Register the public ``jwk`` for the agent: its row and whether it is new. A key
    registered before comes back as it stands, retired if it was. Raises the arbiter's refusal
    (``private_key_sent``, ``bad_party_key``) for anything else, and then keeps nothing."""
    key, created = arbiter_services.register_agent_key(agent_id=profile.agent_id, jwk=jwk)
    if created:
        audit(actor, "agent_key.registered", profile.agent_id, kid=key.kid, alg=key.jwk["alg"])
    return _row(key), created


@transaction.atomic
def retire_key(*, actor: AbstractBaseUser, profile: AgentProfile, kid: str) -> bool:
    """Retire the agent's key ``kid`` from now on; whether it was in force until now. The caller
    checks that the agent registered it (:func:`key_row`)."""
    row = key_row(profile, kid)
    in_force = row is not None and row.in_force
    arbiter_services.retire_agent_key(agent_id=profile.agent_id, kid=kid)
    if in_force:
        audit(actor, "agent_key.retired", profile.agent_id, kid=kid)
    return in_force


@transaction.atomic
def require_signatures(*, actor: AbstractBaseUser, profile: AgentProfile, required: bool) -> bool:
    """Whether every envelope of the agent must be signed, from now on; whether that changed.
    A hosted agent signs with a key of its own (:mod:`sessions_app.hosted_keys`), so it may
    be required of it as of any agent."""
    if signatures_required(profile) == required:
        return False
    arbiter_services.require_signatures(agent_id=profile.agent_id, required=required)
    audit(actor, "agent_key.signatures_required", profile.agent_id, required=required)
    return True


def keys_in_force(rows: list[KeyRow]) -> int:
    return sum(row.in_force for row in rows)
