"""The arbiter's signing keys: generated, encrypted at rest, loaded on demand, rotated.

Private JWKs are stored Fernet-encrypted under ``settings.OANP_KEY_ENCRYPTION_KEY``; public
JWKs stay in clear forever so that every agreement ever signed stays verifiable.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from functools import cache

from cryptography.fernet import Fernet
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from arbiter_app.models import KeyState, SigningKey
from oanp.signing import ArbiterKey, jwks_document

ALGORITHMS = ("Ed25519", "ES256")


def cipher() -> Fernet:
    """The arbiter's one key at rest: it seals the signing keys and the delivery secrets
    (:mod:`arbiter_app.deliveries.outbound`), so there is one secret to keep and one to rotate."""
    return Fernet(settings.OANP_KEY_ENCRYPTION_KEY)


def generate(alg: str) -> ArbiterKey:
    if alg == "Ed25519":
        return ArbiterKey.from_cryptography(ed25519.Ed25519PrivateKey.generate())
    if alg == "ES256":
        return ArbiterKey.from_cryptography(ec.generate_private_key(ec.SECP256R1()))
    raise ValueError(f"unsupported signing algorithm {alg!r}: use one of {', '.join(ALGORITHMS)}")


def _store(key: ArbiterKey, *, now: datetime) -> SigningKey:
    sealed = cipher().encrypt(json.dumps(key.private_jwk()).encode())
    return SigningKey.objects.create(
        kid=key.kid,
        alg=key.alg,
        public_jwk=key.public_jwk(),
        private_jwk_encrypted=sealed,
        state=KeyState.ACTIVE,
        activated_at=now,
    )


@cache
def _unsealed(kid: str) -> ArbiterKey:
    """The private key of ``kid``; keys never change once stored, so the cache is safe."""
    row = SigningKey.objects.get(kid=kid)
    jwk = json.loads(cipher().decrypt(bytes(row.private_jwk_encrypted)))
    return ArbiterKey.from_private_jwk(jwk)


def ensure_active_key() -> SigningKey:
    """The active key, created on first use so that no deployment step is needed."""
    found = SigningKey.objects.filter(state=KeyState.ACTIVE).first()
    if found is not None:
        return found
    try:
        with transaction.atomic():
            return _store(generate(settings.OANP_SIGNING_ALG), now=timezone.now())
    except IntegrityError:  # another process created it first: use theirs
        return SigningKey.objects.get(state=KeyState.ACTIVE)


def active_key() -> ArbiterKey:
    return _unsealed(ensure_active_key().kid)


class ActiveSigner:
    """The machine's signer: loads the active key only when an agreement is signed, so most
    envelopes cost no key lookup."""

    def __init__(self) -> None:
        self._key: ArbiterKey | None = None

    def _loaded(self) -> ArbiterKey:
        if self._key is None:
            self._key = active_key()
        return self._key

    @property
    def alg(self) -> str:
        return self._loaded().alg

    @property
    def kid(self) -> str:
        return self._loaded().kid

    def sign_detached(self, payload: bytes, *, typ: str) -> str:
        return self._loaded().sign_detached(payload, typ=typ)


def rotate(*, alg: str | None = None, now: datetime | None = None) -> SigningKey:
    """Make a new key active; the one it replaces retires but stays in the JWKS for now."""
    now = now or timezone.now()
    fresh = generate(alg or settings.OANP_SIGNING_ALG)
    with transaction.atomic():
        current = list(SigningKey.objects.select_for_update().filter(state=KeyState.ACTIVE))
        for old in current:
            old.state, old.retiring_at = KeyState.RETIRING, now
            old.save(update_fields=["state", "retiring_at"])
        return _store(fresh, now=now)


def published_jwks() -> dict[str, list[dict[str, object]]]:
    """``/.well-known/jwks.json``: the active key and the retiring ones."""
    ensure_active_key()
    rows = SigningKey.objects.filter(state__in=[KeyState.ACTIVE, KeyState.RETIRING])
    return jwks_document(row.public_jwk for row in rows)


def maintain(*, now: datetime | None = None) -> tuple[SigningKey | None, int]:
    """The rotation policy: a new key when the active one is ``OANP_KEY_ROTATION_DAYS`` old;
    a retiring key retired ``OANP_KEY_OVERLAP_DAYS`` after it was replaced.

    Returns the new active key, if one was made, and how many keys retired. Retired keys
    leave the JWKS but stay at ``/oanp/v0.1/keys`` for good.
    """
    now = now or timezone.now()
    active = ensure_active_key()
    rotated = None
    if now - active.activated_at >= timedelta(days=settings.OANP_KEY_ROTATION_DAYS):
        rotated = rotate(now=now)
    overlap_ended = now - timedelta(days=settings.OANP_KEY_OVERLAP_DAYS)
    retired = SigningKey.objects.filter(
        state=KeyState.RETIRING, retiring_at__lte=overlap_ended
    ).update(state=KeyState.RETIRED, retired_at=now)
    return rotated, retired


def key_history() -> list[dict[str, object]]:
    """Every public key the arbiter ever signed with, and when it was valid."""
    ensure_active_key()
    return [
        {
            **row.public_jwk,
            "state": row.state,
            "activated_at": row.activated_at.isoformat(),
            "retiring_at": row.retiring_at.isoformat() if row.retiring_at else None,
            "retired_at": row.retired_at.isoformat() if row.retired_at else None,
        }
        for row in SigningKey.objects.order_by("activated_at")
    ]


def every_public_jwk() -> dict[str, list[dict[str, object]]]:
    """A JWKS of every key ever used, retired ones included: what old agreements need."""
    ensure_active_key()
    return jwks_document(row.public_jwk for row in SigningKey.objects.order_by("activated_at"))
