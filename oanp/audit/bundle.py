"""Audit bundles: one file an outside auditor verifies with no trust in the arbiter.

A bundle holds session logs, the public keys that signed them, a manifest, and a signed
checkpoint: the RFC 6962 Merkle root over every entry of every log, in manifest order. ::

    {"format": "oanp-audit-bundle/0.1",
     "jwks": {"keys": [...]},
     "party_keys": {agent_id: [JWK + registered_at + retired_at, ...]},   (optional)
     "proofs": {...} | null,
     "sessions": [{"session_id", "log": [entry, ...]}],
     "manifest": {"arbiter_id", "created_at", "scope",
                  "sessions": [{"entries", "first_leaf", "head_hash", "outcome", "session_id"}],
                  "tree_size"},
     "checkpoint": {"statement": {"format", "arbiter_id", "tree_size", "root_hash",
                                  "manifest_digest", "issued_at"},
                    "signature": "<detached JWS over JCS(statement)>"},
     "consistency": [{"checkpoint": {...}, "proof": ["<hex>", ...]}]}

Leaf ``i`` is the JCS bytes of one whole entry. A *subset* (:func:`extract`) keeps the original
manifest and checkpoint but only some logs, with an inclusion proof per entry, so it is checked
against the same signed root. A *later* export whose leaves extend an earlier one's carries a
consistency proof from the earlier checkpoint, so the earlier export is provably a prefix.

Members may come in any order, but :class:`BundleWriter` writes them in the order above, one
session per line and the manifest in JCS form: what comes first is what a reader needs before
the logs, and what comes after can only be known once they are all read. So a bundle of a
million entries is written and verified (:func:`verify_bundle_stream`) one session at a time.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from io import BytesIO
from typing import IO, Any

from oanp.audit import merkle
from oanp.wire.canonical import (
    JsonObject,
    JsonValue,
    canonical_bytes,
    hash_canonical,
    json_value,
    read_json,
)
from oanp.wire.envelope import format_timestamp
from oanp.wire.log import ChainWalk, walk_chain
from oanp.wire.signing import CHECKPOINT_TYP, SigningKey

BUNDLE_FORMAT = "oanp-audit-bundle/0.1"
CHECKPOINT_FORMAT = "oanp-checkpoint/0.1"
#: How deeply a bundle's values may nest: logs hold envelopes, which hold items and terms.
BUNDLE_DEPTH = 200


def hex_root(digest: bytes) -> str:
    return "sha256:" + digest.hex()


def root_bytes(statement: Mapping[str, Any]) -> bytes:
    return bytes.fromhex(str(statement["root_hash"]).removeprefix("sha256:"))


def _leaves_of(walk: ChainWalk, position: str) -> list[bytes]:
    """The Merkle leaves of one walked log; ``ValueError`` for an entry with no JCS form."""
    leaves = []
    for n, data in enumerate(walk.entry_bytes):
        if data is None:
            raise ValueError(f"{position} entry #{n + 1} has no canonical form")
        leaves.append(merkle.leaf_hash(data))
    return leaves


def leaf_hashes(logs: Iterable[Sequence[Mapping[str, JsonValue]]]) -> list[bytes]:
    """The Merkle leaves of a bundle: every entry of every log, in order."""
    return [leaf for log in logs for leaf in _leaves_of(walk_chain(log), "a log's")]


def _outcome(last_envelope: Mapping[str, JsonValue]) -> str | None:
    if last_envelope.get("type") == "session.agree":
        return "agreed"
    payload = last_envelope.get("payload")
    if last_envelope.get("type") == "session.close" and isinstance(payload, dict):
        reason = payload.get("reason")
        return reason if isinstance(reason, str) else None
    return None


def _statement(
    *, arbiter_id: str, tree_size: int, root: bytes, manifest_digest: str, issued_at: datetime
) -> JsonObject:
    return {
        "format": CHECKPOINT_FORMAT,
        "arbiter_id": arbiter_id,
        "tree_size": tree_size,
        "root_hash": hex_root(root),
        "manifest_digest": manifest_digest,
        "issued_at": format_timestamp(issued_at),
    }


def sign_checkpoint(
    *,
    key: SigningKey,
    arbiter_id: str,
    leaves: Sequence[bytes],
    manifest: JsonObject,
    issued_at: datetime,
) -> JsonObject:
    """A signed statement that the tree of ``leaves`` has this root, for this manifest."""
    statement = _statement(
        arbiter_id=arbiter_id,
        tree_size=len(leaves),
        root=merkle.root(leaves),
        manifest_digest=hash_canonical(manifest),
        issued_at=issued_at,
    )
    return {"statement": statement, "signature": _sign(key, statement)}


def _sign(key: SigningKey, statement: JsonObject) -> str:
    return key.sign_detached(canonical_bytes(statement), typ=CHECKPOINT_TYP)


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


# Writing -------------------------------------------------------------------------------------


class BundleWriter:
    """Writes a bundle to ``out`` as its logs arrive, holding none of them.

    Each :meth:`add` writes one session's line (its entries in JCS, the bytes its leaves hash)
    and keeps only the tree's O(log n) subtree roots and the session's manifest row, spooled to
    a temporary file. :meth:`finish` writes the manifest, the signed checkpoint and the
    consistency proofs. ``prefixes`` are checkpoint statements of earlier exports this one may
    extend: the writer notes its root at each one's size, and keeps its leaves (32 bytes each)
    to prove the extension.
    """

    def __init__(
        self,
        out: IO[bytes],
        *,
        jwks: Mapping[str, Any],
        key: SigningKey,
        arbiter_id: str,
        prefixes: Sequence[Mapping[str, Any]] = (),
        party_keys: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    ) -> None:
        self._out, self._key, self._arbiter_id = out, key, arbiter_id
        self._tree = merkle.TreeBuilder()
        self._leaves = merkle.PackedHashes() if prefixes else None
        self._roots_at: dict[int, bytes | None] = {
            int(p["tree_size"]): None for p in prefixes if isinstance(p.get("tree_size"), int)
        }
        self._note_root()
        # Closed by finish(); an abandoned writer's file goes with it when it is collected.
        self._rows: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        self._sessions = 0
        # The parties' keys (§17) come before the logs, whose signatures a reader checks as
        # it reads them.
        parties = (
            b""
            if party_keys is None
            else b',"party_keys":%s'
            % _json_bytes(json_value({a: [dict(k) for k in ks] for a, ks in party_keys.items()}))
        )
        out.write(
            b'{"format":%s,"jwks":%s%s,"proofs":null,"sessions":['
            % (_json_bytes(BUNDLE_FORMAT), _json_bytes(json_value(dict(jwks))), parties)
        )

    def _note_root(self) -> None:
        if self._tree.size in self._roots_at:
            self._roots_at[self._tree.size] = self._tree.root()

    def add(self, log: Sequence[Mapping[str, JsonValue]]) -> None:
        """Write one session's whole log."""
        entries = [entry_json(e) for e in log]
        if not entries:
            raise ValueError("a bundled log is never empty")
        first, last = entries[0]["envelope"], entries[-1]["envelope"]
        if not (isinstance(first, dict) and isinstance(last, dict)):
            raise ValueError("a bundled entry holds an envelope object")
        walk = walk_chain(entries)
        leaves = _leaves_of(walk, f"session {first.get('session_id')!r}")
        row: JsonObject = {
            "session_id": first.get("session_id"),
            "first_leaf": self._tree.size,
            "entries": len(entries),
            "head_hash": entries[-1]["entry_hash"],
            "outcome": _outcome(last),
        }
        for leaf in leaves:
            self._tree.append(leaf)
            if self._leaves is not None:
                self._leaves.append(leaf)
            self._note_root()
        separator = b"," if self._sessions else b""
        self._out.write(
            b'%s\n{"session_id":%s,"log":[%s]}'
            % (separator, _json_bytes(row["session_id"]), b",".join(walk.entry_bytes))  # type: ignore[arg-type]
        )
        self._rows.write(separator + canonical_bytes(row))
        self._sessions += 1

    def extends(self, statement: Mapping[str, Any]) -> bool:
        """Whether the tree an earlier checkpoint's ``statement`` signed is a prefix of the
        leaves written so far (only for the ``prefixes`` given at the start)."""
        noted = self._roots_at.get(statement.get("tree_size"))  # type: ignore[arg-type]
        return noted is not None and hex_root(noted) == statement.get("root_hash")

    def finish(
        self,
        *,
        created_at: datetime,
        scope: JsonObject | None = None,
        previous: Sequence[Mapping[str, Any]] = (),
    ) -> JsonObject:
        """Write the manifest, the checkpoint and a consistency proof from each ``previous``
        checkpoint (one of ``prefixes``); the signed checkpoint. ``ValueError`` if one of
        them is not a prefix."""
        consistency: list[JsonValue] = []
        for earlier in previous:
            size = earlier["statement"]["tree_size"]
            if self._leaves is None or not self.extends(earlier["statement"]):
                raise ValueError("a previous checkpoint is not a prefix of this export")
            proof = merkle.consistency_proof(self._leaves, int(size))
            consistency.append(
                {"checkpoint": json_value(dict(earlier)), "proof": [p.hex() for p in proof]}
            )
        digest = self._write_manifest(created_at, scope or {})
        statement = _statement(
            arbiter_id=self._arbiter_id,
            tree_size=self._tree.size,
            root=self._tree.root(),
            manifest_digest=digest,
            issued_at=created_at,
        )
        checkpoint: JsonObject = {"statement": statement, "signature": _sign(self._key, statement)}
        self._out.write(
            b',"checkpoint":%s,"consistency":%s}\n'
            % (_json_bytes(checkpoint), _json_bytes(consistency))
        )
        return checkpoint

    def _write_manifest(self, created_at: datetime, scope: JsonObject) -> str:
        """The manifest in JCS form (its members' names are in JCS order as written), hashed
        as it is written: its rows are never all in memory."""
        digest = Digest()

        def write(data: bytes) -> None:
            digest.update(data)
            self._out.write(data)

        self._out.write(b'\n],"manifest":')
        write(
            b'{"arbiter_id":%s,"created_at":%s,"scope":%s,"sessions":['
            % (
                canonical_bytes(self._arbiter_id),
                canonical_bytes(format_timestamp(created_at)),
                canonical_bytes(json_value(scope)),
            )
        )
        self._rows.seek(0)
        while chunk := self._rows.read(1 << 20):
            write(chunk)
        self._rows.close()
        write(b'],"tree_size":%d}' % self._tree.size)
        return digest.tagged()


class Digest:
    """SHA-256 fed piece by piece, as :func:`oanp.wire.canonical.tagged_sha256` spells it."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()

    def update(self, data: bytes) -> None:
        self._hash.update(data)

    def tagged(self) -> str:
        return "sha256:" + self._hash.hexdigest()


def build_bundle(
    *,
    logs: Sequence[Sequence[Mapping[str, JsonValue]]],
    jwks: Mapping[str, Any],
    key: SigningKey,
    arbiter_id: str,
    created_at: datetime,
    scope: JsonObject | None = None,
    previous: Sequence[Mapping[str, Any]] = (),
    party_keys: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> JsonObject:
    """Bundle whole session logs in memory, signing a checkpoint with ``key``: the document
    :class:`BundleWriter` writes, read back.

    ``previous`` are checkpoints of earlier exports whose leaves this one extends; a
    consistency proof from each is included. Raises ``ValueError`` if one is not a prefix.
    """
    out = BytesIO()
    writer = BundleWriter(
        out,
        jwks=jwks,
        key=key,
        arbiter_id=arbiter_id,
        prefixes=[p["statement"] for p in previous],
        party_keys=party_keys,
    )
    for log in logs:
        writer.add(log)
    writer.finish(created_at=created_at, scope=scope, previous=previous)
    bundle = json_value(read_json(out.getvalue()), max_depth=BUNDLE_DEPTH)
    assert isinstance(bundle, dict)
    return bundle


def entry_json(entry: Mapping[str, JsonValue]) -> JsonObject:
    value = json_value(dict(entry) if not isinstance(entry, dict) else entry)
    assert isinstance(value, dict)
    return value


def extract(bundle: Mapping[str, Any], session_ids: Iterable[str]) -> JsonObject:
    """A subset of ``bundle``: only the named sessions, each entry with an inclusion proof
    against the original signed checkpoint."""
    wanted = set(session_ids)
    logs = [s["log"] for s in bundle["sessions"]]
    leaves = leaf_hashes(logs)
    kept: list[JsonValue] = []
    proofs: dict[str, JsonValue] = {}
    for listed, session in zip(bundle["manifest"]["sessions"], bundle["sessions"], strict=True):
        if session["session_id"] not in wanted:
            continue
        kept.append(session)
        first = listed["first_leaf"]
        proofs[session["session_id"]] = [
            [p.hex() for p in merkle.inclusion_proof(leaves, first + i)]
            for i in range(len(session["log"]))
        ]
    missing = wanted - set(proofs)
    if missing:
        raise KeyError(f"not in the bundle: {', '.join(sorted(missing))}")
    # The keys and the proofs before the sessions, as a streaming reader needs them.
    subset: JsonObject = {
        "format": bundle["format"],
        "jwks": bundle["jwks"],
        **({"party_keys": bundle["party_keys"]} if "party_keys" in bundle else {}),
        "proofs": {"tree_size": len(leaves), "inclusion": proofs},
        "sessions": kept,
    }
    subset.update({k: v for k, v in bundle.items() if k not in {*subset, "consistency"}})
    subset["consistency"] = []
    return subset
