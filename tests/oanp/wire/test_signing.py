"""Detached JWS signatures: keys, thumbprints, golden vectors and every refusal."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
from collections.abc import Callable

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed448 import Ed448PrivateKey
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from hypothesis import given
from hypothesis import strategies as st
from joserfc import jws
from joserfc.errors import SecurityWarning
from joserfc.jwk import OKPKey

from oanp.wire.errors import (
    AlgorithmNotAllowed,
    KeyInvalid,
    SignatureInvalid,
    SignatureMalformed,
    UnknownKey,
    VerificationError,
)
from oanp.wire.signing import (
    AGREEMENT_TYP,
    ALLOWED_ALGORITHMS,
    CHECKPOINT_TYP,
    SigningKey,
    VerifiedSignature,
    jwks_document,
    thumbprint,
    verify_detached,
)

PAYLOAD = b'{"a":1}'

# SigningKey.from_ed25519_seed(bytes(range(32))) signing PAYLOAD with typ AGREEMENT_TYP.
# Computed once, then checked without joserfc by test_golden_vector_verifies_without_joserfc.
GOLDEN_KID = "1IG2tMH7J2wbJZnOf8LJzQitKf7LMvoAElsuDMVM54Y"
GOLDEN_X = "A6EHv_POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg"
GOLDEN_JWS = (
    "eyJhbGciOiJFZDI1NTE5Iiwia2lkIjoiMUlHMnRNSDdKMndiSlpuT2Y4TEp6UWl0S2Y3TE12b0FFbHN1RE1WTTU0WS"
    "IsInR5cCI6Im9hbnAtYWdyZWVtZW50K2p3cyJ9"
    ".."
    "399nluHLgoO2GT1-tAATs2Iyijj6SOWfRMPqzwNJG80xz6rLjJhwokoFl7iBf1wR-wGEqY-BntYX-QMLvn-ADg"
)

# RFC 8037 appendix A.1 (the private key) and A.3 (its RFC 7638 thumbprint).
RFC8037_JWK = {
    "kty": "OKP",
    "crv": "Ed25519",
    "d": "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A",
    "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
}
RFC8037_THUMBPRINT = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def header_segment(header: dict[str, object]) -> str:
    return b64(json.dumps(header).encode())


@pytest.fixture
def ed_key() -> SigningKey:
    return SigningKey.from_ed25519_seed(bytes(range(32)))


@pytest.fixture
def es_key() -> SigningKey:
    return SigningKey.from_cryptography(ec.generate_private_key(ec.SECP256R1()))


def jwks_of(*keys: SigningKey) -> dict[str, list[dict[str, object]]]:
    return jwks_document(k.public_jwk() for k in keys)


# Keys and thumbprints -------------------------------------------------------------------------


def test_thumbprint_of_rfc_8037_example() -> None:
    public = {k: v for k, v in RFC8037_JWK.items() if k != "d"}
    assert thumbprint(public) == RFC8037_THUMBPRINT
    assert SigningKey.from_private_jwk(RFC8037_JWK).kid == RFC8037_THUMBPRINT


def test_thumbprint_counts_only_required_members() -> None:
    public = {"kty": "OKP", "crv": "Ed25519", "x": RFC8037_JWK["x"]}
    decorated = {**public, "kid": "whatever", "alg": "Ed25519", "use": "sig", "not_after": 1}
    assert thumbprint(decorated) == thumbprint(public)


def test_thumbprint_of_ec_key_is_rfc_7638_over_crv_kty_x_y(es_key: SigningKey) -> None:
    jwk = es_key.public_jwk()
    members = f'{{"crv":"P-256","kty":"EC","x":"{jwk["x"]}","y":"{jwk["y"]}"}}'
    assert thumbprint(jwk) == b64(hashlib.sha256(members.encode()).digest()) == es_key.kid


@pytest.mark.parametrize(
    "jwk",
    [
        {"kty": "oct", "k": "c2VjcmV0"},
        {"kty": "RSA", "n": "AQAB", "e": "AQAB"},
        {"kty": "OKP", "crv": "Ed25519"},
        {"kty": "EC", "crv": "P-256", "x": "AA", "y": 5},
        {"crv": "Ed25519", "x": "AA"},
    ],
)
def test_thumbprint_refuses_other_key_types_and_bad_members(jwk: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=r"key type|must be a string"):
        thumbprint(jwk)


def test_ed25519_key_from_seed_is_deterministic(ed_key: SigningKey) -> None:
    assert ed_key.alg == "Ed25519"
    assert ed_key.kid == GOLDEN_KID
    assert ed_key == SigningKey.from_ed25519_seed(bytes(range(32)))
    assert ed_key.public_jwk() == {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": GOLDEN_X,
        "kid": GOLDEN_KID,
        "alg": "Ed25519",
        "use": "sig",
    }
    assert "private_key" not in repr(ed_key)


@pytest.mark.parametrize("make", ["ed", "es"])
def test_private_jwk_round_trips(make: str, ed_key: SigningKey, es_key: SigningKey) -> None:
    key = ed_key if make == "ed" else es_key
    stored = key.private_jwk()
    assert stored.keys() - key.public_jwk().keys() == {"d"}
    reloaded = SigningKey.from_private_jwk(stored)
    assert reloaded == key
    assert reloaded.alg == key.alg
    signature = reloaded.sign_detached(PAYLOAD, typ=AGREEMENT_TYP)
    verify_detached(signature, PAYLOAD, jwks_of(key), typ=AGREEMENT_TYP)


def test_from_private_jwk_refuses_keys_it_cannot_sign_with(ed_key: SigningKey) -> None:
    stored = ed_key.private_jwk()
    other_x = SigningKey.from_ed25519_seed(bytes(32)).public_jwk()["x"]
    p384 = ec.generate_private_key(ec.SECP384R1())
    bad: list[dict[str, object]] = [
        {**stored, "x": other_x},
        {k: v for k, v in stored.items() if k != "x"},
        {**stored, "kid": RFC8037_THUMBPRINT},
        {**stored, "alg": "EdDSA"},
        {**stored, "use": "enc"},
        {k: v for k, v in stored.items() if k != "d"},
        {**stored, "d": stored["d"][:-2]},
        {**stored, "d": stored["d"] + "="},
        {**stored, "crv": "Ed448"},
        {"kty": "EC", "crv": "P-384", "d": b64(p384.private_numbers().private_value.to_bytes(48))},
        {"kty": "oct", "k": stored["d"], "d": stored["d"]},
        {"kty": "EC", "crv": "P-256", "d": b64(bytes(32))},
    ]
    for jwk in bad:
        with pytest.raises(ValueError):  # noqa: PT011 - each case has its own message
            SigningKey.from_private_jwk(jwk)


def test_from_cryptography_accepts_only_ed25519_and_p256() -> None:
    with pytest.raises(ValueError, match="Ed25519 or ECDSA on P-256"):
        SigningKey.from_cryptography(ec.generate_private_key(ec.SECP384R1()))
    with pytest.raises(ValueError, match="Ed25519 or ECDSA on P-256"):
        SigningKey.from_cryptography(Ed448PrivateKey.generate())  # type: ignore[arg-type]


def test_jwks_document_keeps_extra_members_and_refuses_leaks(ed_key: SigningKey) -> None:
    published = {**ed_key.public_jwk(), "not_after": "2027-01-01T00:00:00Z"}
    assert jwks_document([published]) == {"keys": [published]}
    with pytest.raises(ValueError, match="private key"):
        jwks_document([ed_key.private_jwk()])
    with pytest.raises(ValueError, match="thumbprint"):
        jwks_document([{**ed_key.public_jwk(), "kid": "mine"}])


# Signing ---------------------------------------------------------------------------------------


def test_golden_vector(ed_key: SigningKey) -> None:
    assert ed_key.sign_detached(PAYLOAD, typ=AGREEMENT_TYP) == GOLDEN_JWS
    assert verify_detached(GOLDEN_JWS, PAYLOAD, jwks_of(ed_key), typ=AGREEMENT_TYP) == (
        VerifiedSignature(kid=GOLDEN_KID, alg="Ed25519")
    )


def test_golden_vector_verifies_without_joserfc() -> None:
    header_b64, payload_b64, signature_b64 = GOLDEN_JWS.split(".")
    assert payload_b64 == ""
    assert json.loads(unb64(header_b64)) == {
        "alg": "Ed25519",
        "kid": GOLDEN_KID,
        "typ": "oanp-agreement+jws",
    }
    required = f'{{"crv":"Ed25519","kty":"OKP","x":"{GOLDEN_X}"}}'.encode()
    assert b64(hashlib.sha256(required).digest()) == GOLDEN_KID
    public = Ed25519PublicKey.from_public_bytes(unb64(GOLDEN_X))
    public.verify(unb64(signature_b64), f"{header_b64}.{b64(PAYLOAD)}".encode())


def test_es256_round_trip(es_key: SigningKey) -> None:
    signature = es_key.sign_detached(PAYLOAD, typ=CHECKPOINT_TYP)
    header_b64, payload_b64, signature_b64 = signature.split(".")
    assert payload_b64 == ""
    assert json.loads(unb64(header_b64)) == {
        "alg": "ES256",
        "kid": es_key.kid,
        "typ": CHECKPOINT_TYP,
    }
    assert len(unb64(signature_b64)) == 64
    verified = verify_detached(signature, PAYLOAD, jwks_of(es_key), typ=CHECKPOINT_TYP)
    assert verified == VerifiedSignature(kid=es_key.kid, alg="ES256")


def test_verification_picks_the_key_by_kid(ed_key: SigningKey, es_key: SigningKey) -> None:
    jwks = jwks_of(es_key, ed_key)
    for key in (ed_key, es_key):
        signature = key.sign_detached(b"", typ=AGREEMENT_TYP)
        assert verify_detached(signature, b"", jwks, typ=AGREEMENT_TYP).kid == key.kid


# Refusals --------------------------------------------------------------------------------------


def _flip_payload(key: SigningKey) -> tuple[str, bytes, object]:
    return key.sign_detached(PAYLOAD, typ=AGREEMENT_TYP), b'{"a":2}', jwks_of(key)


def _flip_signature(key: SigningKey) -> tuple[str, bytes, object]:
    header, _, signature = key.sign_detached(PAYLOAD, typ=AGREEMENT_TYP).split(".")
    raw = bytearray(unb64(signature))
    raw[10] ^= 0x01
    return f"{header}..{b64(bytes(raw))}", PAYLOAD, jwks_of(key)


def _unknown_kid(key: SigningKey) -> tuple[str, bytes, object]:
    other = SigningKey.from_ed25519_seed(bytes(32))
    return key.sign_detached(PAYLOAD, typ=AGREEMENT_TYP), PAYLOAD, jwks_of(other)


def _kid_names_another_key(key: SigningKey) -> tuple[str, bytes, object]:
    impostor = SigningKey.from_ed25519_seed(bytes(32)).public_jwk()
    entry = {**impostor, "kid": key.kid}
    return key.sign_detached(PAYLOAD, typ=AGREEMENT_TYP), PAYLOAD, {"keys": [entry]}


def _hs256_with_public_key_as_secret(key: SigningKey) -> tuple[str, bytes, object]:
    # The classic key confusion: an HMAC keyed with the published public key.
    header = header_segment({"alg": "HS256", "kid": key.kid, "typ": AGREEMENT_TYP})
    secret = unb64(key.public_jwk()["x"])
    mac = hmac.new(secret, f"{header}.{b64(PAYLOAD)}".encode(), hashlib.sha256).digest()
    return f"{header}..{b64(mac)}", PAYLOAD, jwks_of(key)


def _alg_none(key: SigningKey) -> tuple[str, bytes, object]:
    header = header_segment({"alg": "none", "kid": key.kid, "typ": AGREEMENT_TYP})
    return f"{header}..", PAYLOAD, jwks_of(key)


def _deprecated_eddsa(key: SigningKey) -> tuple[str, bytes, object]:
    # A genuine Ed25519 signature, but under the deprecated polymorphic name.
    header = {"alg": "EdDSA", "kid": key.kid, "typ": AGREEMENT_TYP}
    assert isinstance(key.private_key, Ed25519PrivateKey)
    signing_key = OKPKey.import_key(key.private_key)
    with pytest.warns(SecurityWarning, match="deprecated"):
        compact = jws.serialize_compact(header, PAYLOAD, signing_key, algorithms=["EdDSA"])
    return jws.detach_content(compact), PAYLOAD, jwks_of(key)


def _attached_payload(key: SigningKey) -> tuple[str, bytes, object]:
    header, _, signature = key.sign_detached(PAYLOAD, typ=AGREEMENT_TYP).split(".")
    return f"{header}.{b64(PAYLOAD)}.{signature}", PAYLOAD, jwks_of(key)


def _wrong_typ(key: SigningKey) -> tuple[str, bytes, object]:
    return key.sign_detached(PAYLOAD, typ=CHECKPOINT_TYP), PAYLOAD, jwks_of(key)


def _extra_header_member(key: SigningKey) -> tuple[str, bytes, object]:
    header = {"alg": key.alg, "kid": key.kid, "typ": AGREEMENT_TYP, "b64": False, "crit": ["b64"]}
    assert isinstance(key.private_key, Ed25519PrivateKey)
    signing_key = OKPKey.import_key(key.private_key)
    compact = jws.serialize_compact(header, PAYLOAD, signing_key, algorithms=[key.alg])
    return compact, PAYLOAD, jwks_of(key)


def _duplicate_header_member(key: SigningKey) -> tuple[str, bytes, object]:
    text = f'{{"alg":"Ed25519","kid":"{key.kid}","typ":"{AGREEMENT_TYP}","typ":"{AGREEMENT_TYP}"}}'
    return f"{b64(text.encode())}..{b64(bytes(64))}", PAYLOAD, jwks_of(key)


def _non_canonical_base64(key: SigningKey) -> tuple[str, bytes, object]:
    # 64 bytes leave 2 unused bits in the last character: "g" and "h" decode alike.
    signature = key.sign_detached(PAYLOAD, typ=AGREEMENT_TYP)
    assert signature.endswith("g")
    return signature[:-1] + "h", PAYLOAD, jwks_of(key)


def _key_labelled_for_another_alg(key: SigningKey) -> tuple[str, bytes, object]:
    entry = {**key.public_jwk(), "alg": "ES256"}
    return key.sign_detached(PAYLOAD, typ=AGREEMENT_TYP), PAYLOAD, {"keys": [entry]}


def _encryption_key(key: SigningKey) -> tuple[str, bytes, object]:
    entry = {**key.public_jwk(), "use": "enc"}
    return key.sign_detached(PAYLOAD, typ=AGREEMENT_TYP), PAYLOAD, {"keys": [entry]}


def _point_off_the_curve(key: SigningKey) -> tuple[str, bytes, object]:
    entry: dict[str, object] = {
        "kty": "EC",
        "crv": "P-256",
        "x": b64(b"\x01" * 32),
        "y": b64(b"\x02" * 32),
    }
    entry["kid"] = thumbprint(entry)
    header = header_segment({"alg": "ES256", "kid": entry["kid"], "typ": AGREEMENT_TYP})
    return f"{header}..{b64(bytes(64))}", PAYLOAD, {"keys": [entry]}


def _oversized_signature(key: SigningKey) -> tuple[str, bytes, object]:
    header = key.sign_detached(PAYLOAD, typ=AGREEMENT_TYP).split(".")[0]
    return f"{header}..{b64(bytes(4096))}", PAYLOAD, jwks_of(key)


def _no_key_set(key: SigningKey) -> tuple[str, bytes, object]:
    return key.sign_detached(PAYLOAD, typ=AGREEMENT_TYP), PAYLOAD, {"jwks": []}


@pytest.mark.parametrize(
    ("case", "error", "code"),
    [
        (_flip_payload, SignatureInvalid, "signature_invalid"),
        (_flip_signature, SignatureInvalid, "signature_invalid"),
        (_unknown_kid, UnknownKey, "unknown_kid"),
        (_no_key_set, UnknownKey, "unknown_kid"),
        (_kid_names_another_key, KeyInvalid, "key_invalid"),
        (_encryption_key, KeyInvalid, "key_invalid"),
        (_point_off_the_curve, KeyInvalid, "key_invalid"),
        (_hs256_with_public_key_as_secret, AlgorithmNotAllowed, "alg_not_allowed"),
        (_alg_none, AlgorithmNotAllowed, "alg_not_allowed"),
        (_deprecated_eddsa, AlgorithmNotAllowed, "alg_not_allowed"),
        (_key_labelled_for_another_alg, AlgorithmNotAllowed, "alg_not_allowed"),
        (_attached_payload, SignatureMalformed, "signature_malformed"),
        (_wrong_typ, SignatureMalformed, "signature_malformed"),
        (_extra_header_member, SignatureMalformed, "signature_malformed"),
        (_duplicate_header_member, SignatureMalformed, "signature_malformed"),
        (_non_canonical_base64, SignatureMalformed, "signature_malformed"),
        (_oversized_signature, SignatureMalformed, "signature_malformed"),
    ],
)
def test_refusals(
    case: Callable[[SigningKey], tuple[str, bytes, object]],
    error: type[VerificationError],
    code: str,
    ed_key: SigningKey,
) -> None:
    signature, payload, jwks = case(ed_key)
    with pytest.raises(error) as caught:
        verify_detached(signature, payload, jwks, typ=AGREEMENT_TYP)  # type: ignore[arg-type]
    assert caught.value.code == code
    assert caught.value.status == 422


@pytest.mark.parametrize(
    "garbage",
    ["", ".", "..", "...", "a.b", "a..b..c", "!!!..AAAA", "e30..", "W10..", "bnVsbA..", "eyJ..AA"],
)
def test_garbage_is_malformed(garbage: str, ed_key: SigningKey) -> None:
    with pytest.raises(SignatureMalformed):
        verify_detached(garbage, PAYLOAD, jwks_of(ed_key), typ=AGREEMENT_TYP)


def test_algorithms_narrow_the_allow_list_but_never_widen_it(
    ed_key: SigningKey, es_key: SigningKey
) -> None:
    signature = es_key.sign_detached(PAYLOAD, typ=AGREEMENT_TYP)
    with pytest.raises(AlgorithmNotAllowed):
        verify_detached(
            signature, PAYLOAD, jwks_of(es_key), typ=AGREEMENT_TYP, algorithms=["Ed25519"]
        )
    forged, payload, jwks = _hs256_with_public_key_as_secret(ed_key)
    with pytest.raises(AlgorithmNotAllowed):
        verify_detached(forged, payload, jwks, typ=AGREEMENT_TYP, algorithms=["HS256"])  # type: ignore[arg-type]
    assert set(ALLOWED_ALGORITHMS) == {"Ed25519", "ES256"}


# Nothing but VerificationError escapes ---------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


def _expect_only_verification_errors(signature: object, jwks: object) -> None:
    with contextlib.suppress(VerificationError):
        verify_detached(signature, PAYLOAD, jwks, typ=AGREEMENT_TYP)  # type: ignore[arg-type]


@given(
    signature=st.text(alphabet=st.sampled_from("eyJ.-_AQgw=+/!\x00é")) | st.text(), jwks=json_values
)
def test_garbage_signatures_and_key_sets_raise_only_verification_errors(
    signature: str, jwks: object
) -> None:
    _expect_only_verification_errors(signature, jwks)


GOLDEN_KEY = SigningKey.from_ed25519_seed(bytes(range(32)))
OTHER_ES_KEY = SigningKey.from_cryptography(ec.derive_private_key(2**200 + 12345, ec.SECP256R1()))


NEAR_VALUES = st.sampled_from(
    ["Ed25519", "ES256", "EdDSA", "none", "OKP", "EC", "P-256", "sig", "enc", GOLDEN_KID, ""]
)


def _raw_signature(key: SigningKey, signing_input: bytes) -> bytes:
    """Sign with cryptography directly, since joserfc would refuse the tampered headers."""
    if isinstance(key.private_key, Ed25519PrivateKey):
        return key.private_key.sign(signing_input)
    r, s = decode_dss_signature(key.private_key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
    return r.to_bytes(32, "big") + s.to_bytes(32, "big")


@st.composite
def tampered(draw: st.DrawFn) -> tuple[str, dict[str, object], SigningKey]:
    """A good signature and key set, with a few members removed or replaced."""
    key = draw(st.sampled_from([GOLDEN_KEY, OTHER_ES_KEY]))
    header: dict[str, object] = {"alg": key.alg, "kid": key.kid, "typ": AGREEMENT_TYP}
    entry: dict[str, object] = dict(key.public_jwk())
    targets = [(header, name) for name in header] + [(entry, name) for name in entry]
    for mapping, name in draw(st.lists(st.sampled_from(targets), max_size=2)):
        if draw(st.booleans()):
            mapping.pop(name, None)
        else:
            mapping[name] = draw(NEAR_VALUES | json_values)
    protected = header_segment(header)
    signature = draw(
        st.just(_raw_signature(key, f"{protected}.{b64(PAYLOAD)}".encode()))
        | st.binary(max_size=70)
    )
    others = draw(st.lists(json_values, max_size=2))
    keys = draw(st.permutations([entry, *others]))
    return f"{protected}..{b64(signature)}", {"keys": keys}, key


@given(tampered())
def test_tampered_headers_and_keys_raise_only_verification_errors(
    case: tuple[str, dict[str, object], SigningKey],
) -> None:
    signature, jwks, key = case
    try:
        verified = verify_detached(signature, PAYLOAD, jwks, typ=AGREEMENT_TYP)
    except VerificationError:
        return
    assert verified == VerifiedSignature(kid=key.kid, alg=key.alg)
