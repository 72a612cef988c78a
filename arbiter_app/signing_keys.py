"""The arbiter's signing keys: generated, encrypted at rest, loaded on demand. Rotating them
is :mod:`arbiter_app.services.signing_keys`' to do; reading them, :mod:`arbiter_app.selectors`'.

Private JWKs are stored Fernet-encrypted under ``settings.OANP_KEY_ENCRYPTION_KEY``; public
JWKs stay in clear forever so that every agreement ever signed stays verifiable.
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import cache

from cryptography.fernet import Fernet
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from arbiter_app.models import KeyState, SigningKey
from oanp.wire import signing

ALGORITHMS = ("Ed25519", "ES256")


def cipher() -> Fernet:
    """The arbiter's one key at rest: it seals the signing keys and the delivery secrets
    (:mod:`arbiter_app.deliveries.outbound`), so there is one secret to keep and one to rotate."""
    return Fernet(settings.OANP_KEY_ENCRYPTION_KEY)


def generate(alg: str) -> signing.SigningKey:
    if alg == "Ed25519":
        return signing.SigningKey.from_cryptography(ed25519.Ed25519PrivateKey.generate())
    if alg == "ES256":
        return signing.SigningKey.from_cryptography(ec.generate_private_key(ec.SECP256R1()))
    raise ValueError(f"unsupported signing algorithm {alg!r}: use one of {', '.join(ALGORITHMS)}")


def store(key: signing.SigningKey, *, now: datetime) -> SigningKey:
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
def _unsealed(kid: str) -> signing.SigningKey:
    """The private key of ``kid``; keys never change once stored, so the cache is safe."""
    row = SigningKey.objects.get(kid=kid)
    jwk = json.loads(cipher().decrypt(bytes(row.private_jwk_encrypted)))
    return signing.SigningKey.from_private_jwk(jwk)


def ensure_active_key() -> SigningKey:
    """The active key, created on first use so that no deployment step is needed."""
    found = SigningKey.objects.filter(state=KeyState.ACTIVE).first()
    if found is not None:
        return found
    try:
        with transaction.atomic():
            return store(generate(settings.OANP_SIGNING_ALG), now=timezone.now())
    except IntegrityError:  # another process created it first: use theirs
        return SigningKey.objects.get(state=KeyState.ACTIVE)


def active_key() -> signing.SigningKey:
    return _unsealed(ensure_active_key().kid)


class ActiveSigner:
    """The machine's signer: loads the active key only when an agreement is signed, so most
    envelopes cost no key lookup."""

    def __init__(self) -> None:
        self._key: signing.SigningKey | None = None

    def _loaded(self) -> signing.SigningKey:
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
