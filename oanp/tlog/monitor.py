"""What a log's client decides of the checkpoints it fetches (c2sp.org/tlog-checkpoint,
c2sp.org/tlog-cosignature): how a checkpoint compares with the last one it verified of the same
log, which of the witnesses it trusts cosigned it, and the state document that keeps, per
origin, the last checkpoint it verified.

A client that keeps the last checkpoint it saw can tell the log's history was rewritten: two
checkpoints of one origin and size with different roots, both signed by the log, are a fork,
proof anyone can check with the log's verifier key; a smaller tree than one already seen is a
rollback; a larger one must extend the kept tree, which an RFC 6962 consistency proof shows.

Pure, as the rest of the package: the checkpoints, notes and proofs are handed in; the client
that fetches them and keeps the state file is :mod:`oanp.net.log_audit`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from oanp.audit.merkle import verify_consistency
from oanp.tlog.checkpoint import Checkpoint
from oanp.tlog.note import Note, Verifier, check_note_text

#: The ``format`` of a state document.
STATE_FORMAT = "oanp-log-state/1"


class Relation(Enum):
    """How a checkpoint just fetched stands to the one kept of the same log."""

    #: Nothing is kept of this log: the checkpoint is trusted on its signatures alone.
    FIRST = "first"
    #: The same size and root: the log has not grown.
    SAME = "same"
    #: A larger tree: it extends the kept one only if a consistency proof says so.
    GROWN = "grown"
    #: The same size with another root: two histories, both signed.
    FORK = "fork"
    #: A smaller tree than one the log already showed.
    ROLLBACK = "rollback"


def compare_checkpoints(kept: Checkpoint | None, served: Checkpoint) -> Relation:
    """How ``served`` stands to ``kept``, the last checkpoint verified of the same origin."""
    if kept is None:
        return Relation.FIRST
    if kept.origin != served.origin:
        raise ValueError(f"checkpoints of two logs: {kept.origin!r} and {served.origin!r}")
    if served.size < kept.size:
        return Relation.ROLLBACK
    if served.size == kept.size:
        return Relation.SAME if served.root == kept.root else Relation.FORK
    return Relation.GROWN


def proves_consistency(kept: Checkpoint, served: Checkpoint, proof: Sequence[bytes]) -> bool:
    """Whether ``proof`` shows the tree of ``kept`` is a prefix of the tree of ``served``
    (RFC 6962 section 2.1.2; equal sizes need equal roots, size 0 the empty tree's root)."""
    if kept.origin != served.origin:
        return False
    return verify_consistency(kept.size, served.size, kept.root, served.root, proof)


@dataclass(frozen=True)
class Cosignatures:
    """Which trusted witnesses cosigned a checkpoint: the names of those whose cosignature
    verifies, of those whose line is there but does not verify, and of those with none."""

    cosigned: tuple[str, ...]
    invalid: tuple[str, ...]
    missing: tuple[str, ...]

    @property
    def trusted(self) -> int:
        return len(self.cosigned) + len(self.invalid) + len(self.missing)

    def meets(self, quorum: int) -> bool:
        return len(self.cosigned) >= quorum


def count_cosignatures(note: Note, witnesses: Sequence[Verifier]) -> Cosignatures:
    """Each of ``witnesses`` (cosignature keys) sorted by what ``note`` holds of it.

    Counted one witness at a time, unlike :func:`~oanp.tlog.note.verify_note`, which refuses a
    whole note for one bad signature: a witness's bad line must not hide the log's signature or
    the other witnesses' cosignatures, and it counts for nothing towards a quorum.
    """
    cosigned: list[str] = []
    invalid: list[str] = []
    missing: list[str] = []
    for witness in witnesses:
        lines = [
            s.signature
            for s in note.signatures
            if (s.name, s.key_id) == (witness.name, witness.key_id)
        ]
        if any(witness.verify(note.text, signature) for signature in lines):
            cosigned.append(witness.name)
        elif lines:
            invalid.append(witness.name)
        else:
            missing.append(witness.name)
    return Cosignatures(tuple(cosigned), tuple(invalid), tuple(missing))


@dataclass(frozen=True)
class LogState:
    """The last checkpoint verified of each log, by origin: its signed note as it was served,
    signatures and cosignatures included, to verify again and to show as evidence."""

    checkpoints: Mapping[str, str] = field(default_factory=dict)

    def kept(self, origin: str) -> str | None:
        return self.checkpoints.get(origin)

    def keeping(self, origin: str, note: str) -> LogState:
        """This state with ``note`` as the last checkpoint of ``origin``."""
        return LogState({**self.checkpoints, origin: note})

    def format(self) -> str:
        """The state document: ``{"format", "logs": {origin: {"checkpoint": note}}}``."""
        logs = {origin: {"checkpoint": note} for origin, note in sorted(self.checkpoints.items())}
        return json.dumps({"format": STATE_FORMAT, "logs": logs}, indent=1) + "\n"


def parse_log_state(text: str) -> LogState:
    """The state a document of :meth:`LogState.format` holds; ``ValueError`` saying what is
    wrong with any other text. The notes are not verified here: the caller verifies each
    with the log's key before it trusts one."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(document, dict) or document.get("format") != STATE_FORMAT:
        raise ValueError(f"no format {STATE_FORMAT!r}")
    logs = document.get("logs")
    if not isinstance(logs, dict):
        raise ValueError("no logs object")
    checkpoints = {}
    for origin, kept in logs.items():
        note = kept.get("checkpoint") if isinstance(kept, dict) else None
        if not isinstance(note, str):
            raise ValueError(f"the log {origin!r} holds no checkpoint")
        try:
            check_note_text(note)
        except ValueError as exc:
            raise ValueError(f"the checkpoint of {origin!r} is no note: {exc}") from None
        checkpoints[origin] = note
    return LogState(checkpoints)
