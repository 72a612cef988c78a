"""``oanp verify --log URL``: the arbiter's transparency log (docs/protocol.md §18) checked from
outside, trusting nothing of the arbiter's but the log's verifier key.

``--log URL`` is the log's prefix (``log.url`` of the arbiter's ``/.well-known/oanp.json``). The
log's key is ``--log-key`` when given, else the one that document names, which a ``note:`` line
says was not pinned. The checks, each an ``ok``/``FAIL`` line of the report:

- ``log checkpoint``: the served checkpoint's note verifies with the log's key;
- ``log witnesses``: how many of the ``--witness`` keys cosigned it, against ``--quorum``;
- ``log consistency``: against the last checkpoint of the same origin this client verified (kept
  in ``--state``): the same tree, or a larger one that an RFC 6962 consistency proof computed
  from the tiles shows extends it. Two trees of one size with different roots, or a larger tree
  that does not extend the kept one, are a fork; a smaller one is a rollback: each is printed
  with both signed notes, the evidence;
- ``log inclusion``, given a bundle or a session log: every entry's leaf is found in the log's
  entry bundles and proven by an inclusion proof computed from the tiles, against the root.

The checkpoint is kept in the state file only when every check of the run passed. The
decisions are :mod:`oanp.tlog.monitor`'s; the tiles are read by :mod:`oanp.net.log_tiles`.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

from oanp.audit.jsonstream import PullReader
from oanp.audit.merkle import leaf_hash, verify_inclusion
from oanp.audit.report import Report
from oanp.net.files import replace_file
from oanp.net.log_tiles import LogClient, LogUnavailable, TileHashes, TileMissing, find_leaves
from oanp.tlog.checkpoint import Checkpoint, VerifiedCheckpoint, verify_checkpoint
from oanp.tlog.cosignature import CosignatureVerifier, cosignature_verifier
from oanp.tlog.errors import TlogError
from oanp.tlog.monitor import (
    LogState,
    Relation,
    compare_checkpoints,
    count_cosignatures,
    parse_log_state,
    proves_consistency,
)
from oanp.tlog.note import NoteVerifier, encode_base64, note_verifier
from oanp.tlog.tree import consistency_proof, inclusion_proof, leaf_data, root_hash

#: Entries missing from the log that were received this recently may just not be integrated
#: yet: the log takes them about a second after their commit, later while witnesses cosign.
PENDING_MINUTES = 5
PENDING = timedelta(minutes=PENDING_MINUTES)
#: Entries named in a failure, at most.
SHOWN = 5


class LogSetupError(Exception):
    """A flag or file the log's checks cannot start with; the message says which and why."""


def default_state_path() -> Path:
    """``$XDG_CONFIG_HOME/oanp/log-state.json``, by default under ``~/.config``."""
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "oanp" / "log-state.json"


def add_log_arguments(parser: argparse.ArgumentParser) -> None:
    """``oanp verify``'s flags of the transparency log."""
    group = parser.add_argument_group(
        "the transparency log",
        "check the log's checkpoint, its witnesses' cosignatures, its consistency with the "
        "last checkpoint seen and, given FILE, that every entry of FILE is in it",
    )
    group.add_argument(
        "--log", metavar="URL", help="the log's prefix: log.url of /.well-known/oanp.json"
    )
    group.add_argument(
        "--log-key",
        metavar="VKEY",
        help="the log's verifier key to trust (default: the one /.well-known/oanp.json names)",
    )
    group.add_argument(
        "--witness",
        action="append",
        default=[],
        metavar="VKEY",
        help="a witness's cosignature verifier key (repeatable)",
    )
    group.add_argument(
        "--quorum",
        type=int,
        metavar="N",
        help="cosignatures the checkpoint needs (default: every --witness)",
    )
    group.add_argument(
        "--state",
        type=Path,
        metavar="FILE",
        help=f"the last checkpoint verified of each log (default: {default_state_path()})",
    )


@dataclass(frozen=True)
class LogOptions:
    """What the flags ask for: the log's prefix, its pinned key if any, the witnesses trusted
    and how many must cosign, and the state file."""

    url: str
    log_key: NoteVerifier | None
    witnesses: tuple[CosignatureVerifier, ...]
    quorum: int
    state: Path


def log_options(args: argparse.Namespace) -> LogOptions | None:
    """The options of ``args``; ``None`` without ``--log``. :class:`LogSetupError` for a key
    that is no key of its kind, a quorum out of range, or log flags without ``--log``."""
    if args.log is None:
        if args.log_key or args.witness or args.quorum is not None or args.state:
            raise LogSetupError("--log-key, --witness, --quorum and --state go with --log URL")
        return None
    parts = urlsplit(args.log)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise LogSetupError(f"--log {args.log}: not an http(s) URL")
    try:
        log_key = note_verifier(args.log_key) if args.log_key else None
    except TlogError as exc:
        raise LogSetupError(f"--log-key: {exc.detail}") from None
    witnesses = []
    for vkey in args.witness:
        try:
            witnesses.append(cosignature_verifier(vkey))
        except TlogError as exc:
            raise LogSetupError(f"--witness {vkey}: {exc.detail}") from None
    quorum = len(witnesses) if args.quorum is None else args.quorum
    if not 0 <= quorum <= len(witnesses):
        raise LogSetupError(f"--quorum {quorum}: between 0 and the {len(witnesses)} --witness")
    state = args.state or default_state_path()
    return LogOptions(args.log.rstrip("/"), log_key, tuple(witnesses), quorum, state)


# The state file -------------------------------------------------------------------------------


def load_state(path: Path) -> LogState:
    """The state kept in ``path``: empty when there is no such file yet."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return LogState()
    except (OSError, UnicodeDecodeError) as exc:
        raise LogSetupError(f"--state {path}: cannot read it: {exc}") from None
    try:
        return parse_log_state(text)
    except ValueError as exc:
        raise LogSetupError(f"--state {path}: not a log state file: {exc}") from None


def save_state(path: Path, state: LogState) -> None:
    """Replace ``path`` with ``state`` whole, its folder made if need be."""
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(path, state.format().encode("utf-8"))


# The entries of a bundle or a session log ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class LoggedEntry:
    """An entry as a bundle or a session log holds it: what its leaf commits to, and when the
    arbiter received it."""

    session_id: str
    seq: int
    entry_hash: str
    received_at: str

    @property
    def leaf_hash(self) -> bytes:
        return leaf_hash(leaf_data(self.session_id, self.seq, self.entry_hash))

    def __str__(self) -> str:
        return f"{self.session_id} #{self.seq}"


def _entry(entry: object, session_id: str | None) -> LoggedEntry:
    if not isinstance(entry, Mapping):
        raise ValueError("an entry is not an object")
    session: object = session_id
    if session is None:  # a session log: its entries' envelopes name the session
        envelope = entry.get("envelope")
        session = envelope.get("session_id") if isinstance(envelope, Mapping) else None
    seq, entry_hash = entry.get("seq"), entry.get("entry_hash")
    if not isinstance(session, str) or type(seq) is not int or not isinstance(entry_hash, str):
        raise ValueError("an entry without its session id, seq or entry hash")
    received_at = entry.get("received_at")
    when = received_at if isinstance(received_at, str) else ""
    return LoggedEntry(session, seq, entry_hash, when)


def logged_entries(path: Path) -> list[LoggedEntry]:
    """Every entry of a bundle (read one session at a time) or of a session log (an array of
    entries, an object with ``entries``, or JSON lines); ``ValueError`` for any other file."""
    with path.open(encoding="utf-8") as stream:
        reader = PullReader(stream)
        if reader.peek() == "{":
            found = _streamed(reader)
            if found is not None:
                return found
    text = path.read_text(encoding="utf-8")
    try:
        document: Any = json.loads(text)
    except ValueError:
        document = [json.loads(line) for line in text.split("\n") if line.strip()]
    if not isinstance(document, list):
        raise ValueError("neither a bundle nor a session log")
    return [_entry(entry, None) for entry in document]


def _streamed(reader: PullReader) -> list[LoggedEntry] | None:
    """The entries of the object ``reader`` is at: a bundle's ``sessions``, a session log's
    ``entries``; ``None`` for an object with neither (the first of JSON lines, say)."""
    reader.begin("{")
    found: list[LoggedEntry] | None = None
    while (key := reader.next_key()) is not None:
        if key == "sessions" and reader.peek() == "[":
            found = found or []
            reader.begin("[")
            while reader.next_item():
                session = reader.value()
                if not isinstance(session, dict) or not isinstance(session.get("log"), list):
                    raise ValueError("a bundled session without its log")
                session_id = session.get("session_id")
                if not isinstance(session_id, str):
                    raise ValueError("a bundled session without its session id")
                found += (_entry(entry, session_id) for entry in session["log"])
        elif key == "entries" and reader.peek() == "[":
            found = found or []
            found += (_entry(entry, None) for entry in reader.value())
        else:
            reader.value()
    return found


def _received(entry: LoggedEntry) -> datetime | None:
    try:
        when = datetime.fromisoformat(entry.received_at)
    except ValueError:
        return None
    return when if when.tzinfo is not None else None


# The checks ---------------------------------------------------------------------------------


def _evidence(out: TextIO, notes: Sequence[tuple[str, str]]) -> None:
    """Signed notes shown after a failure they prove, each line indented by four spaces."""
    for label, note in notes:
        print(f"  {label}:", file=out)
        for line in note.splitlines():
            print(f"    {line}".rstrip(), file=out)


class LogAudit:
    """One run's checks of the log: the checkpoint fetched when it opens, so that a log that
    cannot be read stops the run before any check; the checks made into a report by
    :meth:`check`."""

    def __init__(
        self,
        options: LogOptions,
        client: LogClient,
        log_key: NoteVerifier,
        served: bytes,
        state: LogState,
        out: TextIO,
        now: Callable[[], datetime],
    ) -> None:
        self.options, self.client, self.log_key = options, client, log_key
        self.served, self.state, self.out, self.now = served, state, out, now
        self.verified: VerifiedCheckpoint | None = None

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> LogAudit:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def served_note(self) -> str:
        return self.served.decode("utf-8", "replace")

    def check(self, report: Report, path: Path | None) -> None:
        """The log's checks into ``report``, then the checkpoint kept if every check of the
        report passed: given the ``path`` of a bundle or a session log, the inclusion of each
        of its entries too."""
        if self._checkpoint(report):
            self._witnesses(report)
            self._consistency(report)
            if path is not None:
                self._inclusion(report, path)
        self._keep(report)

    def verify_alone(self) -> int:
        """The log's checks alone, printed, then the verdict: 0 when they pass, 1 when not."""
        report = Report(on_check=lambda check: print(check.line(), file=self.out))
        self.check(report, None)
        about = (
            f"log {self.verified.checkpoint.origin}, tree of {self.verified.checkpoint.size}"
            if self.verified is not None
            else f"log {self.options.url}"
        )
        passed = report.made - report.failures
        verdict = "VERIFIED" if report.ok else "FAILED"
        print(f"{verdict}: {about}: {passed}/{report.made} checks passed", file=self.out)
        return 0 if report.ok else 1

    def _checkpoint(self, report: Report) -> bool:
        try:
            self.verified = verify_checkpoint(self.served, [self.log_key])
        except TlogError as exc:
            return report.add(
                "log checkpoint",
                False,
                f"{exc.code}: {exc.detail} (the log's key: {self.log_key.verifier_key})",
            )
        checkpoint = self.verified.checkpoint
        return report.add(
            "log checkpoint",
            True,
            f"{checkpoint.origin}, size {checkpoint.size}, root {encode_base64(checkpoint.root)}, "
            f"signed by {self.log_key.name}",
        )

    def _witnesses(self, report: Report) -> None:
        assert self.verified is not None
        found = count_cosignatures(self.verified.note, self.options.witnesses)
        quorum = self.options.quorum
        detail = f"{len(found.cosigned)}/{found.trusted} cosigned, quorum {quorum}"
        if not found.trusted:
            detail += ": no --witness given, only the log's own signature vouches for it"
        if found.missing:
            detail += f"; none from {', '.join(found.missing)}"
        if found.invalid:
            detail += f"; from {', '.join(found.invalid)} one that does not verify"
        report.add("log witnesses", found.meets(quorum), detail)

    def _consistency(self, report: Report) -> None:
        assert self.verified is not None
        served = self.verified.checkpoint
        state = self.options.state
        kept_note = self.state.kept(served.origin)
        if kept_note is None:
            report.add("log consistency", True, f"no earlier checkpoint of this log in {state}")
            return
        try:
            kept = verify_checkpoint(kept_note, [self.log_key]).checkpoint
        except TlogError as exc:
            report.add(
                "log consistency",
                False,
                f"the checkpoint kept in {state} does not verify with the log's key "
                f"({exc.code}: {exc.detail}): remove it from the file to start over",
            )
            return
        relation = compare_checkpoints(kept, served)
        evidence = [
            (f"kept in {state}", kept_note),
            (f"served by {self.client.url}/checkpoint", self.served_note),
        ]
        signer = self.log_key.name
        if relation is Relation.SAME:
            report.add("log consistency", True, f"the same tree of {kept.size} as kept in {state}")
        elif relation is Relation.FORK:
            report.add(
                "log consistency",
                False,
                f"FORK: two trees of size {kept.size} with different roots, both signed by "
                f"{signer}",
            )
            _evidence(self.out, evidence)
        elif relation is Relation.ROLLBACK:
            report.add(
                "log consistency",
                False,
                f"ROLLBACK: a tree of {served.size}, smaller than the tree of {kept.size} kept "
                f"in {state}, both signed by {signer}",
            )
            _evidence(self.out, evidence)
        else:
            self._grown(report, kept, evidence)

    def _grown(self, report: Report, kept: Checkpoint, evidence: list[tuple[str, str]]) -> None:
        assert self.verified is not None
        served = self.verified.checkpoint
        tiles = TileHashes(self.client, served.size)
        try:
            proof = consistency_proof(tiles, kept.size, served.size)
            if proves_consistency(kept, served, proof):
                report.add(
                    "log consistency",
                    True,
                    f"the tree of {kept.size} kept in {self.options.state} is a prefix of this "
                    f"tree of {served.size}",
                )
                return
            served_root = root_hash(tiles, served.size)
            prefix_root = root_hash(tiles, kept.size)
        except TileMissing as exc:
            report.add(
                "log consistency",
                False,
                f"no proof from the tree of {kept.size}: the log does not serve {exc}",
            )
            return
        if served_root != served.root:
            report.add(
                "log consistency",
                False,
                f"the log's tiles do not hash to its checkpoint's root: no proof from the tree "
                f"of {kept.size} kept in {self.options.state}",
            )
            return
        report.add(
            "log consistency",
            False,
            f"FORK: this tree of {served.size} does not extend the tree of {kept.size} kept in "
            f"{self.options.state}, both signed by {self.log_key.name}: its first {kept.size} "
            f"leaves hash to {encode_base64(prefix_root or b'')}",
        )
        _evidence(self.out, evidence)

    def _inclusion(self, report: Report, path: Path) -> None:
        assert self.verified is not None
        checkpoint = self.verified.checkpoint
        size = checkpoint.size
        try:
            wanted = {entry.leaf_hash: entry for entry in logged_entries(path)}
        except (ValueError, OSError) as exc:
            report.add("log inclusion", False, f"cannot read the entries of {path}: {exc}")
            return
        try:
            found = find_leaves(self.client, size, wanted.keys())
            tiles = TileHashes(self.client, size)
            unproven = [
                wanted[leaf]
                for leaf, index in found.items()
                if not verify_inclusion(
                    leaf, index, size, inclusion_proof(tiles, index, size), checkpoint.root
                )
            ]
        except TileMissing as exc:
            report.add("log inclusion", False, f"the log does not serve {exc}")
            return
        missing = [entry for leaf, entry in wanted.items() if leaf not in found]
        proven = len(found) - len(unproven)
        detail = f"{proven}/{len(wanted)} entries in the log"
        if not missing and not unproven:
            report.add("log inclusion", True, f"{detail}, each proven in the tree of {size}")
            return
        detail += f" of size {size}"
        now = self.now()
        pending = [e for e in missing if (t := _received(e)) is not None and now - t < PENDING]
        absent = [e for e in missing if e not in pending]
        if pending:
            detail += (
                f"; {_named(pending)} received in the last {PENDING_MINUTES} minutes, "
                "not integrated yet: the log takes entries within seconds, retry in a few seconds"
            )
        if absent:
            detail += f"; {_named(absent)} not in the log"
        if unproven:
            detail += f"; {_named(unproven)} whose inclusion proof does not verify"
        report.add("log inclusion", False, detail)

    def _keep(self, report: Report) -> None:
        if self.verified is None:
            return
        origin = self.verified.checkpoint.origin
        if not report.ok:
            print(f"note: {self.options.state} left as it was: a check failed", file=self.out)
            return
        try:
            save_state(self.options.state, self.state.keeping(origin, self.served_note))
        except OSError as exc:
            raise LogSetupError(f"--state {self.options.state}: cannot write it: {exc}") from None
        print(
            f"note: the checkpoint of size {self.verified.checkpoint.size} kept in "
            f"{self.options.state}",
            file=self.out,
        )


def _named(entries: Sequence[LoggedEntry]) -> str:
    shown = ", ".join(str(e) for e in entries[:SHOWN])
    more = f" and {len(entries) - SHOWN} more" if len(entries) > SHOWN else ""
    return f"{len(entries)} ({shown}{more})"


def open_log(
    options: LogOptions,
    out: TextIO,
    *,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    client: LogClient | None = None,
) -> LogAudit:
    """The log's checks, ready to make: its key (pinned, or the one the arbiter publishes,
    which a ``note:`` line says), its checkpoint fetched, the state read.
    :class:`LogUnavailable` when the log cannot be read, :class:`LogSetupError` for a state
    file that is not one."""
    client = client or LogClient(options.url)
    try:
        state = load_state(options.state)
        log_key = options.log_key or _published_key(client, out)
        served = client.checkpoint()
    except BaseException:
        client.close()
        raise
    return LogAudit(options, client, log_key, served, state, out, now)


def _published_key(client: LogClient, out: TextIO) -> NoteVerifier:
    """The log's verifier key as the arbiter's ``/.well-known/oanp.json`` names it."""
    parts = urlsplit(client.url)
    url = f"{parts.scheme}://{parts.netloc}/.well-known/oanp.json"
    document = client.document(url)
    log = document.get("log") if isinstance(document, dict) else None
    vkey = log.get("verifier_key") if isinstance(log, dict) else None
    try:
        verifier = note_verifier(vkey) if isinstance(vkey, str) else None
    except TlogError:
        verifier = None
    if verifier is None:
        raise LogUnavailable(f"{url}: names no log verifier key (log.verifier_key)")
    print(
        f"note: the log's key is not pinned (--log-key): {url} names it: {verifier.verifier_key}",
        file=out,
    )
    if isinstance(log, dict) and str(log.get("url", "")).rstrip("/") != client.url:
        print(f"note: {url} names the log {log.get('url')}, not {client.url}", file=out)
    return verifier
