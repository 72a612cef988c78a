"""The published vectors of ``docs/vectors/`` are what this project does, and say what they claim.

First, every file is regenerated from the deterministic factories and compared byte for byte
with the stored one (the ES256 signature, which is randomized, is taken from the stored file
and verified instead). Then every stored vector is checked on its own: by a second route where
one exists (``rfc8785``, ``hashlib``, ``cryptography``, the RFC 9162 proof algorithms written out
here) and through ``oanp`` (the parser, the machine, the signer's verifier, the auditor).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
from datetime import timedelta
from typing import Any

import pytest
import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from jwcrypto import jwk as jwcrypto_jwk
from jwcrypto import jws as jwcrypto_jws

from oanp.audit import verify_bundle, verify_log
from oanp.audit.invariants import audit_log
from oanp.audit.walk import Status
from oanp.wire.canonical import canonical_bytes, json_value, read_json
from oanp.wire.commitments import commit, opens, reference_commit
from oanp.wire.envelope import check_sender, parse_envelope
from oanp.wire.errors import ProtocolError, SchemaInvalid, VerificationError
from oanp.wire.log import entry_hash_of
from oanp.wire.machine import Negotiation
from oanp.wire.signing import AGREEMENT_TYP, CHECKPOINT_TYP, SigningKey, verify_detached
from tests.support.factories.sessions import ARBITER, T0
from tests.support.vectors import FILES, VECTORS_DIR, agreements_json

ZERO_HASH = "sha256:" + "0" * 64
#: The published SFO→JFK session (docs/protocol.md §5), entry by entry: type and price.
SFO_JFK_TRACE = [
    ("session.open", None),
    ("session.ack", None),
    ("offer.propose", 320),
    ("offer.counter", 370),
    ("round.verdict", None),
    ("offer.propose", 340),
    ("offer.accept", 340),
    ("round.verdict", None),
    ("session.agree", None),
]


def stored(name: str) -> Any:
    return json.loads((VECTORS_DIR / name).read_text(encoding="utf-8"))


def sha256_tagged(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


# (a) Every file is what the generator writes. ------------------------------------------------


@pytest.mark.parametrize("name", [n for n in FILES if n != "agreements.json"])
def test_the_stored_file_is_regenerated_byte_for_byte(name):
    assert (VECTORS_DIR / name).read_bytes() == FILES[name]()


def test_the_stored_agreements_are_regenerated_byte_for_byte_but_the_es256_signature():
    es256 = [v for v in stored("agreements.json") if v["alg"] == "ES256"]
    assert len(es256) == 1
    # agreements_json verifies the signature it is given before it writes it.
    assert (VECTORS_DIR / "agreements.json").read_bytes() == agreements_json(es256[0]["signature"])


def test_the_directory_holds_the_files_and_the_readme_describes_each():
    assert sorted(p.name for p in VECTORS_DIR.iterdir()) == sorted([*FILES, "README.md"])
    readme = (VECTORS_DIR / "README.md").read_text(encoding="utf-8")
    assert "python -m tests.support.vectors" in readme
    for name in FILES:
        assert f"`{name}`" in readme, name


def test_the_readme_names_every_refusal_code_and_the_test_keys():
    readme = (VECTORS_DIR / "README.md").read_text(encoding="utf-8")
    for case in BAD:
        if "code" in case["expect"]:
            assert f"`{case['expect']['code']}`" in readme, case["name"]
    ed25519_seed = re.search(r"private key \(seed\)\s+`([0-9a-f]{64})`", readme)
    es256_scalar = re.search(r"private scalar `([0-9a-f]{64})`", readme)
    assert ed25519_seed is not None
    assert es256_scalar is not None
    ed25519 = SigningKey.from_ed25519_seed(bytes.fromhex(ed25519_seed[1]))
    scalar = int.from_bytes(bytes.fromhex(es256_scalar[1]), "big")
    es256 = SigningKey.from_cryptography(ec.derive_private_key(scalar, ec.SECP256R1()))
    assert [a["jwks"]["keys"] for a in AGREEMENTS] == [[ed25519.public_jwk()], [es256.public_jwk()]]
    # With the published seed, the Ed25519 signature is reproduced, not only verified.
    signed = AGREEMENTS[0]["canonical"].encode("utf-8")
    assert ed25519.sign_detached(signed, typ=AGREEMENT_TYP) == AGREEMENTS[0]["signature"]


@pytest.mark.parametrize("name", list(FILES))
def test_the_files_are_pretty_printed_ascii_json(name):
    data = (VECTORS_DIR / name).read_bytes()
    assert data.isascii()
    assert data == (json.dumps(json.loads(data), indent=2) + "\n").encode("ascii")


# (b) canonical.json --------------------------------------------------------------------------

CANONICAL = stored("canonical.json")


@pytest.mark.parametrize("case", CANONICAL, ids=[c["name"] for c in CANONICAL])
def test_each_canonical_vector_is_rfc_8785(case):
    expected = case["canonical"].encode("utf-8")
    assert rfc8785.dumps(json.loads(case["input"])) == expected
    assert sha256_tagged(expected) == case["sha256"]
    if case["accepted"]:
        assert canonical_bytes(json_value(read_json(case["input"]))) == expected
        # Canonical text is a fixed point.
        assert rfc8785.dumps(json.loads(case["canonical"])) == expected
    else:
        with pytest.raises(SchemaInvalid):
            json_value(read_json(case["input"]))


def test_the_canonical_vectors_cover_what_they_must():
    names = {c["name"] for c in CANONICAL}
    assert len(names) == len(CANONICAL)
    assert {
        "keys-sorted",
        "keys-utf16-order-rfc8785-3.2.3",
        "keys-astral-before-private-use",
        "integers",
        "exponent-1e20",
        "fraction-100000000000000000000.0",
        "negative-zero-double",
        "small-doubles",
        "large-doubles",
        "price-339.99",
        "control-characters",
        "surrogate-pairs",
        "nested",
        "empty-containers",
    } <= names
    by_name = {c["name"]: c for c in CANONICAL}
    assert by_name["exponent-1e20"]["canonical"] == "100000000000000000000"
    assert by_name["negative-zero-double"]["canonical"] == "0"
    assert by_name["price-339.99"]["canonical"] == "339.99"
    # U+10000 is D800 DC00 in UTF-16, so it sorts before U+E000 although its code point is higher.
    assert by_name["keys-astral-before-private-use"]["canonical"] == (
        '{"\U00010000":1,"\ue000":3,"\uffff":2}'
    )


# (b) commitments.json ------------------------------------------------------------------------

COMMITMENTS = stored("commitments.json")


@pytest.mark.parametrize(
    "case", COMMITMENTS["reference"], ids=[c["name"] for c in COMMITMENTS["reference"]]
)
def test_each_reference_commitment_recomputes(case):
    committed = {k: case[k] for k in ("constraints", "item", "max_rounds")}
    preimage = json.dumps(committed, sort_keys=True, separators=(",", ":"))
    assert preimage == case["preimage"]
    assert "0x" + hashlib.sha256(preimage.encode()).hexdigest()[:16] == case["commitment"]
    assert (
        reference_commit(case["constraints"], case["item"], case["max_rounds"])
        == (case["commitment"])
    )
    assert opens(case["commitment"], salt=None, **committed)


@pytest.mark.parametrize(
    "case", COMMITMENTS["salted"], ids=[c["name"] for c in COMMITMENTS["salted"]]
)
def test_each_salted_commitment_recomputes(case):
    committed = {k: case[k] for k in ("constraints", "item", "max_rounds", "salt")}
    assert rfc8785.dumps(committed) == case["preimage"].encode("utf-8")
    assert sha256_tagged(case["preimage"].encode("utf-8")) == case["commitment"]
    assert commit(**committed) == case["commitment"]
    assert len(b64url_decode(case["salt"])) == 32
    assert b64url(b64url_decode(case["salt"])) == case["salt"]
    assert opens(case["commitment"], **committed)
    other_salt = b64url(bytes(b ^ 1 for b in b64url_decode(case["salt"])))
    assert not opens(case["commitment"], **{**committed, "salt": other_salt})


def test_the_commitment_vectors_hold_the_golden_one_and_both_roles():
    reference = {c["name"]: c["commitment"] for c in COMMITMENTS["reference"]}
    assert reference["public-golden-buyer"] == "0xfd6b8b899c3e4309"
    for kind in ("reference", "salted"):
        assert {c["role"] for c in COMMITMENTS[kind]} == {"buyer", "merchant"}
    salted = {c["name"]: c["commitment"] for c in COMMITMENTS["salted"]}
    assert salted["buyer-golden-zero-salt"] == (
        "sha256:b9dc96522fdee238a85218992518dc074790ec10d2b9f718559383930ffe6d4d"
    )
    # The SFO→JFK parties' commitments are the ones session.json carries.
    entries = stored("session.json")["entries"]
    assert entries[0]["envelope"]["payload"]["constraints_commit"] == salted["buyer-sfo-jfk"]
    assert entries[1]["envelope"]["payload"]["constraints_commit"] == salted["merchant-sfo-jfk"]


# (b) session.json ----------------------------------------------------------------------------

SESSION = stored("session.json")


def chain_recomputes(entries: list[dict[str, Any]]) -> bool:
    """The hash chain of docs/protocol.md §12, with rfc8785 and hashlib alone."""
    prev = ZERO_HASH
    for seq, entry in enumerate(entries, start=1):
        hashed = {k: v for k, v in entry.items() if k != "entry_hash"}
        if entry["seq"] != seq or entry["prev_hash"] != prev:
            return False
        if sha256_tagged(rfc8785.dumps(hashed)) != entry["entry_hash"]:
            return False
        prev = entry["entry_hash"]
    return True


def thumbprint(jwk: dict[str, str]) -> str:
    """RFC 7638: the required members, in lexicographic order, no whitespace."""
    names = ("crv", "kty", "x") if jwk["kty"] == "OKP" else ("crv", "kty", "x", "y")
    members = ",".join(f'"{n}":"{jwk[n]}"' for n in names)
    return b64url(hashlib.sha256(("{" + members + "}").encode()).digest())


def verify_jws_by_hand(jws: str, payload: bytes, jwks: dict[str, Any], typ: str) -> None:
    """RFC 7515 appendix F with cryptography alone; raises InvalidSignature when it fails."""
    header_segment, empty, signature_segment = jws.split(".")
    assert empty == ""
    header = json.loads(b64url_decode(header_segment))
    assert set(header) == {"alg", "kid", "typ"}
    assert header["typ"] == typ
    (jwk,) = [k for k in jwks["keys"] if k["kid"] == header["kid"]]
    assert thumbprint(jwk) == header["kid"]
    signing_input = header_segment.encode() + b"." + b64url(payload).encode()
    signature = b64url_decode(signature_segment)
    if header["alg"] == "Ed25519":
        public = Ed25519PublicKey.from_public_bytes(b64url_decode(jwk["x"]))
        public.verify(signature, signing_input)
        return
    assert header["alg"] == "ES256"
    assert len(signature) == 64
    numbers = ec.EllipticCurvePublicNumbers(
        int.from_bytes(b64url_decode(jwk["x"]), "big"),
        int.from_bytes(b64url_decode(jwk["y"]), "big"),
        ec.SECP256R1(),
    )
    der = encode_dss_signature(
        int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
    )
    numbers.public_key().verify(der, signing_input, ec.ECDSA(hashes.SHA256()))


def test_the_session_is_the_published_example():
    entries = SESSION["entries"]
    trace = [(e["envelope"]["type"], e["envelope"]["payload"].get("price")) for e in entries]
    assert trace == SFO_JFK_TRACE
    assert {e["envelope"]["session_id"] for e in entries} == {SESSION["session_id"]}
    assert SESSION["final_price"] == 340


def test_every_entry_hash_of_the_session_recomputes():
    entries = SESSION["entries"]
    assert entries[0]["prev_hash"] == ZERO_HASH
    assert chain_recomputes(entries)
    for entry in entries:
        assert entry_hash_of(json_value(entry)) == entry["entry_hash"]


def test_the_independent_chain_check_catches_an_edit():
    entries = copy.deepcopy(SESSION["entries"])
    entries[3]["envelope"]["payload"]["price"] = 371
    assert not chain_recomputes(entries)


def test_the_session_digest_is_the_head_before_the_agreement():
    entries = SESSION["entries"]
    payload = entries[-1]["envelope"]["payload"]
    assert SESSION["session_digest"] == entries[-2]["entry_hash"]
    assert payload["session_digest"] == payload["agreement"]["session_digest"]
    assert payload["session_digest"] == SESSION["session_digest"]
    assert SESSION["log_length"] == payload["agreement"]["log_length"] == len(entries) - 1


def test_the_session_agreement_verifies_against_its_jwks():
    payload = SESSION["entries"][-1]["envelope"]["payload"]
    signed = rfc8785.dumps(payload["agreement"])
    verified = verify_detached(payload["signature"], signed, SESSION["jwks"], typ=AGREEMENT_TYP)
    assert (verified.alg, verified.kid) == (payload["signature_alg"], payload["kid"])
    verify_jws_by_hand(payload["signature"], signed, SESSION["jwks"], AGREEMENT_TYP)


def test_the_session_passes_the_auditor():
    report = verify_log(SESSION["entries"], SESSION["jwks"])
    assert report.ok, [c.line() for c in report.checks if not c.ok]
    assert report.agreements == (1, 1)


# (b) agreements.json -------------------------------------------------------------------------

AGREEMENTS = stored("agreements.json")


def test_there_is_one_agreement_per_algorithm():
    assert [a["alg"] for a in AGREEMENTS] == ["Ed25519", "ES256"]
    # The Ed25519 one is the agreement session.json ends with, with the same signature.
    payload = SESSION["entries"][-1]["envelope"]["payload"]
    assert AGREEMENTS[0]["agreement"] == payload["agreement"]
    assert AGREEMENTS[0]["signature"] == payload["signature"]


@pytest.mark.parametrize("vector", AGREEMENTS, ids=[a["alg"] for a in AGREEMENTS])
def test_each_agreement_signature_verifies(vector):
    signed = vector["canonical"].encode("utf-8")
    assert rfc8785.dumps(vector["agreement"]) == signed
    assert canonical_bytes(json_value(vector["agreement"])) == signed
    verified = verify_detached(vector["signature"], signed, vector["jwks"], typ=AGREEMENT_TYP)
    (jwk,) = vector["jwks"]["keys"]
    assert (verified.alg, verified.kid) == (vector["alg"], jwk["kid"])
    verify_jws_by_hand(vector["signature"], signed, vector["jwks"], AGREEMENT_TYP)


@pytest.mark.parametrize("vector", AGREEMENTS, ids=[a["alg"] for a in AGREEMENTS])
def test_each_agreement_signature_fails_over_other_bytes(vector):
    other = vector["canonical"].replace('"final_price":340', '"final_price":341').encode()
    assert other != vector["canonical"].encode()
    with pytest.raises(VerificationError) as refused:
        verify_detached(vector["signature"], other, vector["jwks"], typ=AGREEMENT_TYP)
    assert refused.value.code == "signature_invalid"
    with pytest.raises(InvalidSignature):
        verify_jws_by_hand(vector["signature"], other, vector["jwks"], AGREEMENT_TYP)


@pytest.mark.parametrize("vector", AGREEMENTS, ids=[a["alg"] for a in AGREEMENTS])
def test_each_agreement_verifies_with_an_independent_jose_library(vector):
    """jwcrypto, a JOSE library of its own, with the detached payload re-attached as the
    agent documentation says: the signature holds, and not over other bytes."""
    keys = jwcrypto_jwk.JWKSet.from_json(json.dumps(vector["jwks"]))
    (jwk,) = vector["jwks"]["keys"]
    token = jwcrypto_jws.JWS()
    token.deserialize(vector["signature"])
    signed = vector["canonical"].encode("utf-8")
    token.verify(keys.get_key(jwk["kid"]), detached_payload=signed, alg=vector["alg"])
    assert token.jose_header["typ"] == AGREEMENT_TYP
    other = jwcrypto_jws.JWS()
    other.deserialize(vector["signature"])
    with pytest.raises(jwcrypto_jws.InvalidJWSSignature):
        other.verify(keys.get_key(jwk["kid"]), detached_payload=signed + b" ", alg=vector["alg"])


# (b) bundle.json, bundle-extended.json -------------------------------------------------------

BUNDLE = stored("bundle.json")
EXTENDED = stored("bundle-extended.json")


def node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def leaves(bundle: dict[str, Any]) -> list[bytes]:
    return [
        hashlib.sha256(b"\x00" + rfc8785.dumps(entry)).digest()
        for session in bundle["sessions"]
        for entry in session["log"]
    ]


def mth(hashes_: list[bytes]) -> bytes:
    """RFC 6962 section 2.1, recursively: split at the largest power of two below n."""
    if len(hashes_) == 1:
        return hashes_[0]
    k = 1
    while k * 2 < len(hashes_):
        k *= 2
    return node(mth(hashes_[:k]), mth(hashes_[k:]))


def inclusion_holds(leaf: bytes, index: int, size: int, path: list[bytes], root: bytes) -> bool:
    """RFC 9162 section 2.1.3.2."""
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node(p, r)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def consistency_holds(first: int, second: int, old: bytes, new: bytes, path: list[bytes]) -> bool:
    """RFC 9162 section 2.1.4.2, for 0 < first < second."""
    if not path:
        return False
    if first & (first - 1) == 0:
        path = [old, *path]
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr, sr = node(c, fr), node(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node(sr, c)
        fn >>= 1
        sn >>= 1
    return fr == old and sr == new and sn == 0


def root_of(statement: dict[str, Any]) -> bytes:
    return bytes.fromhex(statement["root_hash"].removeprefix("sha256:"))


def checkpoint_verifies(bundle: dict[str, Any]) -> dict[str, Any]:
    checkpoint = bundle["checkpoint"]
    statement = checkpoint["statement"]
    signed = rfc8785.dumps(statement)
    verify_detached(checkpoint["signature"], signed, bundle["jwks"], typ=CHECKPOINT_TYP)
    verify_jws_by_hand(checkpoint["signature"], signed, bundle["jwks"], CHECKPOINT_TYP)
    assert statement["manifest_digest"] == sha256_tagged(rfc8785.dumps(bundle["manifest"]))
    return statement


def test_the_bundle_verifies_with_every_entry_proven():
    report = verify_bundle(BUNDLE)
    assert report.ok, [c.line() for c in report.checks if not c.ok]
    (inclusion,) = [c for c in report.checks if c.name == "inclusion proofs"]
    assert inclusion.detail == "21/21 entries proven in the signed tree of 21"


def test_the_bundle_proofs_hold_by_rfc_9162():
    statement = checkpoint_verifies(BUNDLE)
    size, root = statement["tree_size"], root_of(statement)
    assert BUNDLE["proofs"]["tree_size"] == size == len(leaves(BUNDLE))
    assert mth(leaves(BUNDLE)) == root
    listed = {s["session_id"]: s for s in BUNDLE["manifest"]["sessions"]}
    for session in BUNDLE["sessions"]:
        first = listed[session["session_id"]]["first_leaf"]
        paths = BUNDLE["proofs"]["inclusion"][session["session_id"]]
        assert len(paths) == len(session["log"]) == listed[session["session_id"]]["entries"]
        for i, entry in enumerate(session["log"]):
            leaf = hashlib.sha256(b"\x00" + rfc8785.dumps(entry)).digest()
            path = [bytes.fromhex(p) for p in paths[i]]
            assert inclusion_holds(leaf, first + i, size, path, root)
            # The same path proves no other position.
            assert not inclusion_holds(leaf, first + i + 1, size, path, root)


def test_the_extended_bundle_verifies_against_the_earlier_one():
    report = verify_bundle(EXTENDED, since=BUNDLE)
    assert report.ok, [c.line() for c in report.checks if not c.ok]
    details = {c.name: c.detail for c in report.checks}
    assert details["consistency #1"] == "tree of 21 is a prefix of this tree of 30"
    assert details["earlier export is a prefix"] == "its 21 entries are the first 21 of these 30"
    assert details["merkle root"] == "30 leaves against the signed root"


def test_the_extended_bundle_proves_consistency_by_rfc_9162():
    statement = checkpoint_verifies(EXTENDED)
    earlier = checkpoint_verifies(BUNDLE)
    all_leaves = leaves(EXTENDED)
    assert EXTENDED["proofs"] is None
    assert statement["tree_size"] == EXTENDED["manifest"]["tree_size"] == len(all_leaves) == 30
    assert mth(all_leaves) == root_of(statement)
    assert mth(all_leaves[: earlier["tree_size"]]) == root_of(earlier)
    (item,) = EXTENDED["consistency"]
    assert item["checkpoint"] == BUNDLE["checkpoint"]
    proof = [bytes.fromhex(p) for p in item["proof"]]
    args = (earlier["tree_size"], statement["tree_size"], root_of(earlier), root_of(statement))
    assert consistency_holds(*args, proof)
    assert not consistency_holds(*args, proof[:-1])
    assert not consistency_holds(earlier["tree_size"] - 1, *args[1:], proof)


# (b) bad.json --------------------------------------------------------------------------------

BAD = stored("bad.json")


def by_kind(kind: str) -> list[dict[str, Any]]:
    return [c for c in BAD if c["kind"] == kind]


def test_the_bad_cases_are_named_once_and_cover_every_kind():
    names = [c["name"] for c in BAD]
    assert len(names) == len(set(names))
    assert {c["kind"] for c in BAD} == {"envelope", "log", "bundle", "signature"}
    codes = {c["expect"]["code"] for c in by_kind("envelope")}
    assert {
        "schema_invalid",
        "malformed_json",
        "role_may_not_send",
        "price_precision",
    } <= codes
    assert {c["expect"]["check"] for c in by_kind("log")} >= {"I2", "I4", "I6", "I7"}


def opened(session: list[dict[str, Any]]) -> Negotiation:
    """A session opened and fed from ``session``, one second apart; raises if one is refused."""
    first, *rest = [parse_envelope(json.dumps(e)) for e in session]
    negotiation, _ = Negotiation.open(first, received_at=T0, arbiter=ARBITER)
    for n, move in enumerate(rest, start=1):
        negotiation.feed(move, received_at=T0 + timedelta(seconds=n))
    return negotiation


def envelope_refusal(case: dict[str, Any]) -> ProtocolError | None:
    """Parse and check the sender; or feed the case to the session its ``session`` opens."""
    data = case["input"].encode("utf-8")
    negotiation = opened(case["session"]) if "session" in case else None
    try:
        if negotiation is None:
            check_sender(parse_envelope(data))
        else:
            received = T0 + timedelta(seconds=len(case["session"]))
            negotiation.feed(parse_envelope(data), received_at=received)
    except ProtocolError as exc:
        return exc
    return None


@pytest.mark.parametrize("case", by_kind("envelope"), ids=[c["name"] for c in by_kind("envelope")])
def test_each_bad_envelope_is_refused_with_its_code(case):
    assert isinstance(case["input"], str)
    refused = envelope_refusal(case)
    assert refused is not None
    assert (refused.code, refused.status) == (case["expect"]["code"], case["expect"]["status"])
    if "fields" in case["expect"]:
        assert [e.field for e in refused.errors] == case["expect"]["fields"]


@pytest.mark.parametrize("case", by_kind("log"), ids=[c["name"] for c in by_kind("log")])
def test_each_bad_log_fails_the_stated_invariants(case):
    entries, keys, expect = case["input"]["entries"], case["input"]["jwks"], case["expect"]
    audit = audit_log([json_value(e) for e in entries], keys)
    failed = [i for i, r in audit.results.items() if r.status is Status.FAIL]
    assert failed == expect["failed"]
    assert expect["check"] in failed or not failed
    if "I7" not in failed:
        assert chain_recomputes(entries)
    if "code" in expect:
        payload = entries[-1]["envelope"]["payload"]
        with pytest.raises(VerificationError) as refused:
            verify_detached(
                payload["signature"], rfc8785.dumps(payload["agreement"]), keys, typ=AGREEMENT_TYP
            )
        assert refused.value.code == expect["code"]


@pytest.mark.parametrize("name", ["entry-edited", "entry-removed"])
def test_the_independent_chain_check_fails_the_broken_chains(name):
    (case,) = [c for c in BAD if c["name"] == name]
    assert not chain_recomputes(case["input"]["entries"])


def test_the_caught_renege_is_evidence_then_its_verdict_then_a_close():
    (case,) = [c for c in BAD if c["name"] == "renege-caught"]
    entries, expect = case["input"]["entries"], case["expect"]
    assert expect["failed"] == []
    assert expect["check"] == "I4"
    evidence = entries[expect["evidence"] - 1]["envelope"]
    earlier = [
        e["envelope"]["payload"]["price"]
        for e in entries[: expect["evidence"] - 1]
        if e["envelope"]["type"] == "offer.propose"
    ]
    assert evidence["type"] == "offer.propose"
    assert evidence["payload"]["price"] < earlier[-1]
    verdict = entries[expect["evidence"]]["envelope"]
    assert verdict["type"] == "round.verdict"
    assert {k: verdict["payload"][k] for k in expect["verdict"]} == expect["verdict"]
    assert verdict["payload"]["checks"]["I4"] == "fail"
    assert entries[-1]["envelope"]["type"] == "session.close"
    assert entries[-1]["envelope"]["payload"]["reason"] == expect["close"]
    assert chain_recomputes(entries)
    audit = audit_log(entries, case["input"]["jwks"])
    assert audit.ok
    assert audit.results["I4"].notes


def test_the_self_dealing_deal_fails_roles_distinct_alone():
    (case,) = [c for c in BAD if c["name"] == "self-dealing"]
    entries = case["input"]["entries"]
    opening = entries[0]["envelope"]
    assert opening["payload"]["merchant_agent_id"] == opening["sender"]["agent_id"]
    assert entries[-1]["envelope"]["type"] == "session.agree"
    audit = audit_log(entries, case["input"]["jwks"])
    assert audit.agreement_valid
    assert [problem.split(":")[0] for problem in audit.results["I2"].problems] == ["roles_distinct"]


@pytest.mark.parametrize(
    "case", by_kind("signature"), ids=[c["name"] for c in by_kind("signature")]
)
def test_each_bad_signature_is_refused_with_its_code(case):
    given = case["input"]
    with pytest.raises(VerificationError) as refused:
        verify_detached(
            given["signature"], given["payload"].encode("utf-8"), given["jwks"], typ=given["typ"]
        )
    assert (refused.value.code, refused.value.status) == (
        case["expect"]["code"],
        case["expect"]["status"],
    )


@pytest.mark.parametrize("case", by_kind("bundle"), ids=[c["name"] for c in by_kind("bundle")])
def test_each_bad_bundle_fails_the_stated_check(case):
    report = verify_bundle(case["input"]["bundle"], since=case["input"].get("since"))
    failed = [c.name for c in report.checks if not c.ok]
    assert failed == case["expect"]["failed"]
    assert case["expect"]["check"] in failed


def test_every_stored_vector_file_parses_strictly():
    # No duplicate keys, no NaN: what the project's own strict reader accepts.
    for name in FILES:
        read_json((VECTORS_DIR / name).read_bytes())
