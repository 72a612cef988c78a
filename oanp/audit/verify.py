"""Verifying audit bundles and session logs (:mod:`oanp.audit.bundle` writes them): every
entry hash and link, the signed checkpoint over the Merkle root, inclusion and consistency
proofs, every signature and I1-I7; a whole document, or a stream read one session at a time
(:func:`verify_bundle_stream`), its logs checked by workers when the caller has them
(:mod:`oanp.audit.bundled_logs`), each finding a :class:`~oanp.audit.report.Check` of the
:class:`~oanp.audit.report.Report`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TextIO

from oanp.audit import merkle
from oanp.audit.bundle import (
    BUNDLE_DEPTH,
    BUNDLE_FORMAT,
    CHECKPOINT_FORMAT,
    Digest,
    hex_root,
    root_bytes,
)
from oanp.audit.bundled_logs import (
    BundledLog,
    LinesMap,
    NotLineByLine,
    check_bundled_log,
    check_log_lines,
    log_lines,
)
from oanp.audit.jsonstream import PullReader, StreamError
from oanp.audit.report import Report, SignatureRules
from oanp.audit.signed_entries import read_party_keys
from oanp.wire.canonical import (
    JsonValue,
    canonical_bytes,
    json_value,
)
from oanp.wire.errors import ProtocolError, VerificationError
from oanp.wire.profiles import PROFILES, Profile
from oanp.wire.signing import CHECKPOINT_TYP, verify_detached


class NotStreamable(Exception):
    """A valid bundle whose members come in an order a one-pass reader cannot check (its keys
    or its proofs after its logs): read it whole instead."""


class _Stop(Exception):
    """A failure after which nothing else of the bundle can be checked."""


class _ReadAgain(Exception):
    """The workers' pass met what the bundle's one pass reports otherwise, or at another
    place (a line that is not one log, a file that breaks off or is not UTF-8, whose place the
    size of each read decides): the bundle is read again in one pass, without workers."""


@dataclass(slots=True)
class _Bundled:
    """What is kept of a bundled session until the manifest is read: no entry."""

    session_id: str
    entries: int
    head_hash: object
    leaves: list[bytes | None] | None  # a subset's, for its inclusion proofs
    matched: bool = False


class _BundleCheck:
    """Verifies a bundle from its members in the order they come (see the module's layout).

    Per session it keeps a :class:`_Bundled` record; per entry nothing but the tree's O(log n)
    roots, except in a subset, whose leaves its inclusion proofs need at the end.
    """

    def __init__(
        self,
        report: Report,
        *,
        jwks: Mapping[str, Any] | None,
        since: Mapping[str, Any] | None,
        profiles: Mapping[str, Profile],
        lines_map: LinesMap | None = None,
        require_signatures: bool = False,
    ) -> None:
        self.report, self.profiles, self.since = report, profiles, since
        self.signatures = SignatureRules(required=require_signatures)
        self.lines_map = lines_map
        self.keys: Mapping[str, Any] | None = jwks
        self.keys_overridden = jwks is not None
        self.proofs: Mapping[str, Any] | None = None
        self.subset: bool | None = None  # decided when the first log comes
        self.tree = merkle.TreeBuilder()
        self.since_size = _tree_size_of(since)
        self.since_root: bytes | None = self.tree.root() if self.since_size == 0 else None
        self.bundled: list[_Bundled] = []
        self.unhashable = 0  # entries with no JCS form, so no leaf
        self.manifest = _ManifestDigest()
        self.rows_seen = 0
        self.manifest_tree_size: object = None
        self.next_row = 0  # the next bundled session the manifest's rows should name
        self.ordered = True
        self.stray_rows: dict[str, Mapping[str, Any]] = {}
        self.first_leaf: dict[str, int] = {}
        self.statement: Mapping[str, Any] | None = None
        self.consistency: list[Mapping[str, Any]] = []
        self.seen: set[str] = set()

    # Members ---------------------------------------------------------------------------------

    def format(self, value: object) -> None:
        self.seen.add("format")
        if not self.report.add("format", value == BUNDLE_FORMAT, str(value)):
            raise _Stop

    def jwks(self, value: Mapping[str, Any]) -> None:
        self.seen.add("jwks")
        if not self.keys_overridden:
            self.keys = value

    def party_keys(self, value: object) -> None:
        """The keys the parties registered (§17), before the logs whose signatures need them."""
        self.seen.add("party_keys")
        if self.subset is not None:
            raise NotStreamable("its party keys come after its logs")
        self.signatures = SignatureRules(read_party_keys(value), self.signatures.required)

    def set_proofs(self, value: Mapping[str, Any] | None) -> None:
        self.seen.add("proofs")
        if value and self.subset is False:
            raise NotStreamable("its proofs come after its logs")
        self.proofs = value or None

    def sessions_begin(self) -> None:
        self.seen.add("sessions")

    def begin_log(self) -> None:
        if self.subset is None:
            if self.keys is None:
                raise NotStreamable("its keys come after its logs")
            self.subset = self.proofs is not None

    def session(self, value: Mapping[str, Any]) -> None:
        self.begin_log()
        self.keep(check_bundled_log(value, self.keys, self.report, self.profiles, self.signatures))

    def sessions_apart(self, reader: PullReader) -> None:
        """The logs of ``sessions`` from the item the reader is at to the end, checked from
        their lines by the workers of ``lines_map`` and taken in as they come, in order.
        :class:`_ReadAgain` for whatever else they meet, from a line that is not one log to a
        file that breaks off: the bundle's one pass says what is wrong with it."""
        assert self.lines_map is not None
        try:
            self.begin_log()
            task = partial(
                check_log_lines,
                self.keys,
                self.profiles,
                self.signatures,
                self.report.keep_passing,
            )
            for results in self.lines_map(task, log_lines(reader)):
                for checked in results:
                    if checked is None:
                        raise NotLineByLine
                    self.report.merge(checked.checks, checked.counts, checked.audits)
                    self.keep(checked.log)
        except Exception as exc:
            raise _ReadAgain from exc

    def keep(self, log: BundledLog) -> None:
        """A checked log's leaves into the tree (a subset's kept for its proofs), and its
        record until the manifest is read."""
        if not self.subset:
            for leaf in log.leaves:
                if leaf is None:
                    self.unhashable += 1
                    continue
                self.tree.append(leaf)
                if self.tree.size == self.since_size:
                    self.since_root = self.tree.root()
        leaves = log.leaves if self.subset else None
        self.bundled.append(_Bundled(log.session_id, log.entries, log.head_hash, leaves))

    def manifest_member(self, key: str, value: JsonValue) -> None:
        self.manifest.member(key, value)
        if key == "tree_size":
            self.manifest_tree_size = value

    def manifest_rows_begin(self) -> None:
        self.manifest.rows_begin()

    def manifest_row(self, row: Mapping[str, Any]) -> None:
        """One row of the manifest's sessions, in order: matched against the bundled logs."""
        self.manifest.row(json_value(dict(row)))
        self.rows_seen += 1
        session_id = row["session_id"]
        if not isinstance(session_id, str):
            raise TypeError("a manifest row's session_id is not a string")
        expected = self.bundled[self.next_row] if self.next_row < len(self.bundled) else None
        if expected is not None and expected.session_id == session_id:
            self.next_row += 1
            self._match(expected, row)
        elif self.subset:
            if session_id in {b.session_id for b in self.bundled[self.next_row :]}:
                self.stray_rows[session_id] = row
        else:
            self.ordered = False
            self.stray_rows[session_id] = row

    def manifest_rows_end(self) -> None:
        self.manifest.rows_end()

    def _match(self, bundled: _Bundled, row: Mapping[str, Any]) -> None:
        bundled.matched = True
        self.first_leaf[bundled.session_id] = row["first_leaf"]
        self.report.add(
            f"session {bundled.session_id}: complete",
            bundled.entries == row["entries"]
            and bundled.entries > 0
            and bundled.head_hash == row["head_hash"],
            f"{bundled.entries} of {row['entries']} entries, head as listed",
        )

    def checkpoint(self, value: Mapping[str, Any]) -> None:
        self.seen.add("checkpoint")
        self.statement = _verify_checkpoint(self.report, value, self.keys or {}, "checkpoint")
        if self.statement is None:
            raise _Stop

    def set_consistency(self, value: Sequence[Mapping[str, Any]] | None) -> None:
        self.consistency = list(value or [])

    # The end ---------------------------------------------------------------------------------

    def require(self, *, checkpoint: bool = False) -> None:
        """``KeyError`` naming the members a bundle must have and this one lacks."""
        wanted = ("format", "jwks", "sessions") + (("checkpoint",) if checkpoint else ())
        missing = [m for m in wanted if m not in self.seen]
        if not self.manifest.complete:
            missing.append("manifest")
        if missing:
            raise KeyError(", ".join(missing))

    def finish(self) -> None:
        self.require(checkpoint=True)
        statement = self.statement
        assert statement is not None
        self.report.add(
            "manifest digest",
            statement["manifest_digest"] == self.manifest.tagged(),
            "the manifest is the one the checkpoint signed",
        )
        for bundled in self.bundled:
            if bundled.matched:
                continue
            row = self.stray_rows.get(bundled.session_id)
            if row is None:
                self.report.add(
                    f"session {bundled.session_id}: listed", False, "not in the manifest"
                )
            else:
                self._match(bundled, row)
        if self.subset:
            self._check_inclusion(statement)
        else:
            self.report.add(
                "merkle root",
                self.ordered
                and not self.unhashable
                and self.rows_seen == len(self.bundled)
                and self.tree.size == statement["tree_size"] == self.manifest_tree_size
                and hex_root(self.tree.root()) == statement["root_hash"],
                f"{self.tree.size} leaves against the signed root",
            )
        for n, item in enumerate(self.consistency):
            _verify_consistency(
                self.report, item, statement, self.keys or {}, f"consistency #{n + 1}"
            )
        if self.since is not None:
            self._check_since()

    def _check_inclusion(self, statement: Mapping[str, Any]) -> None:
        assert self.proofs is not None
        size = statement["tree_size"]
        root = root_bytes(statement)
        failures = total = 0
        for bundled in self.bundled:
            first = self.first_leaf.get(bundled.session_id, -1)
            paths = self.proofs["inclusion"].get(bundled.session_id, [])
            for i, leaf in enumerate(bundled.leaves or []):
                total += 1
                path = [bytes.fromhex(p) for p in paths[i]] if i < len(paths) else []
                if (
                    leaf is None
                    or first < 0
                    or not merkle.verify_inclusion(leaf, first + i, size, path, root)
                ):
                    failures += 1
        self.report.add(
            "inclusion proofs",
            failures == 0 and self.proofs.get("tree_size") == size,
            f"{total - failures}/{total} entries proven in the signed tree of {size}",
        )

    def _check_since(self) -> None:
        """The earlier export's signed tree must be a prefix of this one's leaves."""
        assert self.since is not None
        old = _verify_checkpoint(
            self.report, self.since["checkpoint"], self.keys or {}, "earlier export checkpoint"
        )
        if old is None:
            return
        if self.subset:
            self.report.add(
                "earlier export is a prefix",
                False,
                "a subset cannot be compared; use the whole export",
            )
            return
        size = old["tree_size"]
        self.report.add(
            "earlier export is a prefix",
            self.since_root is not None
            and size == self.since_size
            and hex_root(self.since_root) == old["root_hash"],
            f"its {size} entries are the first {size} of these {self.tree.size}",
        )


def _tree_size_of(bundle: Mapping[str, Any] | None) -> int | None:
    try:
        size = bundle["checkpoint"]["statement"]["tree_size"]  # type: ignore[index]
    except (KeyError, TypeError):
        return None
    return size if isinstance(size, int) and not isinstance(size, bool) else None


class _ManifestDigest:
    """The manifest's JCS digest, computed as its members arrive: they must come in JCS
    order, as a bundle writes them; a reader that meets them otherwise reads the file whole."""

    def __init__(self) -> None:
        self._digest = Digest()
        self._last: bytes | None = None
        self._rows = 0
        self.complete = False

    def _name(self, key: str) -> None:
        order = key.encode("utf-16-be")  # JCS sorts names by their UTF-16 code units
        if self._last is not None and order <= self._last:
            raise NotStreamable("its manifest is not in JCS order")
        self._digest.update((b"{" if self._last is None else b",") + canonical_bytes(key) + b":")
        self._last = order

    def member(self, key: str, value: JsonValue) -> None:
        self._name(key)
        self._digest.update(canonical_bytes(value))

    def rows_begin(self) -> None:
        self._name("sessions")
        self._digest.update(b"[")

    def row(self, row: JsonValue) -> None:
        self._digest.update((b"," if self._rows else b"") + canonical_bytes(row))
        self._rows += 1

    def rows_end(self) -> None:
        self._digest.update(b"]")

    def end(self) -> None:
        self._digest.update(b"{}" if self._last is None else b"}")
        self.complete = True

    def tagged(self) -> str:
        return self._digest.tagged()


def _jcs_sorted(keys: Iterable[str]) -> list[str]:
    return sorted(keys, key=lambda k: k.encode("utf-16-be"))


def _feed_document(check: _BundleCheck, bundle: Mapping[str, Any]) -> None:
    """Hand an in-memory bundle to the check in the order it reads best."""
    check.format(bundle.get("format"))
    check.jwks(bundle["jwks"])
    if "party_keys" in bundle:
        check.party_keys(bundle["party_keys"])
    check.set_proofs(bundle.get("proofs"))
    check.sessions_begin()
    for session in bundle["sessions"]:
        check.session(session)
    manifest = bundle["manifest"]
    for key in _jcs_sorted(manifest):
        if key == "sessions":
            check.manifest_rows_begin()
            for row in manifest["sessions"]:
                check.manifest_row(row)
            check.manifest_rows_end()
        else:
            check.manifest_member(key, json_value(manifest[key]))
    check.manifest.end()
    check.checkpoint(bundle["checkpoint"])
    check.set_consistency(bundle.get("consistency"))
    check.finish()


def unreadable_reason(exc: ProtocolError) -> str:
    """One line on a value read whole that nothing may hash, and where it is, such as
    ``number out of range at $.sessions[0].log[3].envelope.payload.price: beyond ±(2^53-1)``."""
    if not exc.errors:
        return exc.detail
    return f"{exc.detail} at {exc.errors[0].field}: {exc.errors[0].message}"


def _feed_stream(check: _BundleCheck, reader: PullReader) -> None:
    """Hand a bundle to the check member by member as ``reader`` reads it."""

    def value(path: str) -> Any:
        found = reader.value()
        try:
            return json_value(found, path, max_depth=BUNDLE_DEPTH)
        except ProtocolError as exc:  # 1e400 or a lone surrogate: as unreadable as bad JSON
            raise StreamError(unreadable_reason(exc)) from None

    reader.begin("{")
    if reader.next_key() != "format":
        raise NotStreamable("it does not start with its format")
    check.format(value("$.format"))
    members = {"format"}
    checkpoint: Any = None  # checked at the end, when the keys are surely read
    while (key := reader.next_key()) is not None:
        if key in members:
            raise ValueError(f"duplicate member {key!r}")
        members.add(key)
        if key == "sessions":
            check.sessions_begin()
            _expect(reader, "[", "sessions")
            if check.lines_map is None:
                index = 0
                while reader.next_item():
                    check.session(value(f"$.sessions[{index}]"))
                    index += 1
            elif reader.next_item():
                check.sessions_apart(reader)
        elif key == "manifest":
            if "sessions" not in members:
                raise NotStreamable("its manifest comes before its logs")
            _feed_manifest(check, reader, value)
        elif key == "jwks":
            check.jwks(value("$.jwks"))
        elif key == "party_keys":
            check.party_keys(value("$.party_keys"))
        elif key == "proofs":
            check.set_proofs(value("$.proofs"))
        elif key == "checkpoint":
            checkpoint = value("$.checkpoint")
        elif key == "consistency":
            check.set_consistency(value("$.consistency"))
        else:
            value(f"$.{key}")  # a member this version does not know: read past it
    reader.finish()
    check.require()
    if checkpoint is not None:
        check.checkpoint(checkpoint)
    check.finish()


def _expect(reader: PullReader, opening: str, name: str) -> None:
    """Enter the container ``name`` must be: valid JSON of another kind is a bundle of the
    wrong shape (reported), not an unreadable file."""
    if reader.peek() != opening:
        kind = "an array" if opening == "[" else "an object"
        raise TypeError(f"{name} is not {kind}")
    reader.begin(opening)


def _feed_manifest(check: _BundleCheck, reader: PullReader, value: Callable[[str], Any]) -> None:
    _expect(reader, "{", "manifest")
    while (key := reader.next_key()) is not None:
        if key == "sessions":
            check.manifest_rows_begin()
            _expect(reader, "[", "manifest.sessions")
            index = 0
            while reader.next_item():
                check.manifest_row(value(f"$.manifest.sessions[{index}]"))
                index += 1
            check.manifest_rows_end()
        else:
            check.manifest_member(key, value(f"$.manifest.{key}"))
    check.manifest.end()


def _verified(run: Callable[[], None], report: Report) -> Report:
    try:
        run()
    except _Stop:
        pass
    except StreamError:
        raise  # not JSON: the file is unreadable, not a bundle that fails
    except KeyError as exc:
        report.add("bundle structure", False, f"missing {exc.args[0]}")
    except (TypeError, ValueError, AttributeError, IndexError) as exc:
        report.add("bundle structure", False, f"{type(exc).__name__}: {exc}")
    return report


def verify_bundle(
    bundle: Mapping[str, Any],
    *,
    jwks: Mapping[str, Any] | None = None,
    since: Mapping[str, Any] | None = None,
    profiles: Mapping[str, Profile] = PROFILES,
    report: Report | None = None,
    require_signatures: bool = False,
) -> Report:
    """Verify a whole bundle or a subset; ``jwks`` overrides the bundled keys, ``since`` is an
    earlier bundle this one must extend; with ``require_signatures`` an unsigned party entry
    fails its log. Never raises on a malformed bundle: it reports."""
    report = report or Report()
    check = _BundleCheck(
        report, jwks=jwks, since=since, profiles=profiles, require_signatures=require_signatures
    )
    return _verified(lambda: _feed_document(check, bundle), report)


def verify_bundle_stream(
    stream: TextIO,
    *,
    jwks: Mapping[str, Any] | None = None,
    since: Mapping[str, Any] | None = None,
    profiles: Mapping[str, Profile] = PROFILES,
    report: Report | None = None,
    lines_map: LinesMap | None = None,
    require_signatures: bool = False,
) -> Report:
    """:func:`verify_bundle` of a bundle read from ``stream`` one session at a time.

    Raises :class:`NotStreamable` for a valid bundle laid out otherwise than a writer lays it
    out (read it whole with :func:`verify_bundle`) and :class:`oanp.audit.jsonstream.StreamError`
    for a file that is not JSON; a well-formed but wrong bundle is reported, as there.

    With ``lines_map`` (see :data:`oanp.audit.bundled_logs.LinesMap`) and a seekable stream,
    logs written one a line are checked by its workers, and the report is the same, check for
    check: where they cannot say what one pass would, the stream is read again from where it
    stood, in one pass, and ``on_check`` is shown only the checks it has not seen.
    """
    report = report or Report()
    if lines_map is not None and stream.seekable():
        start, bookmark = stream.tell(), report.bookmark()
        check = _BundleCheck(
            report,
            jwks=jwks,
            since=since,
            profiles=profiles,
            lines_map=lines_map,
            require_signatures=require_signatures,
        )
        try:
            return _verified(lambda: _feed_apart(check, PullReader(stream)), report)
        except _ReadAgain:
            report.rewind(bookmark)
            stream.seek(start)
    check = _BundleCheck(
        report, jwks=jwks, since=since, profiles=profiles, require_signatures=require_signatures
    )
    return _verified(lambda: _feed_stream(check, PullReader(stream)), report)


def _feed_apart(check: _BundleCheck, reader: PullReader) -> None:
    try:
        _feed_stream(check, reader)
    except (StreamError, UnicodeError, OSError) as exc:
        raise _ReadAgain from exc


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
            root_bytes(old),
            root_bytes(statement),
            proof,
        ),
        f"tree of {old['tree_size']} is a prefix of this tree of {statement['tree_size']}",
    )
