"""The key each hosted agent signs its envelopes with (docs/protocol.md §17).

A hosted agent is a merchant's agent that this site runs; its envelopes should be as provable as
an external agent's, so each gets an Ed25519 key of its own: made on its first answer, sealed
under the vault key like its limits (the arbiter never holds it), and registered with the arbiter
as any agent registers its public key.
"""

from __future__ import annotations

import json

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from arbiter_app import services as arbiter_services
from oanp.wire.signing import SigningKey
from sessions_app.models import AgentProfile
from sessions_app.vault import seal_text, unseal_text


def hosted_signer(profile: AgentProfile) -> SigningKey:
    """The hosted agent's signing key, made, sealed and registered on first need, and made
    again once its owner retired it (from the agent's page), so the agent goes on answering.

    Two workers answering at once may each make one: only the first stored is kept, and the
    other reads it back, so the agent has one key in force.
    """
    while True:
        if profile.sealed_signing_key:
            key = SigningKey.from_private_jwk(
                json.loads(unseal_text(bytes(profile.sealed_signing_key)))
            )
            # Idempotent: a key registered before is answered as it stands. Done on every use,
            # a key whose first registration was lost to a crash is registered now.
            registered, _ = arbiter_services.register_agent_key(
                agent_id=profile.agent_id, jwk=key.public_jwk()
            )
            if registered.retired_at is None:
                return key
        _store_new_key(profile)


def _store_new_key(profile: AgentProfile) -> None:
    made = SigningKey.from_cryptography(Ed25519PrivateKey.generate())
    AgentProfile.objects.filter(
        pk=profile.pk, sealed_signing_key=bytes(profile.sealed_signing_key)
    ).update(sealed_signing_key=seal_text(json.dumps(made.private_jwk())))
    profile.refresh_from_db(fields=["sealed_signing_key"])
