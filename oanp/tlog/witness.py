"""The decisions of a C2SP witness (c2sp.org/tlog-witness), without the HTTP server: what an
``add-checkpoint`` body says, which status answers it, and the record to keep of each log.

:meth:`Witness.add_checkpoint` applies the spec's checks in order: a malformed body is 400, an
origin no trusted key is for 404, a note no trusted key verifies 403, an old size above the
checkpoint's 400, an old size that is not the recorded one 409 (with the recorded size), and a
checkpoint that does not extend the recorded tree 422: a proof from size 0, a root of size 0
that is not the empty tree's, another root at the recorded size, a proof that fails. Only then
does it cosign, and the answer carries the new record, which the caller keeps before it answers,
checking and keeping under one lock so two requests cannot roll the record back between them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from oanp.audit.merkle import EMPTY_ROOT, HASH_SIZE, verify_consistency
from oanp.tlog.checkpoint import MAX_TREE_SIZE, Checkpoint, parse_checkpoint
from oanp.tlog.cosignature import CosignatureVerifier, Cosigner, cosignature_verifier
from oanp.tlog.errors import (
    MalformedCheckpoint,
    MalformedNote,
    MalformedWitnessRequest,
    NoteSignatureInvalid,
    NoteUnverified,
    TlogError,
)
from oanp.tlog.note import (
    MAX_NOTE_BYTES,
    Note,
    NoteVerifier,
    Verifier,
    decode_base64,
    encode_base64,
    format_note,
    note_verifier,
    parse_note,
    verify_note,
)

#: The spec's bound on a request's consistency proof.
MAX_PROOF_LINES = 63
#: An old size line, 63 proof lines and the largest note this package reads.
MAX_REQUEST_BYTES = MAX_NOTE_BYTES + 4096
#: The Content-Type of a 409's body, the witness's recorded size.
SIZE_CONTENT_TYPE = "text/x.tlog.size"
TEXT_CONTENT_TYPE = "text/plain; charset=utf-8"

_SIZE = re.compile(r"0|[1-9][0-9]*")
_SIZE_DIGITS = len(str(MAX_TREE_SIZE))


@dataclass(frozen=True)
class AddCheckpoint:
    """An ``add-checkpoint`` body: the old size, the consistency proof, the signed checkpoint."""

    old_size: int
    proof: tuple[bytes, ...]
    checkpoint: str


@dataclass(frozen=True)
class WitnessEndpoint:
    """A witness as a log is configured with it: its cosigning key and submission prefix."""

    verifier: CosignatureVerifier
    url: str

    @property
    def name(self) -> str:
        return self.verifier.name


def parse_witness_lines(lines: Iterable[str]) -> list[WitnessEndpoint]:
    """Witnesses written one a line, ``<verifier key> <URL>`` (the key a cosignature key,
    type 0x04, the URL http(s)); ``ValueError`` naming the first line that is not one."""
    found = []
    for line in lines:
        vkey, _, url = line.strip().partition(" ")
        try:
            verifier = cosignature_verifier(vkey)
        except TlogError as exc:
            raise ValueError(f"{line!r}: {exc.detail}") from None
        url = url.strip().rstrip("/")
        if not url.startswith(("http://", "https://")) or " " in url:
            raise ValueError(f"{line!r}: no http(s) URL after the key")
        found.append(WitnessEndpoint(verifier, url))
    return found


def add_checkpoint_body(old_size: int, proof: Sequence[bytes], checkpoint: str) -> str:
    """What a log sends to ``add-checkpoint``: ``old <size>``, the consistency proof a hash a
    line, a blank line and the signed checkpoint (which :func:`parse_add_checkpoint` reads)."""
    lines = [f"old {old_size}", *(encode_base64(node) for node in proof)]
    return "".join(line + "\n" for line in lines) + "\n" + checkpoint


def parse_add_checkpoint(body: str | bytes) -> AddCheckpoint:
    """``old <size>``, up to 63 base64 hash lines, a blank line, then a signed checkpoint;
    :class:`MalformedWitnessRequest` for anything else (the note itself is read later)."""
    if isinstance(body, bytes | bytearray):
        if len(body) > MAX_REQUEST_BYTES:
            raise MalformedWitnessRequest(f"the body is over {MAX_REQUEST_BYTES} bytes")
        try:
            body = bytes(body).decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedWitnessRequest("the body is not UTF-8") from None
    head, blank, checkpoint = body.partition("\n\n")
    if not blank:
        raise MalformedWitnessRequest("no blank line before the checkpoint")
    first, *proof_lines = head.split("\n")
    keyword, _, size = first.partition(" ")
    # The length first: int() refuses (ValueError) strings of thousands of digits.
    if keyword != "old" or len(size) > _SIZE_DIGITS or not _SIZE.fullmatch(size):
        raise MalformedWitnessRequest("the first line is old <size>, decimal")
    if int(size) > MAX_TREE_SIZE:
        raise MalformedWitnessRequest("the first line is old <size>, decimal")
    if len(proof_lines) > MAX_PROOF_LINES:
        raise MalformedWitnessRequest(f"more than {MAX_PROOF_LINES} proof lines")
    proof = []
    for line in proof_lines:
        try:
            node = decode_base64(line)
        except ValueError:
            node = b""
        if len(node) != HASH_SIZE:
            raise MalformedWitnessRequest("a proof line is one base64 hash")
        proof.append(node)
    return AddCheckpoint(int(size), tuple(proof), checkpoint)


def origin_hash(origin: str) -> str:
    """The lowercase hex SHA-256 of ``origin``: the path segment a log's checkpoint is
    served under, ``GET /<origin hash>/checkpoint``."""
    return hashlib.sha256(origin.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class LogRecord:
    """What the witness keeps of one log: the size and root it last cosigned, and that
    checkpoint's note with the log's verified signatures and the witness's cosignatures."""

    size: int
    root: bytes
    checkpoint: str


@dataclass(frozen=True)
class Answer:
    """An HTTP answer; for a cosigned checkpoint, also its origin and the log's new record."""

    status: int
    body: str
    content_type: str = TEXT_CONTENT_TYPE
    origin: str | None = None
    record: LogRecord | None = None


def _refused(status: int, reason: str) -> Answer:
    return Answer(status, reason + "\n")


def log_verifiers(vkeys: Iterable[str]) -> dict[str, list[NoteVerifier]]:
    """Each log's trusted keys by origin, from Ed25519 note verifier keys named as their log's
    origin (the name a log signs its checkpoints with); several keys may share one origin."""
    logs: dict[str, list[NoteVerifier]] = {}
    for vkey in vkeys:
        verifier = note_verifier(vkey)
        logs.setdefault(verifier.name, []).append(verifier)
    return logs


class Witness:
    """A witness's cosigners and the logs it follows (their trusted keys, by origin)."""

    def __init__(
        self, cosigners: Sequence[Cosigner], logs: Mapping[str, Sequence[Verifier]]
    ) -> None:
        if not cosigners:
            raise ValueError("a witness cosigns with at least one key")
        self.cosigners = tuple(cosigners)
        self.logs = {origin: tuple(keys) for origin, keys in logs.items()}

    def add_checkpoint(
        self, body: str | bytes, records: Mapping[str, LogRecord], now: int
    ) -> Answer:
        """The answer to ``POST /add-checkpoint`` with ``body``, given the logs' ``records``
        and the time ``now`` (POSIX seconds) to cosign at."""
        try:
            request = parse_add_checkpoint(body)
            note = parse_note(request.checkpoint)
        except (MalformedWitnessRequest, MalformedNote) as exc:
            return _refused(400, exc.detail)
        origin = note.text.partition("\n")[0]
        trusted = self.logs.get(origin)
        if trusted is None:
            return _refused(404, "unknown log origin")
        try:
            verify_note(note, trusted)
            checkpoint = parse_checkpoint(note.text)
        except (NoteSignatureInvalid, NoteUnverified) as exc:
            return _refused(403, exc.detail)
        except MalformedCheckpoint as exc:
            return _refused(400, exc.detail)
        if request.old_size > checkpoint.size:
            return _refused(400, "the old size is above the checkpoint's size")
        record = records.get(origin)
        known_size = record.size if record is not None else 0
        if request.old_size != known_size:
            return Answer(409, f"{known_size}\n", SIZE_CONTENT_TYPE)
        inconsistent = _inconsistency(request, checkpoint, record)
        if inconsistent:
            return _refused(422, inconsistent)
        return self._cosigned(note, checkpoint, trusted, now)

    def _cosigned(
        self, note: Note, checkpoint: Checkpoint, trusted: Sequence[Verifier], now: int
    ) -> Answer:
        lines = [cosigner.cosign(note.text, now) for cosigner in self.cosigners]
        # The record serves monitors the log's own signatures (those the witness verified,
        # not unknown ones it cannot vouch for) beside its cosignatures.
        trusted_ids = {(v.name, v.key_id) for v in trusted}
        log_lines = [s.line() for s in note.signatures if (s.name, s.key_id) in trusted_ids]
        served = format_note(note.text, log_lines + lines)
        record = LogRecord(checkpoint.size, checkpoint.root, served)
        return Answer(200, "".join(lines), origin=checkpoint.origin, record=record)

    def served_checkpoint(self, hashed_origin: str, records: Mapping[str, LogRecord]) -> Answer:
        """The answer to ``GET /<origin hash>/checkpoint``: the last cosigned checkpoint of the
        log whose origin hashes to ``hashed_origin``, 404 when there is none."""
        for origin, record in records.items():
            if origin_hash(origin) == hashed_origin:
                return Answer(200, record.checkpoint, origin=origin)
        return _refused(404, "no checkpoint of this log cosigned")


def _inconsistency(request: AddCheckpoint, checkpoint: Checkpoint, record: LogRecord | None) -> str:
    """Why ``checkpoint`` does not extend the recorded tree ('' when it does); the old size is
    the recorded one and at most the checkpoint's."""
    if checkpoint.size == 0 and checkpoint.root != EMPTY_ROOT:
        return "a tree of size 0 has the empty tree's root"
    if request.old_size == 0:
        return "no proof is needed from size 0" if request.proof else ""
    assert record is not None  # a record exists for every old size above 0 that matched
    if request.old_size == checkpoint.size and checkpoint.root != record.root:
        return "another root at the cosigned size"
    if not verify_consistency(
        request.old_size, checkpoint.size, record.root, checkpoint.root, request.proof
    ):
        return "the consistency proof does not verify"
    return ""
