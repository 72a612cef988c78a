"""The transparency log's published vectors, ``docs/vectors/tlog-*.json`` (docs/protocol.md §18):
a signed checkpoint, a witness's cosignature of it, the level-0 tile and the entry bundle of its
tree, every leaf's inclusion proof, and a consistency proof with the ``add-checkpoint`` request
that carries it to a witness.

The tree is the global log holding the entries of ``bundle.json``'s two sessions, SFO→JFK then
LAX→ORD, 21 leaves; the earlier checkpoint is the first session's 9. Keys come from fixed
seeds and the cosignature from a fixed time, and Ed25519 is deterministic, so every file comes
out byte for byte the same. :mod:`tests.support.vectors` writes them with the others.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import cast

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from oanp.audit import merkle
from oanp.tlog.checkpoint import Checkpoint, sign_checkpoint
from oanp.tlog.cosignature import Cosigner, cosigned_message
from oanp.tlog.note import NoteSigner, encode_base64, parse_note
from oanp.tlog.tree import (
    TILE_WIDTH,
    LevelHashes,
    Tile,
    consistency_proof,
    inclusion_proof,
    leaf_data,
    root_hash,
)
from oanp.tlog.witness import Witness, add_checkpoint_body, log_verifiers
from tests.support.factories.logs import BUNDLED_AT, NO_DEAL, SFO_JFK, Scenario, session_log

#: The log's origin, as an arbiter at arbiter.test names it by default, and its key's name.
LOG_ORIGIN = "arbiter.test/oanp-log"
#: The log's Ed25519 private key (RFC 8032 seed): a test key, never to be used elsewhere.
LOG_SEED = bytes(range(64, 96))
WITNESS_NAME = "witness.test/w1"
#: The witness's Ed25519 private key (seed): a test key too.
WITNESS_SEED = bytes(range(96, 128))
#: When the witness cosigns: the time ``bundle.json`` was exported, in POSIX seconds.
COSIGNED_AT = int(BUNDLED_AT.timestamp())
#: The sessions whose entries the tree holds, in order: those of ``bundle.json``.
SESSIONS: tuple[Scenario, ...] = (SFO_JFK, NO_DEAL)


def dump(value: object) -> bytes:
    """A vector file, as :func:`tests.support.vectors.dump` writes the others: repeated, not
    imported, since that module imports this one for its files."""
    return (json.dumps(value, indent=2, ensure_ascii=True) + "\n").encode("ascii")


def log_signer() -> NoteSigner:
    return NoteSigner(LOG_ORIGIN, Ed25519PrivateKey.from_private_bytes(LOG_SEED))


def witness_cosigner() -> Cosigner:
    return Cosigner(WITNESS_NAME, Ed25519PrivateKey.from_private_bytes(WITNESS_SEED))


def leaves() -> list[tuple[str, int, str]]:
    """Each leaf's session id, seq and entry hash, in the tree's order."""
    return [
        (scenario.session_id, cast(int, entry["seq"]), cast(str, entry["entry_hash"]))
        for scenario in SESSIONS
        for entry in session_log(scenario)
    ]


def leaf_bytes() -> list[bytes]:
    return [leaf_data(*leaf) for leaf in leaves()]


def leaf_hashes() -> list[bytes]:
    return [merkle.leaf_hash(data) for data in leaf_bytes()]


def stored_hashes(hashes: Sequence[bytes]) -> LevelHashes:
    """The tree's level hashes as a log stores them, computed from its leaf hashes."""

    def read(level: int, start: int, count: int) -> list[bytes]:
        unit: int = TILE_WIDTH**level
        return [
            merkle.root(hashes[index * unit : (index + 1) * unit])
            for index in range(start, start + count)
        ]

    return read


def tree_size() -> int:
    return len(leaves())


def earlier_size() -> int:
    """The earlier checkpoint's size: the first session's entries."""
    return len(session_log(SESSIONS[0]))


def signed_checkpoint(size: int) -> tuple[Checkpoint, str]:
    """The checkpoint of the tree's first ``size`` leaves, and its note signed by the log."""
    root = root_hash(stored_hashes(leaf_hashes()), size)
    assert root is not None
    checkpoint = Checkpoint(LOG_ORIGIN, size, root)
    return checkpoint, sign_checkpoint(checkpoint, [log_signer()])


def _signature(note: str) -> str:
    """The base64 of a note's only signature line: key ID, then the signature."""
    (signature,) = parse_note(note).signatures
    return encode_base64(signature.key_id + signature.signature)


# tlog-checkpoint.json --------------------------------------------------------------------------


def checkpoint_json() -> bytes:
    checkpoint, note = signed_checkpoint(tree_size())
    signer = log_signer()
    return dump(
        {
            "proves": f"The log {LOG_ORIGIN}, whose key is key.verifier_key, states that its "
            f"tree of {checkpoint.size} leaves has the root root_hash.",
            "origin": LOG_ORIGIN,
            "key": {
                "seed": LOG_SEED.hex(),
                "public_key": signer.public_key.hex(),
                "key_id": signer.key_id.hex(),
                "verifier_key": signer.verifier_key,
            },
            "tree_size": checkpoint.size,
            "root_hash": encode_base64(checkpoint.root),
            "text": checkpoint.body(),
            "signature": _signature(note),
            "note": note,
        }
    )


# tlog-cosignature.json -------------------------------------------------------------------------


def cosignature_line() -> str:
    checkpoint, _ = signed_checkpoint(tree_size())
    return witness_cosigner().cosign(checkpoint.body(), COSIGNED_AT)


def cosigned_note() -> str:
    _, note = signed_checkpoint(tree_size())
    return note + cosignature_line()


def cosignature_json() -> bytes:
    checkpoint, note = signed_checkpoint(tree_size())
    cosigner = witness_cosigner()
    line = cosignature_line()
    (signature,) = parse_note(note + line).signatures[1:]
    return dump(
        {
            "proves": f"The witness {WITNESS_NAME} states that at time {COSIGNED_AT} the "
            "checkpoint of tlog-checkpoint.json was the largest consistent tree of the log it "
            "had seen.",
            "key": {
                "name": WITNESS_NAME,
                "seed": WITNESS_SEED.hex(),
                "public_key": cosigner.public_key.hex(),
                "key_id": cosigner.key_id.hex(),
                "verifier_key": cosigner.verifier_key,
            },
            "timestamp": COSIGNED_AT,
            "checkpoint": checkpoint.body(),
            "message": cosigned_message(checkpoint.body(), COSIGNED_AT).decode("utf-8"),
            "signature": encode_base64(signature.key_id + signature.signature),
            "line": line,
            "note": note + line,
        }
    )


# tlog-tiles.json -------------------------------------------------------------------------------


def tiles_json() -> bytes:
    size = tree_size()
    assert size < TILE_WIDTH  # one partial tile, and one partial bundle
    data, hashes = leaf_bytes(), leaf_hashes()
    bundle = b"".join(len(leaf).to_bytes(2, "big") + leaf for leaf in data)
    root = root_hash(stored_hashes(hashes), size)
    assert root is not None
    return dump(
        {
            "proves": "The entry bundle holds each leaf's data; hashed, they are the level-0 "
            "tile, whose hashes give the root of tlog-checkpoint.json.",
            "tree_size": size,
            "root_hash": encode_base64(root),
            "leaves": [
                {
                    "index": index,
                    "session_id": session_id,
                    "seq": seq,
                    "entry_hash": entry_hash,
                    "data": leaf.decode("utf-8"),
                    "hash": encode_base64(digest),
                }
                for index, ((session_id, seq, entry_hash), leaf, digest) in enumerate(
                    zip(leaves(), data, hashes, strict=True)
                )
            ],
            "tile": {"path": Tile(0, 0, size).path(), "data": encode_base64(b"".join(hashes))},
            "entries": {"path": Tile(None, 0, size).path(), "data": encode_base64(bundle)},
        }
    )


# tlog-inclusion.json ---------------------------------------------------------------------------


def inclusion_json() -> bytes:
    size, hashes = tree_size(), leaf_hashes()
    read = stored_hashes(hashes)
    root = root_hash(read, size)
    assert root is not None
    return dump(
        {
            "proves": "Each entry is the leaf at its index in the tree of "
            "tlog-checkpoint.json: its inclusion path leads from its leaf hash to the root.",
            "tree_size": size,
            "root_hash": encode_base64(root),
            "checkpoint": cosigned_note(),
            "proofs": [
                {
                    "session_id": session_id,
                    "seq": seq,
                    "index": index,
                    "leaf_hash": encode_base64(hashes[index]),
                    "inclusion": [encode_base64(h) for h in inclusion_proof(read, index, size)],
                }
                for index, (session_id, seq, _) in enumerate(leaves())
            ],
        }
    )


# tlog-consistency.json -------------------------------------------------------------------------


def add_checkpoint() -> str:
    """The request a log makes of a witness that last cosigned the earlier checkpoint."""
    proof = consistency_proof(stored_hashes(leaf_hashes()), earlier_size(), tree_size())
    _, note = signed_checkpoint(tree_size())
    return add_checkpoint_body(earlier_size(), proof, note)


def consistency_json() -> bytes:
    old, old_note = signed_checkpoint(earlier_size())
    new, new_note = signed_checkpoint(tree_size())
    proof = consistency_proof(stored_hashes(leaf_hashes()), old.size, new.size)
    witness = Witness([witness_cosigner()], log_verifiers([log_signer().verifier_key]))
    # The witness's own answer, from the record it kept of the earlier checkpoint.
    earlier = witness.add_checkpoint(add_checkpoint_body(0, [], old_note), {}, COSIGNED_AT)
    assert earlier.record is not None
    answer = witness.add_checkpoint(add_checkpoint(), {LOG_ORIGIN: earlier.record}, COSIGNED_AT)
    assert (answer.status, answer.body) == (200, cosignature_line())
    return dump(
        {
            "proves": f"The tree of {new.size} leaves extends the tree of {old.size}: the "
            "proof leads from the old root to the new one.",
            "old": {
                "tree_size": old.size,
                "root_hash": encode_base64(old.root),
                "note": old_note,
            },
            "new": {
                "tree_size": new.size,
                "root_hash": encode_base64(new.root),
                "note": new_note,
            },
            "proof": [encode_base64(h) for h in proof],
            "add_checkpoint": add_checkpoint(),
            "answer": answer.body,
        }
    )


#: The files, by name, for :data:`tests.support.vectors.FILES`.
TLOG_FILES: dict[str, Callable[[], bytes]] = {
    "tlog-checkpoint.json": checkpoint_json,
    "tlog-cosignature.json": cosignature_json,
    "tlog-tiles.json": tiles_json,
    "tlog-inclusion.json": inclusion_json,
    "tlog-consistency.json": consistency_json,
}
