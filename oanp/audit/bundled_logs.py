"""A bundle's session logs, each checked on its own.

The bundle's reader checks each log as it reads it (:mod:`oanp.audit.verify`); or, where the
bundle has its logs one a line, as :class:`oanp.audit.BundleWriter` writes them, the reader
hands their lines, unparsed, to workers (:func:`check_log_lines`) and takes back, in the
bundle's order, what each log's checks found and what the bundle keeps of it: the leaves its
tree is built of, and no entry.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from oanp.audit import merkle
from oanp.audit.bundle import BUNDLE_DEPTH
from oanp.audit.jsonstream import PullReader
from oanp.audit.report import NO_RULES, CheckValues, Counts, Report, SignatureRules, check_log
from oanp.audit.walk import LogAudit
from oanp.wire.canonical import json_value
from oanp.wire.profiles import Profile

#: A line longer than this is no log of a bundle written a log a line: the reader stops
#: looking for its end, so a bundle written on one line is not held whole to split it.
LINE_LIMIT = 1 << 24
#: About how many characters of lines go to a worker at once: enough work to outweigh the
#: hand-over, little enough to keep every worker busy and the reader's memory small.
CHUNK_CHARACTERS = 1 << 16


class BundledLog(NamedTuple):
    """What a bundle's check keeps of one checked log: no entry."""

    session_id: str
    entries: int
    head_hash: object
    leaves: list[bytes | None]


class CheckedLog(NamedTuple):
    """One log checked by a worker: what the bundle keeps of it, and what its checks found
    (the audit only for a report that keeps audits), for the reader's report to take in."""

    log: BundledLog
    checks: list[CheckValues]
    counts: Counts
    audits: list[LogAudit]


#: A worker's task: the checks of a chunk of lines, ``None`` for any line the reader must read.
LinesTask = Callable[[list[str]], list[CheckedLog | None]]
#: How the reader has chunks of lines checked: ``map(task, chunks)``, the results in the
#: chunks' order. The builtin ``map`` checks them in the reader's own process.
LinesMap = Callable[[LinesTask, Iterator[list[str]]], Iterable[list[CheckedLog | None]]]


class NotLineByLine(Exception):
    """A bundle's log that is not on a line of its own: only the reader can read it."""


def check_bundled_log(
    value: Mapping[str, Any],
    keys: Mapping[str, Any] | None,
    report: Report,
    profiles: Mapping[str, Profile],
    signatures: SignatureRules = NO_RULES,
) -> BundledLog:
    """Add to ``report`` the checks of one item of a bundle's ``sessions``."""
    session_id, log = value["session_id"], value["log"]
    walk = check_log(log, keys, report, profiles, signatures)
    # An entry with no JCS form is no leaf of any tree: its session's proofs fail.
    leaves = [None if data is None else merkle.leaf_hash(data) for data in walk.entry_bytes]
    head = log[-1].get("entry_hash") if log and isinstance(log[-1], Mapping) else None
    return BundledLog(str(session_id), len(log), head, leaves)


def check_log_lines(
    keys: Mapping[str, Any] | None,
    profiles: Mapping[str, Profile],
    signatures: SignatureRules,
    keep_audits: bool,
    lines: Sequence[str],
) -> list[CheckedLog | None]:
    """The checks of each line, a log of a bundle, as the bundle's reader would make them.

    A line is read as the reader reads a value, and must hold that value and nothing else: then
    the reader would have read the same value from the bundle, and its checks find the same.
    Otherwise, or when its checks raise (a log of the wrong shape), the line's result is
    ``None``: the reader reads the bundle itself to say what is wrong, and where.
    """
    found: list[CheckedLog | None] = []
    for line in lines:
        report = Report()
        try:
            reader = PullReader(io.StringIO(line))
            value: Any = json_value(reader.value(), max_depth=BUNDLE_DEPTH)
            reader.finish()
            log = check_bundled_log(value, keys, report, profiles, signatures)
        except Exception:
            found.append(None)
            continue
        checks = [(c.name, c.ok, c.detail) for c in report.checks]
        found.append(CheckedLog(log, checks, report.counts(), report.audits if keep_audits else []))
    return found


def log_lines(reader: PullReader) -> Iterator[list[str]]:
    """The lines of an array's items, in chunks, from the item the reader is at (begun with
    :meth:`PullReader.next_item`) to the array's end; :class:`NotLineByLine` for an item that
    is not on a line of its own."""
    chunk: list[str] = []
    held = 0
    while True:
        line = reader.line(LINE_LIMIT)
        if line is None:
            raise NotLineByLine
        chunk.append(line)
        held += len(line)
        if held >= CHUNK_CHARACTERS:
            yield chunk
            chunk, held = [], 0
        if not reader.next_item():
            break
    if chunk:
        yield chunk
