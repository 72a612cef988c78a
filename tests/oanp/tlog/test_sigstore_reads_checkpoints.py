"""An outside implementation reads what oanp.tlog signs: sigstore's checkpoint reader (the one
its clients verify Rekor's signed-note checkpoints with) parses our checkpoints and verifies the
log's signature, given nothing of ours but the note and the verifier key string.

sigstore keeps that reader in ``sigstore._internal.rekor.checkpoint``; it is the maintained
Python reader of the format, and a move of it fails these tests loudly rather than skipping.
"""

from __future__ import annotations

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from sigstore._internal.rekor.checkpoint import SignedCheckpoint
from sigstore._internal.trust import Keyring, RekorKeyring
from sigstore._utils import KeyID
from sigstore.errors import VerificationError as OutsideVerificationError
from sigstore_models.common.v1 import PublicKey, PublicKeyDetails

from oanp.audit.merkle import EMPTY_ROOT, leaf_hash, root
from oanp.tlog import Checkpoint, Cosigner, NoteSigner, sign_checkpoint

ORIGIN = "example.com/oanp-log"
LOG = NoteSigner(ORIGIN, Ed25519PrivateKey.from_private_bytes(bytes(range(32))))
WITNESS = Cosigner("witness.example/w1", Ed25519PrivateKey.from_private_bytes(bytes(32)))
NOW = 1_780_000_000


def outside_key(vkey: str) -> tuple[RekorKeyring, KeyID]:
    """sigstore's keyring for the verifier key ``vkey``, and the key ID its signature lines
    carry, read from the string by hand (the spec's layout, none of our parsing)."""
    name, hex_id, material = vkey.split("+", 2)
    raw = base64.b64decode(material)
    assert raw[0] == 0x01
    assert hashlib.sha256(name.encode() + b"\n\x01" + raw[1:]).digest()[:4].hex() == hex_id
    spki = Ed25519PublicKey.from_public_bytes(raw[1:]).public_bytes(
        Encoding.DER, PublicFormat.SubjectPublicKeyInfo
    )
    key = PublicKey(raw_bytes=base64.b64encode(spki), key_details=PublicKeyDetails.PKIX_ED25519)
    return RekorKeyring(Keyring([key])), KeyID(bytes.fromhex(hex_id))


@pytest.mark.parametrize("size", [0, 1, 5, 1000])
def test_sigstore_verifies_a_checkpoint_we_sign(size: int) -> None:
    leaves = [leaf_hash(f"entry {i}".encode()) for i in range(size)]
    tree_root = root(leaves) if size else EMPTY_ROOT
    note = sign_checkpoint(Checkpoint(ORIGIN, size, tree_root), [LOG])
    read = SignedCheckpoint.from_text(note)
    assert read.checkpoint.origin == ORIGIN
    assert read.checkpoint.log_size == size
    assert read.checkpoint.log_hash == tree_root.hex()
    assert read.checkpoint.other_content == []
    keyring, key_id = outside_key(LOG.verifier_key)
    read.signed_note.verify(keyring, key_id)


def test_sigstore_verifies_the_log_signature_beside_a_cosignature() -> None:
    checkpoint = Checkpoint(ORIGIN, 5, root([leaf_hash(bytes([i])) for i in range(5)]))
    note = sign_checkpoint(checkpoint, [LOG]) + WITNESS.cosign(checkpoint.body(), NOW)
    read = SignedCheckpoint.from_text(note)
    assert [s.name for s in read.signed_note.signatures] == [ORIGIN, WITNESS.name]
    read.signed_note.verify(*outside_key(LOG.verifier_key))


def test_sigstore_reads_extension_lines_as_we_write_them() -> None:
    checkpoint = Checkpoint(ORIGIN, 1, leaf_hash(b"x"), ("Timestamp: 1780000000",))
    read = SignedCheckpoint.from_text(sign_checkpoint(checkpoint, [LOG]))
    assert read.checkpoint.other_content == ["Timestamp: 1780000000"]
    read.signed_note.verify(*outside_key(LOG.verifier_key))


def test_sigstore_refuses_a_checkpoint_changed_after_we_signed_it() -> None:
    note = sign_checkpoint(Checkpoint(ORIGIN, 5, EMPTY_ROOT), [LOG]).replace("\n5\n", "\n6\n")
    with pytest.raises(OutsideVerificationError, match="invalid signature"):
        SignedCheckpoint.from_text(note).signed_note.verify(*outside_key(LOG.verifier_key))


def test_sigstore_refuses_another_key_under_the_log_name() -> None:
    impostor = NoteSigner(ORIGIN, Ed25519PrivateKey.generate())
    note = sign_checkpoint(Checkpoint(ORIGIN, 0, EMPTY_ROOT), [impostor])
    with pytest.raises(OutsideVerificationError):
        SignedCheckpoint.from_text(note).signed_note.verify(*outside_key(LOG.verifier_key))
