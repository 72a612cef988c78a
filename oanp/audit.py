"""Audit bundles: one file an outside auditor verifies with no trust in the arbiter.

A bundle holds session logs, the public keys that signed them, a manifest, and a signed
checkpoint: the RFC 6962 Merkle root over every entry of every log, in manifest order. ::

    {"format": "oanp-audit-bundle/0.1",
     "manifest": {"arbiter_id", "created_at", "scope", "tree_size",
                  "sessions": [{"session_id", "first_leaf", "entries", "head_hash", "outcome"}]},
     "jwks": {"keys": [...]},
     "sessions": [{"session_id", "log": [entry, ...]}],
     "checkpoint": {"statement": {"format", "arbiter_id", "tree_size", "root_hash",
                                  "manifest_digest", "issued_at"},
                    "signature": "<detached JWS over JCS(statement)>"},
     "proofs": {...} | null,
     "consistency": [{"checkpoint": {...}, "proof": ["<hex>", ...]}]}

Leaf ``i`` is the JCS bytes of one whole entry. A *subset* (:func:`extract`) keeps the original
manifest and checkpoint but only some logs, with an inclusion proof per entry, so it is checked
against the same signed root. A *later* export whose leaves extend an earlier one's carries a
consistency proof from the earlier checkpoint, so the earlier export is provably a prefix.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from oanp import merkle
from oanp.canonical import JsonObject, JsonValue, canonical_bytes, hash_canonical, json_value
from oanp.envelope import format_timestamp
from oanp.errors import VerificationError
from oanp.invariants import LogAudit, Status, audit_log
from oanp.log import chain_breaks
from oanp.profiles import PROFILES, Profile
from oanp.signing import CHECKPOINT_TYP, ArbiterKey, verify_detached

BUNDLE_FORMAT = "oanp-audit-bundle/0.1"
CHECKPOINT_FORMAT = "oanp-checkpoint/0.1"


def _hex_root(digest: bytes) -> str:
    return "sha256:" + digest.hex()


def leaf_hashes(logs: Iterable[Sequence[Mapping[str, JsonValue]]]) -> list[bytes]:
    """The Merkle leaves of a bundle: every entry of every log, in order."""
    return [merkle.leaf_hash(canonical_bytes(dict(e))) for log in logs for e in log]


def sign_checkpoint(
    *,
    key: ArbiterKey,
    arbiter_id: str,
    leaves: Sequence[bytes],
    manifest: JsonObject,
    issued_at: datetime,
) -> JsonObject:
    """A signed statement that the tree of ``leaves`` has this root, for this manifest."""
    statement: JsonObject = {
        "format": CHECKPOINT_FORMAT,
        "arbiter_id": arbiter_id,
        "tree_size": len(leaves),
        "root_hash": _hex_root(merkle.root(leaves)),
        "manifest_digest": hash_canonical(manifest),
        "issued_at": format_timestamp(issued_at),
    }
    signature = key.sign_detached(canonical_bytes(statement), typ=CHECKPOINT_TYP)
    return {"statement": statement, "signature": signature}


def is_prefix(statement: Mapping[str, Any], leaves: Sequence[bytes]) -> bool:
    """Whether the tree a checkpoint's ``statement`` signed is a prefix of ``leaves``: what
    makes a later export extend an earlier one."""
    size = int(statement["tree_size"])
    return size <= len(leaves) and _hex_root(merkle.root(leaves[:size])) == statement["root_hash"]


def build_bundle(
    *,
    logs: Sequence[Sequence[Mapping[str, JsonValue]]],
    jwks: Mapping[str, Any],
    key: ArbiterKey,
    arbiter_id: str,
    created_at: datetime,
    scope: JsonObject | None = None,
    previous: Sequence[Mapping[str, Any]] = (),
) -> JsonObject:
    """Bundle whole session logs, signing a checkpoint with ``key``.

    ``previous`` are checkpoints of earlier exports whose leaves this one extends; a
    consistency proof from each is included. Raises ``ValueError`` if one is not a prefix.
    """
    normalized = [[_entry_json(e) for e in log] for log in logs]
    leaves = leaf_hashes(normalized)
    sessions: list[JsonObject] = []
    first = 0
    for log in normalized:
        envelope = log[0]["envelope"] if log else None
        assert isinstance(envelope, dict), "a bundled log is never empty"
        last = log[-1]["envelope"]
        assert isinstance(last, dict)
        sessions.append(
            {
                "session_id": envelope["session_id"],
                "first_leaf": first,
                "entries": len(log),
                "head_hash": log[-1]["entry_hash"],
                "outcome": _outcome(last),
            }
        )
        first += len(log)
    manifest: JsonObject = {
        "arbiter_id": arbiter_id,
        "created_at": format_timestamp(created_at),
        "scope": scope or {},
        "tree_size": len(leaves),
        "sessions": list[JsonValue](sessions),
    }
    consistency: list[JsonValue] = []
    for checkpoint in previous:
        if not is_prefix(checkpoint["statement"], leaves):
            raise ValueError("a previous checkpoint is not a prefix of this export")
        proof = merkle.consistency_proof(leaves, int(checkpoint["statement"]["tree_size"]))
        consistency.append(
            {"checkpoint": json_value(checkpoint), "proof": [p.hex() for p in proof]}
        )
    return {
        "format": BUNDLE_FORMAT,
        "manifest": manifest,
        "jwks": json_value(jwks),
        "sessions": [
            {"session_id": s["session_id"], "log": list[JsonValue](log)}
            for s, log in zip(sessions, normalized, strict=True)
        ],
        "checkpoint": sign_checkpoint(
            key=key, arbiter_id=arbiter_id, leaves=leaves, manifest=manifest, issued_at=created_at
        ),
        "proofs": None,
        "consistency": consistency,
    }


def _entry_json(entry: Mapping[str, JsonValue]) -> JsonObject:
    value = json_value(entry)
    assert isinstance(value, dict)
    return value


def _outcome(last_envelope: Mapping[str, JsonValue]) -> str | None:
    if last_envelope.get("type") == "session.agree":
        return "agreed"
    payload = last_envelope.get("payload")
    if last_envelope.get("type") == "session.close" and isinstance(payload, dict):
        reason = payload.get("reason")
        return reason if isinstance(reason, str) else None
    return None


def extract(bundle: Mapping[str, Any], session_ids: Iterable[str]) -> JsonObject:
    """A subset of ``bundle``: only the named sessions, each entry with an inclusion proof
    against the original signed checkpoint."""
    wanted = set(session_ids)
    logs = [s["log"] for s in bundle["sessions"]]
    leaves = leaf_hashes(logs)
    kept, proofs = [], {}
    for listed, session in zip(bundle["manifest"]["sessions"], bundle["sessions"], strict=True):
        if session["session_id"] not in wanted:
            continue
        kept.append(session)
        first = listed["first_leaf"]
        proofs[session["session_id"]] = [
            [p.hex() for p in merkle.inclusion_proof(leaves, first + i)]
            for i in range(len(session["log"]))
        ]
    missing = wanted - {s["session_id"] for s in kept}
    if missing:
        raise KeyError(f"not in the bundle: {', '.join(sorted(missing))}")
    subset = dict(bundle)
    subset["sessions"] = kept
    subset["proofs"] = {"tree_size": len(leaves), "inclusion": proofs}
    subset["consistency"] = []
    return subset


# Verification --------------------------------------------------------------------------------


@dataclass(slots=True)
class Check:
    """One line of a verification report."""

    name: str
    ok: bool
    detail: str = ""

    def line(self) -> str:
        mark = "ok  " if self.ok else "FAIL"
        return f"{mark} {self.name}" + (f": {self.detail}" if self.detail else "")


@dataclass(slots=True)
class Report:
    checks: list[Check] = field(default_factory=list)
    audits: list[LogAudit] = field(default_factory=list)
    entries_total: int = 0
    entries_valid: int = 0

    def add(self, name: str, ok: bool, detail: str = "") -> bool:
        self.checks.append(Check(name, ok, detail))
        return ok

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def agreements(self) -> tuple[int, int]:
        signed = [a for a in self.audits if a.agreement_valid is not None]
        return sum(1 for a in signed if a.agreement_valid), len(signed)

    def summary(self) -> str:
        valid, total = self.agreements
        passing = sum(1 for a in self.audits if a.ok)
        return (
            f"{self.entries_valid}/{self.entries_total} entries valid, "
            f"{valid}/{total} agreements valid, "
            f"{passing}/{len(self.audits)} sessions pass I1-I7"
        )


def verify_log(
    entries: Sequence[Mapping[str, JsonValue]],
    jwks: Mapping[str, Any] | None,
    *,
    report: Report | None = None,
    profiles: Mapping[str, Profile] = PROFILES,
) -> Report:
    """Verify one session log: every entry's hash and link, then I1–I7."""
    report = report or Report()
    normalized = [_entry_json(e) if isinstance(e, Mapping) else e for e in entries]
    broken = chain_breaks(normalized)
    audit = audit_log(normalized, jwks, profiles=profiles)
    label = f"session {audit.session_id}" if audit.session_id else "session"
    bad_positions = {b.position for b in broken}
    report.entries_total += len(normalized)
    report.entries_valid += len(normalized) - len(bad_positions)
    report.add(
        f"{label}: hash chain",
        not broken,
        f"{len(normalized)} entries" if not broken else "; ".join(b.describe() for b in broken),
    )
    for result in audit.results.values():
        detail = "; ".join(result.problems or result.notes)
        report.add(
            f"{label}: {result.invariant}",
            result.status is not Status.FAIL,
            f"{result.status.value}" + (f" ({detail})" if detail else ""),
        )
    report.audits.append(audit)
    return report


def verify_bundle(
    bundle: Mapping[str, Any],
    *,
    jwks: Mapping[str, Any] | None = None,
    since: Mapping[str, Any] | None = None,
    profiles: Mapping[str, Profile] = PROFILES,
) -> Report:
    """Verify a whole bundle or a subset; ``jwks`` overrides the bundled keys, ``since`` is an
    earlier bundle this one must extend. Never raises on a malformed bundle: it reports."""
    report = Report()
    try:
        _verify_bundle(report, bundle, jwks, since, profiles)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        report.add("bundle structure", False, f"{type(exc).__name__}: {exc}")
    return report


def _verify_bundle(
    report: Report,
    bundle: Mapping[str, Any],
    jwks_override: Mapping[str, Any] | None,
    since: Mapping[str, Any] | None,
    profiles: Mapping[str, Profile],
) -> None:
    if not report.add("format", bundle.get("format") == BUNDLE_FORMAT, str(bundle.get("format"))):
        return
    keys = jwks_override if jwks_override is not None else bundle["jwks"]
    manifest, sessions = bundle["manifest"], bundle["sessions"]
    statement = _verify_checkpoint(report, bundle["checkpoint"], keys, "checkpoint")
    if statement is None:
        return
    report.add(
        "manifest digest",
        statement["manifest_digest"] == hash_canonical(json_value(manifest)),
        "the manifest is the one the checkpoint signed",
    )
    listed = {s["session_id"]: s for s in manifest["sessions"]}
    for session in sessions:
        log = session["log"]
        entry = listed.get(session["session_id"])
        if entry is None:
            report.add(f"session {session['session_id']}: listed", False, "not in the manifest")
            continue
        report.add(
            f"session {session['session_id']}: complete",
            len(log) == entry["entries"]
            and bool(log)
            and log[-1].get("entry_hash") == entry["head_hash"],
            f"{len(log)} of {entry['entries']} entries, head as listed",
        )
        verify_log(log, keys, report=report, profiles=profiles)
    leaves: list[bytes] | None = None
    if bundle.get("proofs"):
        _verify_inclusion(report, bundle["proofs"], sessions, listed, statement)
    else:
        ordered = [s["session_id"] for s in sessions] == list(listed)
        leaves = leaf_hashes(s["log"] for s in sessions)
        report.add(
            "merkle root",
            ordered
            and len(leaves) == statement["tree_size"] == manifest["tree_size"]
            and _hex_root(merkle.root(leaves)) == statement["root_hash"],
            f"{len(leaves)} leaves against the signed root",
        )
    for n, item in enumerate(bundle.get("consistency") or []):
        _verify_consistency(report, item, statement, keys, f"consistency #{n + 1}")
    if since is not None:
        _verify_since(report, since, leaves, keys)


def _verify_checkpoint(
    report: Report, checkpoint: Mapping[str, Any], keys: Mapping[str, Any], name: str
) -> Mapping[str, Any] | None:
    statement = checkpoint["statement"]
    try:
        signed = verify_detached(
            checkpoint["signature"],
            canonical_bytes(json_value(statement)),
            keys,
            typ=CHECKPOINT_TYP,
        )
    except VerificationError as exc:
        report.add(f"{name} signature", False, f"{exc.code}: {exc.detail}")
        return None
    report.add(f"{name} signature", True, f"{signed.alg}, kid {signed.kid}")
    if statement.get("format") != CHECKPOINT_FORMAT:
        report.add(f"{name} format", False, str(statement.get("format")))
        return None
    return statement  # type: ignore[no-any-return]


def _verify_inclusion(
    report: Report,
    proofs: Mapping[str, Any],
    sessions: Sequence[Mapping[str, Any]],
    listed: Mapping[str, Mapping[str, Any]],
    statement: Mapping[str, Any],
) -> None:
    size = statement["tree_size"]
    root = bytes.fromhex(statement["root_hash"].removeprefix("sha256:"))
    failures = 0
    total = 0
    for session in sessions:
        first = listed[session["session_id"]]["first_leaf"]
        paths = proofs["inclusion"].get(session["session_id"], [])
        for i, entry in enumerate(session["log"]):
            total += 1
            if not isinstance(entry, Mapping):
                # Not an entry, so not a leaf of the signed tree (and _entry_json would assert).
                failures += 1
                continue
            leaf = merkle.leaf_hash(canonical_bytes(_entry_json(entry)))
            path = [bytes.fromhex(p) for p in paths[i]] if i < len(paths) else []
            if not merkle.verify_inclusion(leaf, first + i, size, path, root):
                failures += 1
    report.add(
        "inclusion proofs",
        failures == 0 and proofs.get("tree_size") == size,
        f"{total - failures}/{total} entries proven in the signed tree of {size}",
    )


def _verify_consistency(
    report: Report,
    item: Mapping[str, Any],
    statement: Mapping[str, Any],
    keys: Mapping[str, Any],
    name: str,
) -> None:
    old = _verify_checkpoint(report, item["checkpoint"], keys, f"{name} earlier checkpoint")
    if old is None:
        return
    proof = [bytes.fromhex(p) for p in item["proof"]]
    report.add(
        name,
        merkle.verify_consistency(
            old["tree_size"],
            statement["tree_size"],
            bytes.fromhex(old["root_hash"].removeprefix("sha256:")),
            bytes.fromhex(statement["root_hash"].removeprefix("sha256:")),
            proof,
        ),
        f"tree of {old['tree_size']} is a prefix of this tree of {statement['tree_size']}",
    )


def _verify_since(
    report: Report,
    earlier: Mapping[str, Any],
    leaves: Sequence[bytes] | None,
    keys: Mapping[str, Any],
) -> None:
    """The earlier export's signed tree must be a prefix of this one's leaves."""
    old = _verify_checkpoint(report, earlier["checkpoint"], keys, "earlier export checkpoint")
    if old is None:
        return
    if leaves is None:
        report.add(
            "earlier export is a prefix", False, "a subset cannot be compared; use the whole export"
        )
        return
    size = old["tree_size"]
    report.add(
        "earlier export is a prefix",
        is_prefix(old, leaves),
        f"its {size} entries are the first {size} of these {len(leaves)}",
    )
