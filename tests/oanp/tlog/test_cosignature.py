"""tlog-cosignature's Ed25519 cosignatures (type 0x04): the exact bytes signed, the line's
key ID, timestamp and signature, the cosigner's keys, and what verifying one refuses."""

from __future__ import annotations

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from oanp.audit.merkle import leaf_hash, root
from oanp.tlog import (
    Checkpoint,
    CosignatureVerifier,
    Cosigner,
    MalformedCheckpoint,
    MalformedCosignature,
    MalformedNote,
    MalformedVerifierKey,
    NoteSignature,
    NoteSignatureInvalid,
    NoteSigner,
    NoteUnverified,
    cosignature_verifier,
    cosigned_message,
    parse_note,
    parse_signer_key,
    parse_verifier_key,
    sign_checkpoint,
    verify_checkpoint,
    verify_cosignature,
)
from oanp.tlog.note import parse_signature_line

# tlog-cosignature.md: its example checkpoint, cosignature line and signed message.
SPEC_BODY = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
SPEC_COSIGNATURE = (
    "— witness.example.com/w1 jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJsX3b2o"
    "yin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA=="
)
SPEC_MESSAGE = (
    b"cosignature/v1\n"
    b"time 1679315147\n"
    b"example.com/behind-the-sofa\n"
    b"20852163\n"
    b"CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
)

SEED = bytes(range(32, 64))
WITNESS = Cosigner("witness.example/w1", Ed25519PrivateKey.from_private_bytes(SEED))
LOG = NoteSigner("example.com/log", Ed25519PrivateKey.from_private_bytes(bytes(range(32))))
CHECKPOINT = Checkpoint("example.com/log", 5, root([leaf_hash(bytes([i])) for i in range(5)]))
BODY = CHECKPOINT.body()
NOW = 1_780_000_000


def test_the_signed_message_is_header_time_and_the_checkpoint_body() -> None:
    assert cosigned_message(SPEC_BODY, 1679315147) == SPEC_MESSAGE


def test_the_spec_example_line_is_key_id_timestamp_and_signature() -> None:
    signature = parse_signature_line(SPEC_COSIGNATURE)
    assert signature.name == "witness.example.com/w1"
    assert signature.key_id == bytes.fromhex("8d66cf3f")
    assert int.from_bytes(signature.signature[:8], "big") == 1679315147
    assert len(signature.signature) == 8 + 64


def test_a_cosignature_signs_the_exact_message_and_states_its_time() -> None:
    line = WITNESS.cosign(BODY, NOW)
    assert line.startswith("— witness.example/w1 ")
    assert line.endswith("\n")
    raw = base64.b64decode(line.split(" ")[2])
    public_key = Ed25519PrivateKey.from_private_bytes(SEED).public_key().public_bytes_raw()
    assert raw[:4] == hashlib.sha256(b"witness.example/w1\n\x04" + public_key).digest()[:4]
    assert raw[4:12] == NOW.to_bytes(8, "big")
    message = f"cosignature/v1\ntime {NOW}\n".encode() + BODY.encode()
    Ed25519PublicKey.from_public_bytes(public_key).verify(raw[12:], message)
    assert len(raw) == 4 + 8 + 64


def test_a_cosignature_round_trips_through_the_vkey() -> None:
    line = WITNESS.cosign(BODY, NOW)
    assert verify_cosignature(line, BODY, WITNESS.verifier_key) == NOW
    assert verify_cosignature(line.removesuffix("\n"), BODY, WITNESS.verifier()) == NOW


def test_the_cosigner_vkey_is_type_4_with_its_own_key_id() -> None:
    vkey = parse_verifier_key(WITNESS.verifier_key)
    assert vkey.sig_type == 0x04
    assert vkey.public_key == WITNESS.public_key
    name, hex_id, material = WITNESS.verifier_key.split("+", 2)
    assert (name, hex_id) == ("witness.example/w1", WITNESS.key_id.hex())
    assert base64.b64decode(material) == b"\x04" + WITNESS.public_key
    # The same key and name as a note key (type 0x01) has another key ID.
    note_key = NoteSigner("witness.example/w1", Ed25519PrivateKey.from_private_bytes(SEED))
    assert note_key.key_id != WITNESS.key_id
    assert isinstance(cosignature_verifier(WITNESS.verifier_key), CosignatureVerifier)
    with pytest.raises(MalformedVerifierKey, match="not an Ed25519 cosigner key"):
        cosignature_verifier(LOG.verifier_key)


def test_a_cosigned_checkpoint_verifies_as_a_note_with_both_keys() -> None:
    signed = sign_checkpoint(CHECKPOINT, [LOG]) + WITNESS.cosign(BODY, NOW)
    verified = verify_checkpoint(signed, [LOG.verifier(), WITNESS.verifier()])
    assert verified.signed_by == ("example.com/log", "witness.example/w1")
    # A client that trusts only the witness reads the same checkpoint.
    assert verify_checkpoint(signed, [WITNESS.verifier()]).signed_by == ("witness.example/w1",)


def test_a_cosignature_of_another_body_or_time_does_not_verify() -> None:
    line = WITNESS.cosign(BODY, NOW)
    with pytest.raises(NoteSignatureInvalid, match="does not verify"):
        verify_cosignature(line, BODY.replace("\n5\n", "\n6\n"), WITNESS.verifier_key)
    signature = parse_signature_line(line.removesuffix("\n"))
    later = (NOW + 1).to_bytes(8, "big") + signature.signature[8:]
    moved = NoteSignature(signature.name, signature.key_id, later).line()
    with pytest.raises(NoteSignatureInvalid):
        verify_cosignature(moved, BODY, WITNESS.verifier_key)


def test_another_cosigners_line_is_not_this_ones() -> None:
    other = Cosigner("witness.example/w2", Ed25519PrivateKey.generate())
    with pytest.raises(NoteUnverified, match=r"not from witness\.example/w1"):
        verify_cosignature(other.cosign(BODY, NOW), BODY, WITNESS.verifier_key)


@pytest.mark.parametrize(
    "signature",
    [
        b"\x00" * 64,
        b"\x00" * 8 + b"\x00" * 63,
        b"\x00" * 8 + b"\x00" * 65,
        (2**63).to_bytes(8, "big") + b"\x00" * 64,
    ],
)
def test_a_line_that_is_no_timestamped_signature_is_malformed(signature: bytes) -> None:
    line = NoteSignature(WITNESS.name, WITNESS.key_id, signature).line()
    with pytest.raises(MalformedCosignature):
        verify_cosignature(line, BODY, WITNESS.verifier_key)
    assert not WITNESS.verifier().verify(BODY, signature)


def test_a_line_that_is_no_signature_line_is_malformed() -> None:
    with pytest.raises(MalformedNote):
        verify_cosignature("witness.example/w1 AAAA", BODY, WITNESS.verifier_key)


@pytest.mark.parametrize("timestamp", [0, -1, 2**63, True])
def test_a_cosigner_states_a_time_of_1_to_2_63_minus_1(timestamp: int) -> None:
    with pytest.raises(ValueError, match="timestamp"):
        WITNESS.cosign(BODY, timestamp)
    assert verify_cosignature(WITNESS.cosign(BODY, 2**63 - 1), BODY, WITNESS.verifier_key) == (
        2**63 - 1
    )


def test_a_cosigner_cosigns_checkpoints_only() -> None:
    with pytest.raises(MalformedCheckpoint):
        WITNESS.cosign("not a checkpoint\n", NOW)


def test_the_signer_key_holds_the_name_and_seed() -> None:
    text = WITNESS.signer_key
    assert text.startswith(f"PRIVATE+KEY+witness.example/w1+{WITNESS.key_id.hex()}+")
    assert base64.b64decode(text.split("+", 4)[4]) == b"\x04" + SEED
    again = parse_signer_key(text)
    assert (again.name, again.public_key) == (WITNESS.name, WITNESS.public_key)
    assert again.cosign(BODY, NOW) == WITNESS.cosign(BODY, NOW)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("witness.example/w1+00000000+AAAA", "starts with PRIVATE"),
        ("PRIVATE+KEY+witness.example/w1", "PRIVATE\\+KEY\\+name"),
        ("PRIVATE+KEY+with space+00000000+AAAA", "PRIVATE\\+KEY\\+name"),
        ("PRIVATE+KEY+w+00000000+not base64", "not base64"),
        ("PRIVATE+KEY+w+00000000+" + base64.b64encode(b"\x01" + SEED).decode(), "type 0x04"),
        ("PRIVATE+KEY+w+00000000+" + base64.b64encode(b"\x04" + SEED[:31]).decode(), "type 0x04"),
        ("PRIVATE+KEY+w+00000000+" + base64.b64encode(b"\x04" + SEED).decode(), "key ID"),
    ],
)
def test_a_malformed_signer_key_is_refused_without_showing_it(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason) as raised:
        parse_signer_key(text)
    assert base64.b64encode(b"\x04" + SEED).decode() not in str(raised.value)


def test_the_witness_cosignature_on_the_spec_example_parses_as_a_note() -> None:
    note = parse_note(SPEC_BODY + "\n" + SPEC_COSIGNATURE + "\n")
    assert [s.name for s in note.signatures] == ["witness.example.com/w1"]
