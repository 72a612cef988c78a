"""The keys agents sign their envelopes with (docs/protocol.md §12): registered, retired, and
whether an agent's owner requires every envelope signed; and the check of an envelope's
signature, which the session's step makes first, with the moment it logs the envelope at.

Keys are never deleted, so a signature stays checkable, by the arbiter and by any auditor of an
export, after its key is retired.
"""

from __future__ import annotations

from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from arbiter_app.models import AgentKey, SignatureRequirement
from arbiter_app.refusals import UnknownAgentKey
from oanp.wire.envelope import Envelope
from oanp.wire.errors import SignatureRequired
from oanp.wire.party_signatures import check_party_signature, registrable_key


def register_agent_key(*, agent_id: str, jwk: object) -> tuple[AgentKey, bool]:
    """Register the public ``jwk`` for ``agent_id``: the key and whether it is new. A key
    registered before is answered as it stands (retired, if it was: a kid once retired does not
    come back, or the signatures an auditor saw refused would turn valid). Raises
    ``private_key_sent`` or ``bad_party_key`` (400) and stores nothing."""
    public = registrable_key(jwk)
    found = AgentKey.objects.filter(agent_id=agent_id, kid=public["kid"]).first()
    if found is not None:
        return found, False
    try:
        with transaction.atomic():
            key = AgentKey.objects.create(
                agent_id=agent_id, kid=public["kid"], jwk=public, registered_at=timezone.now()
            )
    except IntegrityError:  # the same key registered at the same moment by another request
        return AgentKey.objects.get(agent_id=agent_id, kid=public["kid"]), False
    return key, True


def retire_agent_key(*, agent_id: str, kid: str) -> AgentKey:
    """Retire ``kid`` of ``agent_id`` from now on; a key already retired keeps its moment.
    404 ``unknown_agent_key`` for a kid the agent never registered."""
    with transaction.atomic():
        key = AgentKey.objects.select_for_update().filter(agent_id=agent_id, kid=kid).first()
        if key is None:
            raise UnknownAgentKey(f"agent {agent_id!r} registered no key {kid!r}")
        if key.retired_at is None:
            key.retired_at = timezone.now()
            key.save(update_fields=["retired_at"])
    return key


def require_signatures(*, agent_id: str, required: bool) -> None:
    """Whether every envelope of ``agent_id`` must be signed, from now on."""
    if not required:
        SignatureRequirement.objects.filter(agent_id=agent_id).delete()
        return
    SignatureRequirement.objects.get_or_create(
        agent_id=agent_id, defaults={"required_since": timezone.now()}
    )


def check_signature(envelope: Envelope, *, now: datetime, required: bool | None) -> None:
    """§12's checks of a party envelope received at ``now``: a signed one against its sender's
    key of that kid (``bad_signature``); an unsigned one against its owner's requirement
    (``signature_required``), read here only when ``required`` is ``None``: a session's step
    has it from the session's locked read."""
    if not envelope.signed:
        if required is None:
            required = SignatureRequirement.objects.filter(agent_id=envelope.agent_id).exists()
        if required:
            raise SignatureRequired(
                f"agent {envelope.agent_id!r} signs every envelope: its owner requires it; "
                "sign this one with a registered key (§12)"
            )
        return
    keys = AgentKey.objects.filter(agent_id=envelope.agent_id)
    check_party_signature(envelope.body, [k.as_party_key() for k in keys], now)
