"""What a verification finds: each :class:`Check` of a :class:`Report`, and the checks of one
session log (:func:`check_log`), which :mod:`oanp.audit.verify` makes of a log alone and of
every log of a bundle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from oanp.audit.bundle import entry_json
from oanp.audit.invariants import audit_log
from oanp.audit.signed_entries import PartyKeys, check_signed_entries
from oanp.audit.walk import LogAudit, Status
from oanp.wire.canonical import JsonValue
from oanp.wire.log import ChainWalk, walk_chain
from oanp.wire.profiles import PROFILES, Profile

#: A check as plain values (name, ok, detail): what a worker process sends back of one.
CheckValues = tuple[str, bool, str]
#: A report's counts, in the order of :meth:`Report.counts`.
Counts = tuple[int, int, int, int, int, int, int, int, int]


class Bookmark(NamedTuple):
    """Where a report stood (:meth:`Report.bookmark`): how many checks and audits it kept,
    its failures, the checks made, its counts."""

    checks: int
    audits: int
    failures: int
    made: int
    counts: Counts


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
    """What a verification found. ``on_check`` sees every check as it is made; with
    ``keep_passing`` off only failing checks are kept, so a million-entry bundle's report
    holds its counts and its failures, not a line per check."""

    checks: list[Check] = field(default_factory=list)
    audits: list[LogAudit] = field(default_factory=list)
    entries_total: int = 0
    entries_valid: int = 0
    sessions_total: int = 0
    sessions_passing: int = 0
    agreements_valid: int = 0
    agreements_signed: int = 0
    #: Party entries signed, signed with a valid signature, and unsigned (§17).
    signed_entries: int = 0
    signed_valid: int = 0
    unsigned_entries: int = 0
    failures: int = 0
    keep_passing: bool = True
    on_check: Callable[[Check], None] | None = None
    #: Checks made, and how many of the first of them ``on_check`` saw before a rewind.
    made: int = field(default=0, init=False, repr=False)
    shown: int = field(default=0, init=False, repr=False)

    def add(self, name: str, ok: bool, detail: str = "") -> bool:
        check = Check(name, ok, detail)
        self.made += 1
        if not ok:
            self.failures += 1
        if ok is False or self.keep_passing:
            self.checks.append(check)
        if self.on_check is not None and self.made > self.shown:
            self.on_check(check)
        return ok

    def count(self, audit: LogAudit) -> None:
        self.sessions_total += 1
        self.sessions_passing += audit.ok
        if audit.agreement_valid is not None:
            self.agreements_signed += 1
            self.agreements_valid += audit.agreement_valid
        if self.keep_passing:
            self.audits.append(audit)

    def counts(self) -> Counts:
        """Every count, to be added to another report's by :meth:`merge`."""
        return (
            self.entries_total,
            self.entries_valid,
            self.sessions_total,
            self.sessions_passing,
            self.agreements_valid,
            self.agreements_signed,
            self.signed_entries,
            self.signed_valid,
            self.unsigned_entries,
        )

    def _set_counts(self, counts: Iterable[int]) -> None:
        (
            self.entries_total,
            self.entries_valid,
            self.sessions_total,
            self.sessions_passing,
            self.agreements_valid,
            self.agreements_signed,
            self.signed_entries,
            self.signed_valid,
            self.unsigned_entries,
        ) = counts

    def merge(
        self, checks: Iterable[CheckValues], counts: Counts, audits: Sequence[LogAudit]
    ) -> None:
        """Take in what another report found, as if this one had found it: its checks made
        again in their order, its counts added, its audits kept if this report keeps them."""
        for name, ok, detail in checks:
            self.add(name, ok, detail)
        self._set_counts(mine + theirs for mine, theirs in zip(self.counts(), counts, strict=True))
        if self.keep_passing:
            self.audits.extend(audits)

    def bookmark(self) -> Bookmark:
        """Where the report stands, to come back to with :meth:`rewind`."""
        return Bookmark(len(self.checks), len(self.audits), self.failures, self.made, self.counts())

    def rewind(self, bookmark: Bookmark) -> None:
        """Forget what was found since ``bookmark``, to find it again: ``on_check`` is not
        shown again the checks it has seen, which are made again first, in their order."""
        self.shown = max(self.shown, self.made)
        del self.checks[bookmark.checks :]
        del self.audits[bookmark.audits :]
        self.failures, self.made = bookmark.failures, bookmark.made
        self._set_counts(bookmark.counts)

    @property
    def ok(self) -> bool:
        return self.failures == 0

    @property
    def agreements(self) -> tuple[int, int]:
        return self.agreements_valid, self.agreements_signed

    def summary(self) -> str:
        found = (
            f"{self.entries_valid}/{self.entries_total} entries valid, "
            f"{self.agreements_valid}/{self.agreements_signed} agreements valid, "
            f"{self.sessions_passing}/{self.sessions_total} sessions pass I1-I7"
        )
        if self.signed_entries:  # logs of unsigned parties read as they always did
            found += f", signed entries: {self.signed_valid}/{self.signed_entries} valid"
        return found


@dataclass(frozen=True, slots=True)
class SignatureRules:
    """What party signatures are checked with (§17): each party's registered keys, and
    whether every party entry must be signed (``oanp verify --require-signatures``)."""

    party_keys: PartyKeys = field(default_factory=dict)
    required: bool = False


NO_RULES = SignatureRules()


def check_log(
    entries: Sequence[Mapping[str, JsonValue]],
    jwks: Mapping[str, Any] | None,
    report: Report,
    profiles: Mapping[str, Profile],
    signatures: SignatureRules = NO_RULES,
) -> ChainWalk:
    """Add to ``report`` the checks of one normalized log: its hash chain, I1–I7, then its
    party signatures when it has any or they are required; its walked chain, whose entries'
    JCS bytes are the log's Merkle leaves' data."""
    walk = walk_chain(entries)
    audit = audit_log(entries, jwks, profiles=profiles, breaks=walk.breaks)
    label = f"session {audit.session_id}" if audit.session_id else "session"
    bad_positions = {b.position for b in walk.breaks}
    report.entries_total += len(entries)
    report.entries_valid += len(entries) - len(bad_positions)
    report.add(
        f"{label}: hash chain",
        not walk.breaks,
        f"{len(entries)} entries"
        if not walk.breaks
        else "; ".join(b.describe() for b in walk.breaks),
    )
    for result in audit.results.values():
        detail = "; ".join(result.problems or result.notes)
        report.add(
            f"{label}: {result.invariant}",
            result.status is not Status.FAIL,
            f"{result.status.value}" + (f" ({detail})" if detail else ""),
        )
    report.count(audit)
    _check_signatures(entries, label, report, signatures)
    return walk


def _check_signatures(
    entries: Sequence[Mapping[str, JsonValue]],
    label: str,
    report: Report,
    signatures: SignatureRules,
) -> None:
    signed = check_signed_entries(entries, signatures.party_keys)
    report.signed_entries += signed.signed
    report.signed_valid += signed.valid
    report.unsigned_entries += signed.unsigned
    if not signed.signed and not signatures.required:
        return
    missing = signatures.required and signed.unsigned > 0
    detail = signed.describe() + ("; signatures are required" if missing else "")
    report.add(f"{label}: party signatures", not signed.problems and not missing, detail)


def verify_log(
    entries: Sequence[Mapping[str, JsonValue]],
    jwks: Mapping[str, Any] | None,
    *,
    report: Report | None = None,
    profiles: Mapping[str, Profile] = PROFILES,
    signatures: SignatureRules = NO_RULES,
) -> Report:
    """Verify one session log: every entry's hash and link, I1–I7, its party signatures."""
    report = report or Report()
    normalized = [entry_json(e) if isinstance(e, Mapping) else e for e in entries]
    check_log(normalized, jwks, report, profiles, signatures)
    return report
