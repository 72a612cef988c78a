"""Detached JWS signatures of the arbiter (RFC 7515 appendix F) and the keys behind them.

The arbiter signs the JCS bytes of an agreement or a log checkpoint; anyone holding the public key
verifies, which is why HMAC is never allowed. A key is named by its RFC 7638 thumbprint, so a
verifier checks that the ``kid`` really names the key it found instead of trusting the key set.

The core draws no randomness of its own: keys are made by callers and handed in. ES256 signing
is the one exception inside a primitive: cryptography's ECDSA draws a fresh nonce per signature,
so ES256 signatures of the same bytes differ, while Ed25519 signatures are deterministic.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from joserfc.errors import BadSignatureError, JoseError
from joserfc.jwk import ECKey, OKPKey
from joserfc.jws import deserialize_compact, detach_content, serialize_compact

from oanp.wire.canonical import JsonValue, canonical_bytes, read_json
from oanp.wire.errors import (
    AlgorithmNotAllowed,
    KeyInvalid,
    MalformedEnvelope,
    SignatureInvalid,
    SignatureMalformed,
    UnknownKey,
)

#: ``Ed25519`` is the RFC 9864 name; the deprecated polymorphic ``EdDSA`` is refused.
ALLOWED_ALGORITHMS: tuple[str, ...] = ("Ed25519", "ES256")
AGREEMENT_TYP = "oanp-agreement+jws"
CHECKPOINT_TYP = "oanp-checkpoint+jws"

SigningPrivateKey = Ed25519PrivateKey | ec.EllipticCurvePrivateKey

_KEY_TYPE_OF_ALG = {"Ed25519": ("OKP", "Ed25519"), "ES256": ("EC", "P-256")}
_THUMBPRINT_MEMBERS = {"OKP": ("crv", "kty", "x"), "EC": ("crv", "kty", "x", "y")}
_HEADER_MEMBERS = frozenset({"alg", "kid", "typ"})
#: An Ed25519 public key, a P-256 coordinate and a P-256 private scalar are all 32 bytes.
_KEY_BYTES = 32
_BASE64URL = re.compile(r"[A-Za-z0-9_-]*")


def _b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64url_decode(text: str) -> bytes:
    """Strict base64url: no padding, no stray characters, no unused bits set.

    Python's decoder is lenient; accepting several spellings of one value would let a
    signature be rewritten into another string that still verifies.
    """
    if not _BASE64URL.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError("not unpadded base64url")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64url_encode(data) != text:
        raise ValueError("not the canonical base64url spelling")
    return data


def _required_members(jwk: Mapping[str, object]) -> dict[str, str]:
    kty = jwk.get("kty")
    names = _THUMBPRINT_MEMBERS.get(kty) if isinstance(kty, str) else None
    if names is None:
        raise ValueError(f"key type {kty!r} is not supported: only OKP and EC keys")
    members: dict[str, str] = {}
    for name in names:
        value = jwk.get(name)
        if not isinstance(value, str):
            raise ValueError(f"JWK member {name!r} must be a string")
        members[name] = value
    return members


def thumbprint(public_jwk: Mapping[str, object]) -> str:
    """RFC 7638 SHA-256 thumbprint, base64url, of an OKP or EC JWK: the protocol's ``kid``.

    Only the required members count (OKP: crv, kty, x; EC: crv, kty, x, y), so a key keeps its
    kid whatever else its JWK carries. Raises ``ValueError`` for other key types or members that
    are not strings.
    """
    # RFC 7638's serialization of an object whose members are strings is exactly JCS.
    members: dict[str, JsonValue] = dict(_required_members(public_jwk))
    return _b64url_encode(hashlib.sha256(canonical_bytes(members)).digest())


def _alg_of(private_key: object) -> str:
    if isinstance(private_key, Ed25519PrivateKey):
        return "Ed25519"
    if isinstance(private_key, ec.EllipticCurvePrivateKey) and isinstance(
        private_key.curve, ec.SECP256R1
    ):
        return "ES256"
    raise ValueError("signing keys are Ed25519 or ECDSA on P-256")


def _public_members(private_key: SigningPrivateKey) -> dict[str, str]:
    public = private_key.public_key()
    if isinstance(public, Ed25519PublicKey):
        return {"kty": "OKP", "crv": "Ed25519", "x": _b64url_encode(public.public_bytes_raw())}
    numbers = public.public_numbers()
    return {
        "kty": "EC",
        "crv": "P-256",
        "x": _b64url_encode(numbers.x.to_bytes(_KEY_BYTES, "big")),
        "y": _b64url_encode(numbers.y.to_bytes(_KEY_BYTES, "big")),
    }


@dataclass(frozen=True)
class SigningKey:
    """A private signing key (the arbiter's, or a party's for its envelopes, §12), with its
    algorithm and thumbprint ``kid``.

    Two keys are equal when their ``alg`` and ``kid`` are, which the private key determines.
    """

    private_key: SigningPrivateKey = field(repr=False, compare=False)
    alg: str = field(init=False)
    kid: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "alg", _alg_of(self.private_key))
        object.__setattr__(self, "kid", thumbprint(_public_members(self.private_key)))

    @classmethod
    def from_cryptography(cls, private_key: SigningPrivateKey) -> SigningKey:
        """Wrap a ``cryptography`` key: Ed25519 or ECDSA on SECP256R1, else ``ValueError``."""
        return cls(private_key)

    @classmethod
    def from_ed25519_seed(cls, seed: bytes) -> SigningKey:
        """The Ed25519 key of a 32-byte seed (RFC 8032 private key); same seed, same key."""
        return cls(Ed25519PrivateKey.from_private_bytes(seed))

    @classmethod
    def from_private_jwk(cls, jwk: Mapping[str, object]) -> SigningKey:
        """Load a key stored with :meth:`private_jwk`: OKP Ed25519 or EC P-256, else ``ValueError``.

        The public members must match ``d``, and ``kid``/``alg``/``use`` must match when present:
        a stored key that disagrees with itself was corrupted or hand-edited, and signing with it
        would publish a kid no verifier can resolve.
        """
        kty, crv, d_text = jwk.get("kty"), jwk.get("crv"), jwk.get("d")
        if not isinstance(d_text, str):
            raise ValueError("a private JWK needs 'd' as a string")
        d = _b64url_decode(d_text)
        if len(d) != _KEY_BYTES:
            raise ValueError(f"'d' must be {_KEY_BYTES} bytes")
        private_key: SigningPrivateKey
        if (kty, crv) == ("OKP", "Ed25519"):
            private_key = Ed25519PrivateKey.from_private_bytes(d)
        elif (kty, crv) == ("EC", "P-256"):
            private_key = ec.derive_private_key(int.from_bytes(d, "big"), ec.SECP256R1())
        else:
            raise ValueError(f"unsupported key {kty!r}/{crv!r}: only OKP Ed25519 and EC P-256")
        key = cls(private_key)
        expected = key.public_jwk()
        for name in _THUMBPRINT_MEMBERS[expected["kty"]]:
            if jwk.get(name) != expected[name]:
                raise ValueError(f"private JWK member {name!r} does not match its 'd'")
        for name in ("kid", "alg", "use"):
            if name in jwk and jwk[name] != expected[name]:
                raise ValueError(f"private JWK member {name!r} should be {expected[name]!r}")
        return key

    def public_jwk(self) -> dict[str, str]:
        """The public JWK to publish: kty, crv, x (and y for EC), plus kid, alg and use "sig"."""
        return {**_public_members(self.private_key), "kid": self.kid, "alg": self.alg, "use": "sig"}

    def private_jwk(self) -> dict[str, str]:
        """The public JWK plus the private ``d``, for callers to store (encrypted) and reload."""
        if isinstance(self.private_key, Ed25519PrivateKey):
            d = self.private_key.private_bytes_raw()
        else:
            d = self.private_key.private_numbers().private_value.to_bytes(_KEY_BYTES, "big")
        return {**self.public_jwk(), "d": _b64url_encode(d)}

    def sign_detached(self, payload: bytes, *, typ: str) -> str:
        """Sign ``payload`` as a detached compact JWS ``header..signature``.

        The protected header is exactly ``{"alg", "kid", "typ"}``. Ed25519 signatures are
        deterministic; ES256 ones are not (cryptography draws the ECDSA nonce).
        """
        signing_key = (
            OKPKey.import_key(self.private_key)
            if isinstance(self.private_key, Ed25519PrivateKey)
            else ECKey.import_key(self.private_key)
        )
        header = {"alg": self.alg, "kid": self.kid, "typ": typ}
        # joserfc refuses algorithms it does not "recommend" (Ed25519 among them) unless named.
        compact = serialize_compact(header, payload, signing_key, algorithms=[self.alg])
        return detach_content(compact)


def jwks_document(
    public_jwks: Iterable[Mapping[str, object]],
) -> dict[str, list[dict[str, object]]]:
    """The JWKS body ``{"keys": [...]}``; members beyond the JWK standard are kept as given.

    Raises ``ValueError`` for an entry holding private material, or whose ``kid`` is not its
    thumbprint: the first would leak a signing key, the second no verifier accepts.
    """
    keys: list[dict[str, object]] = []
    for jwk in public_jwks:
        if "d" in jwk:
            raise ValueError("refusing to publish a private key")
        if jwk.get("kid") != thumbprint(jwk):
            raise ValueError(f"kid {jwk.get('kid')!r} is not the key's RFC 7638 thumbprint")
        keys.append(dict(jwk))
    return {"keys": keys}


#: JWK members that hold private material, in any key type: a key sent with one is refused.
PRIVATE_MEMBERS = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})


def public_signing_jwk(jwk: Mapping[str, object]) -> dict[str, str]:
    """The public JWK a key to register stands for: kty, crv, x (and y), kid, alg, use "sig".

    Raises ``ValueError`` saying why when ``jwk`` is not one public Ed25519 or P-256 key, or
    when a ``kid``, ``alg`` or ``use`` it carries disagrees with the key itself: a registered
    key is named by its thumbprint, so a signer's kid always resolves to exactly it. Private
    members are the caller's to refuse first (:data:`PRIVATE_MEMBERS`), with their own code.
    """
    members = _required_members(jwk)
    alg = {"OKP": "Ed25519", "EC": "ES256"}[members["kty"]]
    if _KEY_TYPE_OF_ALG[alg] != (members["kty"], members["crv"]):
        raise ValueError(f"curve {members['crv']!r} is not supported: OKP Ed25519 or EC P-256")
    _public_key(members)  # the point must be on the curve, its coordinates full length
    public = {**members, "kid": thumbprint(members), "alg": alg, "use": "sig"}
    for name in ("kid", "alg", "use"):
        if name in jwk and jwk[name] != public[name]:
            raise ValueError(f"member {name!r} should be {public[name]!r} for this key")
    return public


@dataclass(frozen=True)
class VerifiedSignature:
    """What a verified signature proves: which key (``kid``) signed, with which algorithm."""

    kid: str
    alg: str


def protected_header(value: object) -> dict[str, str]:
    """The protected header of a detached compact JWS, refused (``SignatureMalformed``) unless
    it is exactly ``alg``, ``kid`` and ``typ`` as strings, with an empty payload segment."""
    if not isinstance(value, str):
        raise SignatureMalformed("a JWS is a string")
    parts = value.split(".")
    if len(parts) != 3:
        raise SignatureMalformed("not a compact JWS: expected header..signature")
    header_segment, payload_segment, signature_segment = parts
    if payload_segment:
        # joserfc verifies an attached payload and ignores the one passed in, so a JWS over
        # some other content would pass for a signature of ours.
        raise SignatureMalformed("the JWS carries a payload; expected detached header..signature")
    try:
        header = read_json(_b64url_decode(header_segment))
        _b64url_decode(signature_segment)
    except (ValueError, MalformedEnvelope) as exc:
        raise SignatureMalformed("header or signature is not base64url (JSON)") from exc
    if (
        not isinstance(header, dict)
        or header.keys() != _HEADER_MEMBERS
        or not all(isinstance(member, str) for member in header.values())
    ):
        # Anything more (crit, b64, jku, x5u, ...) would change how the JWS is processed.
        raise SignatureMalformed("the protected header must be exactly alg, kid, typ as strings")
    return header


def _find_key(jwks: object, kid: str) -> Mapping[str, object]:
    keys = jwks.get("keys") if isinstance(jwks, Mapping) else None
    if not isinstance(keys, list | tuple):
        raise UnknownKey("the key set has no 'keys' list")
    for jwk in keys:
        if isinstance(jwk, Mapping) and jwk.get("kid") == kid:
            return jwk
    raise UnknownKey(f"no key with kid {kid!r} in the key set")


def _public_key(members: Mapping[str, str]) -> OKPKey | ECKey:
    x = _b64url_decode(members["x"])
    if members["kty"] == "OKP":
        return OKPKey.import_key(Ed25519PublicKey.from_public_bytes(x))
    y = _b64url_decode(members["y"])
    # Coordinates must be full length (RFC 7518 6.2.1.2), so a key has one spelling, one kid.
    if len(x) != _KEY_BYTES or len(y) != _KEY_BYTES:
        raise ValueError("P-256 coordinates are 32 bytes")
    point = ec.EllipticCurvePublicNumbers(
        int.from_bytes(x, "big"), int.from_bytes(y, "big"), ec.SECP256R1()
    )
    return ECKey.import_key(point.public_key())


def _verification_key(jwk: Mapping[str, object], kid: str, alg: str) -> OKPKey | ECKey:
    kty, crv = _KEY_TYPE_OF_ALG[alg]
    if jwk.get("alg", alg) != alg or jwk.get("kty") != kty or jwk.get("crv") != crv:
        raise AlgorithmNotAllowed(f"key {kid!r} is not an {alg} key")
    key_ops = jwk.get("key_ops", ["verify"])
    if jwk.get("use", "sig") != "sig" or not isinstance(key_ops, list) or "verify" not in key_ops:
        raise KeyInvalid(f"key {kid!r} is not for verifying signatures")
    try:
        members = _required_members(jwk)
        names_this_key = thumbprint(members) == kid
    except ValueError as exc:
        raise KeyInvalid(f"key {kid!r} is not a well-formed {kty} JWK") from exc
    if not names_this_key:
        raise KeyInvalid(f"kid {kid!r} is not the thumbprint of the key it names")
    try:
        return _public_key(members)
    except ValueError as exc:
        raise KeyInvalid(f"key {kid!r} is not a valid {crv} public key") from exc


def verify_detached(
    jws: str,
    payload: bytes,
    jwks: Mapping[str, object],
    *,
    typ: str,
    algorithms: Sequence[str] = ALLOWED_ALGORITHMS,
) -> VerifiedSignature:
    """Verify a detached compact JWS over ``payload`` with a key from the JWKS ``jwks``.

    ``algorithms`` can narrow :data:`ALLOWED_ALGORITHMS`, never widen it. Raises, for any input,
    only :class:`~oanp.wire.errors.VerificationError` subclasses: ``SignatureMalformed`` (shape,
    header, wrong ``typ``), ``AlgorithmNotAllowed``, ``UnknownKey``, ``KeyInvalid`` (the entry
    is unusable or its kid is not its thumbprint) and ``SignatureInvalid``.
    """
    header = protected_header(jws)
    if header["typ"] != typ:
        raise SignatureMalformed(f"typ is {header['typ']!r}, expected {typ!r}")
    alg, kid = header["alg"], header["kid"]
    if alg not in ALLOWED_ALGORITHMS or alg not in algorithms:
        raise AlgorithmNotAllowed(f"alg {alg!r} is not allowed")
    key = _verification_key(_find_key(jwks, kid), kid, alg)
    try:
        deserialize_compact(jws, key, algorithms=[alg], payload=payload)
    except BadSignatureError as exc:
        raise SignatureInvalid("the signature does not verify over the payload") from exc
    except JoseError as exc:
        # Left after the checks above: joserfc's own size limits on the compact string.
        raise SignatureMalformed(f"JWS refused: {exc}") from exc
    return VerifiedSignature(kid=kid, alg=alg)
