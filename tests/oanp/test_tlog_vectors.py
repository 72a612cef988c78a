"""The transparency log's vectors, ``docs/vectors/tlog-*.json``, say what they claim.

Each is rebuilt here from what the README publishes (the seeds, the names, the time) and the
entries of ``bundle.json``, by a second route that shares no code with :mod:`oanp.tlog` nor
:mod:`oanp.audit`: ``hashlib``, ``rfc8785``, ``base64``, ``struct`` and the ``cryptography``
package's Ed25519, with RFC 6962's tree hash, audit path and consistency proof written out as
the RFC states them. Each is then read with :mod:`oanp.tlog` too: the notes verified, the tile
paths parsed, the proofs computed from the tile, and the ``add-checkpoint`` request answered by
a witness. That every file is what the generator writes is tests/oanp/test_vectors.py's test.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import struct
from typing import Any

import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from oanp.audit import merkle
from oanp.tlog import (
    Cosigner,
    LogRecord,
    Witness,
    cosignature_verifier,
    cosigned_message,
    log_verifiers,
    note_verifier,
    parse_add_checkpoint,
    parse_verifier_key,
    verify_checkpoint,
    verify_cosignature,
)
from oanp.tlog.tree import Tile, consistency_proof, inclusion_proof, leaf_data, parse_tile_path
from oanp.tlog.tree import root_hash as tree_root
from tests.support.vectors import VECTORS_DIR


def stored(name: str) -> Any:
    return json.loads((VECTORS_DIR / name).read_text(encoding="utf-8"))


CHECKPOINT = stored("tlog-checkpoint.json")
COSIGNATURE = stored("tlog-cosignature.json")
TILES = stored("tlog-tiles.json")
INCLUSION = stored("tlog-inclusion.json")
CONSISTENCY = stored("tlog-consistency.json")
README = (VECTORS_DIR / "README.md").read_text(encoding="utf-8")


# RFC 6962 and C2SP, written out ---------------------------------------------------------------


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def leaf_hash(data: bytes) -> bytes:
    return sha256(b"\x00" + data)


def node(left: bytes, right: bytes) -> bytes:
    return sha256(b"\x01" + left + right)


def split(n: int) -> int:
    """The largest power of two below ``n`` (n > 1)."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def mth(hashes: list[bytes]) -> bytes:
    """RFC 6962 section 2.1: MTH of the leaves whose hashes these are."""
    if not hashes:
        return sha256(b"")
    if len(hashes) == 1:
        return hashes[0]
    k = split(len(hashes))
    return node(mth(hashes[:k]), mth(hashes[k:]))


def path(m: int, hashes: list[bytes]) -> list[bytes]:
    """RFC 6962 section 2.1.1: PATH(m, D[n])."""
    if len(hashes) == 1:
        return []
    k = split(len(hashes))
    if m < k:
        return [*path(m, hashes[:k]), mth(hashes[k:])]
    return [*path(m - k, hashes[k:]), mth(hashes[:k])]


def subproof(m: int, hashes: list[bytes], complete: bool) -> list[bytes]:
    """RFC 6962 section 2.1.2: SUBPROOF(m, D[n], b)."""
    if m == len(hashes):
        return [] if complete else [mth(hashes)]
    k = split(len(hashes))
    if m <= k:
        return [*subproof(m, hashes[:k], complete), mth(hashes[k:])]
    return [*subproof(m - k, hashes[k:], False), mth(hashes[:k])]


def key_id(name: str, sig_type: int, public_key: bytes) -> bytes:
    """signed-note: SHA-256(name || 0x0A || type || public key)[:4]."""
    return sha256(name.encode("utf-8") + b"\n" + bytes([sig_type]) + public_key)[:4]


def verifier_key(name: str, sig_type: int, public_key: bytes) -> str:
    return (
        f"{name}+{key_id(name, sig_type, public_key).hex()}+{b64(bytes([sig_type]) + public_key)}"
    )


def signature_line(name: str, signature: bytes) -> str:
    return f"\u2014 {name} {b64(signature)}\n"


def published_seed(label: str) -> bytes:
    """A seed as the README publishes it: ``<label> ... `<64 hex digits>```."""
    found = re.search(label + r"[^`]*`([0-9a-f]{64})`", README)
    assert found is not None, label
    return bytes.fromhex(found[1])


def private_key(seed: bytes) -> tuple[Ed25519PrivateKey, bytes]:
    key = Ed25519PrivateKey.from_private_bytes(seed)
    return key, key.public_key().public_bytes_raw()


# The tree, from bundle.json's entries -----------------------------------------------------------

BUNDLE = stored("bundle.json")
#: Each leaf's data: JCS of {"session_id", "seq", "entry_hash"}, in bundle.json's order.
LEAF_DATA = [
    rfc8785.dumps(
        {
            "session_id": session["session_id"],
            "seq": entry["seq"],
            "entry_hash": entry["entry_hash"],
        }
    )
    for session in BUNDLE["sessions"]
    for entry in session["log"]
]
LEAF_HASHES = [leaf_hash(data) for data in LEAF_DATA]
SIZE = len(LEAF_HASHES)
#: The earlier checkpoint: the first session's entries.
EARLIER = len(BUNDLE["sessions"][0]["log"])
ORIGIN = CHECKPOINT["origin"]
WITNESS_NAME = COSIGNATURE["key"]["name"]


def checkpoint_text(size: int) -> str:
    """tlog-checkpoint: origin, decimal size, base64 root, each line ending in a newline."""
    return f"{ORIGIN}\n{size}\n{b64(mth(LEAF_HASHES[:size]))}\n"


def log_note(size: int) -> str:
    """The checkpoint of ``size`` signed by the log's published key (Ed25519, type 0x01)."""
    key, public = private_key(published_seed("log's Ed25519 key"))
    text = checkpoint_text(size)
    signature = key_id(ORIGIN, 0x01, public) + key.sign(text.encode("utf-8"))
    return text + "\n" + signature_line(ORIGIN, signature)


def cosignature() -> str:
    """tlog-cosignature: the witness's type-0x04 line, key ID || u64 BE time || Ed25519."""
    key, public = private_key(published_seed("witness's Ed25519 key"))
    timestamp = COSIGNATURE["timestamp"]
    message = f"cosignature/v1\ntime {timestamp}\n".encode() + checkpoint_text(SIZE).encode()
    signed = key_id(WITNESS_NAME, 0x04, public) + struct.pack(">Q", timestamp) + key.sign(message)
    return signature_line(WITNESS_NAME, signed)


def test_the_published_names_time_and_sizes_are_the_vectors():
    assert ORIGIN == "arbiter.test/oanp-log"
    assert WITNESS_NAME == "witness.test/w1"
    assert f"`{COSIGNATURE['timestamp']}`" in README
    assert (SIZE, EARLIER) == (21, 9)
    for name in ("checkpoint", "cosignature", "tiles", "inclusion", "consistency"):
        assert stored(f"tlog-{name}.json")["proves"]


# Rebuilt by the second route ------------------------------------------------------------------


def test_the_checkpoint_is_rebuilt():
    seed = published_seed("log's Ed25519 key")
    _, public = private_key(seed)
    assert CHECKPOINT["key"] == {
        "seed": seed.hex(),
        "public_key": public.hex(),
        "key_id": key_id(ORIGIN, 0x01, public).hex(),
        "verifier_key": verifier_key(ORIGIN, 0x01, public),
    }
    assert CHECKPOINT["tree_size"] == SIZE
    assert CHECKPOINT["root_hash"] == b64(mth(LEAF_HASHES))
    assert CHECKPOINT["text"] == checkpoint_text(SIZE)
    assert CHECKPOINT["note"] == log_note(SIZE)
    assert CHECKPOINT["note"].endswith(f" {CHECKPOINT['signature']}\n")


def test_the_cosignature_is_rebuilt():
    seed = published_seed("witness's Ed25519 key")
    _, public = private_key(seed)
    timestamp = COSIGNATURE["timestamp"]
    assert COSIGNATURE["key"] == {
        "name": WITNESS_NAME,
        "seed": seed.hex(),
        "public_key": public.hex(),
        "key_id": key_id(WITNESS_NAME, 0x04, public).hex(),
        "verifier_key": verifier_key(WITNESS_NAME, 0x04, public),
    }
    assert COSIGNATURE["checkpoint"] == checkpoint_text(SIZE)
    assert COSIGNATURE["message"] == f"cosignature/v1\ntime {timestamp}\n" + checkpoint_text(SIZE)
    assert COSIGNATURE["line"] == cosignature()
    assert COSIGNATURE["line"] == signature_line(
        WITNESS_NAME, base64.b64decode(COSIGNATURE["signature"])
    )
    assert COSIGNATURE["note"] == log_note(SIZE) + cosignature()
    # The line's bytes after the key ID are the big-endian time, then the signature.
    signed = base64.b64decode(COSIGNATURE["signature"])
    assert struct.unpack(">Q", signed[4:12]) == (timestamp,)
    assert len(signed) == 4 + 8 + 64


def test_the_tile_and_the_entry_bundle_are_rebuilt():
    assert TILES["tree_size"] == SIZE
    assert TILES["root_hash"] == b64(mth(LEAF_HASHES))
    assert [base64.b64decode(leaf["hash"]) for leaf in TILES["leaves"]] == LEAF_HASHES
    assert [leaf["data"].encode() for leaf in TILES["leaves"]] == LEAF_DATA
    for index, leaf in enumerate(TILES["leaves"]):
        assert leaf["index"] == index
        fields = {k: leaf[k] for k in ("session_id", "seq", "entry_hash")}
        assert rfc8785.dumps(fields) == LEAF_DATA[index]
    # One partial tile of 21 hashes at level 0, tile index 0: tile/0/000.p/21.
    assert TILES["tile"]["path"] == f"tile/0/000.p/{SIZE}"
    assert base64.b64decode(TILES["tile"]["data"]) == b"".join(LEAF_HASHES)
    assert TILES["entries"]["path"] == f"tile/entries/000.p/{SIZE}"
    bundle = b"".join(struct.pack(">H", len(data)) + data for data in LEAF_DATA)
    assert base64.b64decode(TILES["entries"]["data"]) == bundle


def test_every_inclusion_proof_is_rebuilt():
    assert (INCLUSION["tree_size"], INCLUSION["root_hash"]) == (SIZE, b64(mth(LEAF_HASHES)))
    assert INCLUSION["checkpoint"] == log_note(SIZE) + cosignature()
    assert [case["index"] for case in INCLUSION["proofs"]] == list(range(SIZE))
    for case in INCLUSION["proofs"]:
        index = case["index"]
        fields = {"session_id": case["session_id"], "seq": case["seq"]}
        assert (
            rfc8785.dumps({**fields, "entry_hash": TILES["leaves"][index]["entry_hash"]})
            == (LEAF_DATA[index])
        )
        assert case["leaf_hash"] == b64(LEAF_HASHES[index])
        assert case["inclusion"] == [b64(h) for h in path(index, LEAF_HASHES)]


def test_the_consistency_proof_and_its_request_are_rebuilt():
    old, new = CONSISTENCY["old"], CONSISTENCY["new"]
    assert old == {
        "tree_size": EARLIER,
        "root_hash": b64(mth(LEAF_HASHES[:EARLIER])),
        "note": log_note(EARLIER),
    }
    assert new == {"tree_size": SIZE, "root_hash": b64(mth(LEAF_HASHES)), "note": log_note(SIZE)}
    proof = subproof(EARLIER, LEAF_HASHES, True)
    assert CONSISTENCY["proof"] == [b64(h) for h in proof]
    # tlog-witness: old <size>, a proof hash a line, a blank line, the checkpoint.
    lines = "".join(f"{b64(h)}\n" for h in proof)
    assert CONSISTENCY["add_checkpoint"] == f"old {EARLIER}\n{lines}\n{log_note(SIZE)}"
    assert CONSISTENCY["answer"] == cosignature()


# Read with oanp.tlog -----------------------------------------------------------------------------


def read_from_tile(level: int, start: int, count: int) -> list[bytes]:
    """The level hashes of the published tile (level 0 is all a tree of 21 leaves has)."""
    assert level == 0
    data = base64.b64decode(TILES["tile"]["data"])
    return [data[i * 32 : (i + 1) * 32] for i in range(start, start + count)]


def test_oanp_tlog_verifies_the_checkpoint_and_its_cosignature():
    log_key = note_verifier(CHECKPOINT["key"]["verifier_key"])
    witness_key = cosignature_verifier(COSIGNATURE["key"]["verifier_key"])
    verified = verify_checkpoint(CHECKPOINT["note"], [log_key])
    assert verified.checkpoint.origin == ORIGIN
    assert verified.checkpoint.size == CHECKPOINT["tree_size"]
    assert verified.checkpoint.root == base64.b64decode(CHECKPOINT["root_hash"])
    assert verified.note.text == CHECKPOINT["text"]
    cosigned = verify_checkpoint(COSIGNATURE["note"], [log_key, witness_key])
    assert cosigned.signed_by == (ORIGIN, WITNESS_NAME)
    timestamp = verify_cosignature(COSIGNATURE["line"], COSIGNATURE["checkpoint"], witness_key)
    assert timestamp == COSIGNATURE["timestamp"]
    assert cosigned_message(COSIGNATURE["checkpoint"], timestamp) == COSIGNATURE["message"].encode()
    assert parse_verifier_key(COSIGNATURE["key"]["verifier_key"]).sig_type == 0x04


def test_oanp_tlog_reads_the_tiles_and_proves_from_them():
    assert parse_tile_path(TILES["tile"]["path"]) == Tile(0, 0, SIZE)
    assert parse_tile_path(TILES["entries"]["path"]) == Tile(None, 0, SIZE)
    bundle, leaves, at = base64.b64decode(TILES["entries"]["data"]), [], 0
    while at < len(bundle):
        (length,) = struct.unpack(">H", bundle[at : at + 2])
        leaves.append(bundle[at + 2 : at + 2 + length])
        at += 2 + length
    assert [merkle.leaf_hash(data) for data in leaves] == read_from_tile(0, 0, SIZE)
    for leaf, data in zip(TILES["leaves"], leaves, strict=True):
        assert leaf_data(leaf["session_id"], leaf["seq"], leaf["entry_hash"]) == data
    root = tree_root(read_from_tile, SIZE)
    assert root == base64.b64decode(CHECKPOINT["root_hash"])
    for case in INCLUSION["proofs"]:
        proof = inclusion_proof(read_from_tile, case["index"], SIZE)
        assert [base64.b64encode(h).decode() for h in proof] == case["inclusion"]
        leaf = base64.b64decode(case["leaf_hash"])
        assert merkle.verify_inclusion(leaf, case["index"], SIZE, proof, root)
    proof = consistency_proof(read_from_tile, EARLIER, SIZE)
    assert [base64.b64encode(h).decode() for h in proof] == CONSISTENCY["proof"]
    old_root = base64.b64decode(CONSISTENCY["old"]["root_hash"])
    assert merkle.verify_consistency(EARLIER, SIZE, old_root, root, proof)


def test_a_witness_answers_the_request_with_the_published_cosignature():
    request = parse_add_checkpoint(CONSISTENCY["add_checkpoint"])
    assert request.old_size == EARLIER
    assert request.checkpoint == CONSISTENCY["new"]["note"]
    seed = bytes.fromhex(COSIGNATURE["key"]["seed"])
    witness = Witness(
        [Cosigner(WITNESS_NAME, Ed25519PrivateKey.from_private_bytes(seed))],
        log_verifiers([CHECKPOINT["key"]["verifier_key"]]),
    )
    old_root = base64.b64decode(CONSISTENCY["old"]["root_hash"])
    records = {ORIGIN: LogRecord(EARLIER, old_root, CONSISTENCY["old"]["note"])}
    answer = witness.add_checkpoint(
        CONSISTENCY["add_checkpoint"], records, COSIGNATURE["timestamp"]
    )
    assert (answer.status, answer.body) == (200, CONSISTENCY["answer"])
    # Edit one proof line, and the witness refuses it.
    first = CONSISTENCY["proof"][0]
    forged = CONSISTENCY["add_checkpoint"].replace(first, b64(sha256(b"forged")), 1)
    assert witness.add_checkpoint(forged, records, COSIGNATURE["timestamp"]).status == 422


NOTES = {
    "checkpoint": CHECKPOINT["note"],
    "cosigned": COSIGNATURE["note"],
    "inclusion": INCLUSION["checkpoint"],
    "old": CONSISTENCY["old"]["note"],
    "new": CONSISTENCY["new"]["note"],
}


@pytest.mark.parametrize("note", list(NOTES.values()), ids=list(NOTES))
def test_the_notes_are_c2sp_signed_notes(note):
    """signed-note: the text, one blank line, then each signature line an em dash, a space, the
    key name (no space, no plus), a space and base64, each ending in a newline."""
    text, _, signatures = note.rpartition("\n\n")
    assert len(text.split("\n")) == 3
    assert signatures.endswith("\n")
    for line in signatures.removesuffix("\n").split("\n"):
        assert re.fullmatch("\u2014 [^ +]+ [A-Za-z0-9+/]+=*", line), line
