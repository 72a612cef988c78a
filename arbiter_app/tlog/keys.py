"""The log's checkpoint key: made on first use, sealed at rest like the arbiter's signing keys,
named by the log's origin, and never rotated (witnesses and auditors hold its verifier key)."""

from __future__ import annotations

from functools import cache

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings
from django.db import IntegrityError, transaction

from arbiter_app.log_records import LogKey
from arbiter_app.signing_keys import cipher
from oanp.tlog.note import NoteSigner


def log_identity() -> dict[str, str]:
    """What ``/.well-known/oanp.json`` says of the log: its origin, the prefix its checkpoint
    and tiles are served under, and the verifier key its checkpoints are signed with."""
    return {
        "origin": settings.OANP_LOG_ORIGIN,
        "url": f"{settings.OANP_PUBLIC_URL}/oanp/v0.1/log",
        "verifier_key": log_signer().verifier_key,
    }


def log_signer() -> NoteSigner:
    """The signer of the log's checkpoints, its key made and stored on first use.

    The row is read on every call, only its unsealing remembered: every process then signs
    and publishes the key the database holds, even one whose row was replaced (a database
    restored, or a test database emptied) after the process first read it."""
    name = settings.OANP_LOG_ORIGIN
    row = LogKey.objects.filter(name=name).first() or _stored_new_key(name)
    return _unsealed(name, bytes(row.private_key_sealed))


@cache
def _unsealed(name: str, sealed: bytes) -> NoteSigner:
    private = Ed25519PrivateKey.from_private_bytes(cipher().decrypt(sealed))
    return NoteSigner(name, private)


def _stored_new_key(name: str) -> LogKey:
    made = Ed25519PrivateKey.generate()
    try:
        with transaction.atomic():
            return LogKey.objects.create(
                name=name,
                public_key=made.public_key().public_bytes_raw(),
                private_key_sealed=cipher().encrypt(made.private_bytes_raw()),
            )
    except IntegrityError:  # another process made the log's key first: that one it is
        return LogKey.objects.get(name=name)
