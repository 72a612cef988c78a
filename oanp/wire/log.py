"""The session log of docs/protocol.md §12: entries, their hash chain, and the session digest.

An entry is ``{"seq", "received_at", "envelope", "prev_hash", "entry_hash"}``; ``entry_hash`` is
``sha256:`` + hex SHA-256 of the JCS bytes of the entry without ``entry_hash``. The chain starts
from :data:`~oanp.wire.canonical.ZERO_HASH`, so dropping, reordering or editing any entry changes
every hash after it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from oanp.wire.canonical import ZERO_HASH, JsonObject, JsonValue, canonical_bytes, tagged_sha256
from oanp.wire.envelope import format_timestamp

ENTRY_FIELDS = frozenset({"seq", "received_at", "envelope", "prev_hash", "entry_hash"})


@dataclass(frozen=True, slots=True)
class Entry:
    """One link of the chain. ``envelope`` is the normalized envelope JSON."""

    seq: int
    received_at: str
    envelope: JsonObject
    prev_hash: str
    entry_hash: str

    def as_json(self) -> JsonObject:
        return {
            "seq": self.seq,
            "received_at": self.received_at,
            "envelope": self.envelope,
            "prev_hash": self.prev_hash,
            "entry_hash": self.entry_hash,
        }

    @property
    def type(self) -> str:
        kind = self.envelope["type"]
        assert isinstance(kind, str)
        return kind


def _hashed_part(seq: int, received_at: str, envelope: JsonValue, prev_hash: str) -> JsonObject:
    return {"seq": seq, "received_at": received_at, "envelope": envelope, "prev_hash": prev_hash}


def entry_hash_of(entry: Mapping[str, JsonValue]) -> str:
    """Recompute an entry's hash from its other fields (whatever ``entry_hash`` it claims)."""
    seq, received_at, prev_hash = entry["seq"], entry["received_at"], entry["prev_hash"]
    assert isinstance(seq, int)
    assert isinstance(received_at, str)
    assert isinstance(prev_hash, str)
    return tagged_sha256(
        canonical_bytes(_hashed_part(seq, received_at, entry["envelope"], prev_hash))
    )


def make_entry(*, seq: int, received_at: datetime, envelope: JsonObject, prev_hash: str) -> Entry:
    """Chain one envelope after ``prev_hash``. ``received_at`` is the arbiter's clock."""
    stamp = format_timestamp(received_at)
    digest = tagged_sha256(canonical_bytes(_hashed_part(seq, stamp, envelope, prev_hash)))
    return Entry(seq, stamp, envelope, prev_hash, digest)


@dataclass(frozen=True, slots=True)
class Head:
    """Where the chain ends: the next entry gets ``seq + 1`` and ``prev_hash = entry_hash``."""

    seq: int = 0
    entry_hash: str = ZERO_HASH

    def after(self, entry: Entry) -> Head:
        return Head(entry.seq, entry.entry_hash)


@dataclass(frozen=True, slots=True)
class ChainBreak:
    """Where and why a chain fails to recompute."""

    seq: int | None
    position: int
    reason: str

    def describe(self) -> str:
        where = f"entry {self.seq}" if self.seq is not None else f"entry #{self.position + 1}"
        return f"{where}: {self.reason}"


@dataclass(frozen=True, slots=True)
class ChainWalk:
    """What one pass over a log finds: where the chain breaks, and each entry's JCS bytes
    (the data of its Merkle leaf in an audit bundle; ``None`` where it has none)."""

    breaks: list[ChainBreak]
    entry_bytes: list[bytes | None]


def walk_chain(entries: Sequence[Mapping[str, JsonValue]]) -> ChainWalk:
    """Check every link of the chain, canonicalizing each entry once.

    Every place the chain fails is a break: shape, seq order, ``prev_hash`` links,
    ``entry_hash``. An entry's JCS bytes come from those of its hashed part: ``entry_hash``
    sorts before every other member, so the whole entry's JCS is the hashed part's with that
    one member put in front.
    """
    breaks: list[ChainBreak] = []
    entry_bytes: list[bytes | None] = []
    expected_prev = ZERO_HASH
    for position, entry in enumerate(entries):
        seq = entry.get("seq") if isinstance(entry, Mapping) else None
        seq_no = seq if isinstance(seq, int) and not isinstance(seq, bool) else None
        problem = _shape_problem(entry)
        hashed = None
        if problem is None:
            assert seq_no is not None  # the shape says so
            try:
                hashed = canonical_bytes(
                    _hashed_part(
                        seq_no,
                        str(entry["received_at"]),
                        entry["envelope"],
                        str(entry["prev_hash"]),
                    )
                )
            except ValueError:
                problem = "envelope cannot be canonicalized"
        if hashed is None:
            breaks.append(ChainBreak(seq_no, position, str(problem)))
            entry_bytes.append(_canonical_or_none(entry))
            expected_prev = str(entry.get("entry_hash", "")) if isinstance(entry, Mapping) else ""
            continue
        claimed = str(entry["entry_hash"])
        entry_bytes.append(b'{"entry_hash":' + canonical_bytes(claimed) + b"," + hashed[1:])
        if seq_no != position + 1:
            breaks.append(ChainBreak(seq_no, position, f"seq is {seq}, expected {position + 1}"))
        if entry["prev_hash"] != expected_prev:
            breaks.append(
                ChainBreak(seq_no, position, "prev_hash does not link to the entry before")
            )
        if claimed != tagged_sha256(hashed):
            breaks.append(ChainBreak(seq_no, position, "entry_hash does not match its contents"))
        expected_prev = claimed
    return ChainWalk(breaks, entry_bytes)


def chain_breaks(entries: Sequence[Mapping[str, JsonValue]]) -> list[ChainBreak]:
    """Every place the chain fails: shape, seq order, ``prev_hash`` links, ``entry_hash``."""
    return walk_chain(entries).breaks


def _canonical_or_none(entry: object) -> bytes | None:
    if not isinstance(entry, dict):
        return None
    try:
        return canonical_bytes(entry)
    except ValueError:
        return None


def _shape_problem(entry: object) -> str | None:
    if not isinstance(entry, Mapping) or set(entry) != ENTRY_FIELDS:
        return (
            "is not an entry object with exactly seq, received_at, envelope, prev_hash, entry_hash"
        )
    seq = entry["seq"]
    if isinstance(seq, bool) or not isinstance(seq, int):
        return "seq is not an integer"
    if not all(isinstance(entry[k], str) for k in ("received_at", "prev_hash", "entry_hash")):
        return "received_at, prev_hash and entry_hash must be strings"
    if not isinstance(entry["envelope"], Mapping):
        return "envelope is not an object"
    return None


def session_digest(entries: Iterable[Entry]) -> tuple[str, int]:
    """``(entry_hash of the last entry, number of entries)``: what an agreement signs."""
    head = Head()
    for entry in entries:
        head = head.after(entry)
    return head.entry_hash, head.seq
