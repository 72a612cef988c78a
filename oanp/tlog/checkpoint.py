"""C2SP checkpoints (c2sp.org/tlog-checkpoint): a signed note whose text is a log's tree head,
three lines (origin, tree size in decimal, base64 root hash) and optional extension lines.

A checkpoint's text is only read once the note verifies: :func:`verify_checkpoint` checks the
signatures first and parses the text after.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from oanp.audit.merkle import HASH_SIZE
from oanp.tlog.errors import MalformedCheckpoint
from oanp.tlog.note import (
    Note,
    NoteSigner,
    Verifier,
    decode_base64,
    encode_base64,
    format_note,
    parse_note,
    verify_note,
)

#: RFC 6962 tree sizes are unsigned 64-bit numbers.
MAX_TREE_SIZE = 2**64 - 1

_SIZE = re.compile(r"0|[1-9][0-9]*")
_SIZE_DIGITS = len(str(MAX_TREE_SIZE))
_CONTROL = re.compile("[\x00-\x1f]")


@dataclass(frozen=True)
class Checkpoint:
    """A tree head of the log named ``origin``: ``size`` leaves, RFC 6962 ``root``."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.origin or _CONTROL.search(self.origin):
            raise MalformedCheckpoint("the origin is one non-empty line")
        if isinstance(self.size, bool) or not 0 <= self.size <= MAX_TREE_SIZE:
            raise MalformedCheckpoint("the tree size is a 64-bit unsigned number")
        if len(self.root) != HASH_SIZE:
            raise MalformedCheckpoint(f"the root hash is {HASH_SIZE} bytes")
        if any(not line or _CONTROL.search(line) for line in self.extensions):
            raise MalformedCheckpoint("each extension line is one non-empty line")

    def body(self) -> str:
        """The note text: origin, size, base64 root and extension lines, each ending in ``\\n``."""
        lines = (self.origin, str(self.size), encode_base64(self.root), *self.extensions)
        return "".join(line + "\n" for line in lines)


def parse_checkpoint(text: str) -> Checkpoint:
    """The checkpoint a note's text states; :class:`MalformedCheckpoint` for any other text."""
    if not text.endswith("\n"):
        raise MalformedCheckpoint("a checkpoint's text ends in a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise MalformedCheckpoint("a checkpoint has origin, size and root hash lines")
    origin, size, root, *extensions = lines
    # The length first: int() refuses (ValueError) strings of thousands of digits.
    if len(size) > _SIZE_DIGITS or not _SIZE.fullmatch(size):
        raise MalformedCheckpoint("the tree size is decimal without leading zeros")
    try:
        root_hash = decode_base64(root)
    except ValueError:
        raise MalformedCheckpoint("the root hash is not base64") from None
    return Checkpoint(origin, int(size), root_hash, tuple(extensions))


def sign_checkpoint(checkpoint: Checkpoint, signers: Iterable[NoteSigner]) -> str:
    """The signed note of ``checkpoint``, one signature line for each of ``signers``."""
    body = checkpoint.body()
    return format_note(body, (signer.sign(body) for signer in signers))


@dataclass(frozen=True)
class VerifiedCheckpoint:
    """A checkpoint whose note verified: the checkpoint, the note it came in (every signature
    line, unknown ones included), and the names of the trusted keys that signed it."""

    checkpoint: Checkpoint
    note: Note
    signed_by: tuple[str, ...]


def verify_checkpoint(data: str | bytes, verifiers: Iterable[Verifier]) -> VerifiedCheckpoint:
    """A signed checkpoint, read once ``verifiers`` have verified its note (see
    :func:`~oanp.tlog.note.verify_note`): cosignature verifiers count as any other key."""
    note = parse_note(data)
    signed_by = verify_note(note, verifiers)
    return VerifiedCheckpoint(parse_checkpoint(note.text), note, tuple(signed_by))
