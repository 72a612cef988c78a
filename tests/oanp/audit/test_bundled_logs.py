"""A bundle's logs checked from their lines, as workers check them, make the report one pass
makes: every check, in order, seen once, and the same counts, whatever the bundle.

Every bundle of ``test_audit_stream`` (the good, the tampered, the malformed) is laid out a log
a line, as :class:`oanp.audit.BundleWriter` writes bundles, and verified with a lines map that
checks the lines in this process, as a worker would, beside the one pass without it. Where the
lines cannot say what one pass says (a log over several lines, a line that is not JSON, a file
cut short), the stream is read again in one pass, and ``on_check`` still sees each check once.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from oanp.audit import Check, NotStreamable, Report, verify_bundle_stream, verify_log
from oanp.audit.bundled_logs import CheckedLog, LinesTask, check_log_lines
from oanp.audit.jsonstream import StreamError
from oanp.audit.report import NO_RULES
from oanp.wire.canonical import JsonObject
from oanp.wire.profiles import PROFILES
from tests.oanp.audit.test_audit_stream import BAD, GOOD, _write
from tests.support.factories.logs import THREE_SESSIONS, bundle_of, jwks, session_log


def one_log_a_line(bundle: JsonObject) -> str:
    """``bundle`` in its members' order, laid out as a writer lays it out: each log of its
    ``sessions`` on a line of its own, the comma between two logs ending the first one's."""
    members = []
    for key, value in bundle.items():
        if key == "sessions" and isinstance(value, list) and value:
            logs = ",\n".join(json.dumps(log, separators=(",", ":")) for log in value)
            members.append(f'"sessions":[\n{logs}\n]')
        else:
            members.append(f"{json.dumps(key)}:{json.dumps(value, separators=(',', ':'))}")
    return "{" + ",".join(members) + "}\n"


class InThisProcess:
    """A lines map that checks each chunk here, as a worker would, counting the lines."""

    def __init__(self) -> None:
        self.lines = 0

    def __call__(
        self, task: LinesTask, chunks: Iterator[list[str]]
    ) -> Iterable[list[CheckedLog | None]]:
        for chunk in chunks:
            self.lines += len(chunk)
            yield task(chunk)


class Rewound(io.StringIO):
    """A stream that counts how often it is read again from an earlier place."""

    seeks = 0

    def seek(self, offset: int, whence: int = 0) -> int:
        self.seeks += 1
        return super().seek(offset, whence)


Outcome = tuple[list[Check], list[Check], str, int]


def verified(text: str, *, keep_passing: bool = False, **options: Any) -> tuple[Outcome, Report]:
    """Every check ``on_check`` saw, the checks kept, then the summary or what was raised, and
    how many reports were made."""
    seen: list[Check] = []
    report = Report(keep_passing=keep_passing, on_check=seen.append)
    try:
        verify_bundle_stream(Rewound(text), report=report, **options)
    except (NotStreamable, StreamError) as exc:
        return (seen, report.checks, f"{type(exc).__name__}: {exc}", report.made), report
    return (seen, report.checks, report.summary(), report.made), report


def apart(text: str, **options: Any) -> tuple[Outcome, InThisProcess, int]:
    lines = InThisProcess()
    stream = Rewound(text)
    seen: list[Check] = []
    report = Report(keep_passing=False, on_check=seen.append)
    try:
        verify_bundle_stream(stream, report=report, lines_map=lines, **options)
    except (NotStreamable, StreamError) as exc:
        said = f"{type(exc).__name__}: {exc}"
    else:
        said = report.summary()
    return (seen, report.checks, said, report.made), lines, stream.seeks


CASES = [*GOOD, *BAD]


@pytest.mark.parametrize("make", CASES)
def test_logs_a_line_checked_apart_make_the_report_of_one_pass(make):
    bundle, options = make()
    text = one_log_a_line(bundle)
    one_pass, report = verified(text, **options)
    found, lines, seeks = apart(text, **options)
    assert found == one_pass
    if seeks == 0:  # not read again: every log one pass checked was checked from its line
        assert lines.lines == report.sessions_total


@pytest.mark.parametrize("make", GOOD)
def test_a_good_bundle_a_log_a_line_is_checked_apart_in_one_reading(make):
    bundle, options = make()
    found, lines, seeks = apart(one_log_a_line(bundle), **options)
    assert seeks == 0
    assert lines.lines == len(bundle["sessions"]) > 0
    assert found[2].startswith("VERIFIED") or found[2].endswith("sessions pass I1-I7")


@pytest.mark.parametrize("make", CASES)
def test_a_bundle_laid_out_otherwise_is_read_again_to_the_report_of_one_pass(make):
    bundle, options = make()
    text = json.dumps(bundle, indent=1)
    one_pass, _ = verified(text, **options)
    found, _, seeks = apart(text, **options)
    assert found == one_pass
    assert seeks <= 1


@pytest.mark.parametrize("make", GOOD[:3])
def test_a_report_that_keeps_everything_gets_the_audits_of_one_pass(make):
    bundle, options = make()
    text = one_log_a_line(bundle)
    _, whole = verified(text, keep_passing=True, **options)
    kept = verify_bundle_stream(io.StringIO(text), lines_map=InThisProcess(), **options)
    assert kept.checks == whole.checks
    assert kept.audits == whole.audits
    assert len(kept.audits) == len(bundle["sessions"])


WRITTEN = _write().decode()


def _cuts(text: str) -> list[int]:
    sessions = text.index('"sessions":[')
    return sorted({*range(sessions, len(text), 173), *range(len(text) - 12, len(text))})


def test_a_bundle_cut_anywhere_gets_what_one_pass_says_of_it():
    for cut in _cuts(WRITTEN):
        one_pass, _ = verified(WRITTEN[:cut])
        found, _, _ = apart(WRITTEN[:cut])
        assert found == one_pass, cut


def _second_log(edit: Any) -> str:
    lines = WRITTEN.split("\n")
    edited = edit(lines[2])
    assert edited != lines[2]
    lines[2] = edited
    return "\n".join(lines)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(_second_log(lambda t: t.replace('"seq":1}', '"seq":01}', 1)), id="bad-number"),
        pytest.param(_second_log(lambda t: t.replace('"seq":1}', '"seq":NaN}', 1)), id="nan"),
        pytest.param(_second_log(lambda t: t.replace('"seq":1}', '"seq":1e400}', 1)), id="1e400"),
        pytest.param(_second_log(lambda t: t.replace('"seq":1}', '"seq":1,"seq":1}', 1)), id="dup"),
        pytest.param(_second_log(lambda t: t.replace('"seq":1}', '"seq":1 1}', 1)), id="two"),
        pytest.param(_second_log(lambda t: t[:-3] + t[-2:]), id="bracket-missing"),
        pytest.param(_second_log(lambda t: t.rstrip(",") + " 7,"), id="a-value-after"),
        pytest.param(_second_log(lambda t: '{"log":[]},'), id="no-session-id"),
        pytest.param(_second_log(lambda t: "7,"), id="a-number"),
        pytest.param(_second_log(lambda t: t.replace(',"log":[', ',\n"log":[', 1)), id="two-lines"),
        pytest.param(_second_log(lambda t: t.replace("},{", "}, {", 1)), id="spaced"),
        pytest.param(_second_log(lambda t: t + " "), id="space-after-comma"),
        pytest.param(WRITTEN.replace("},\n{", "}\n,{", 1), id="comma-first"),
        pytest.param(WRITTEN.replace("},\n{", "},{", 1), id="two-logs-a-line"),
    ],
)
def test_a_log_line_one_pass_reads_otherwise_gets_what_one_pass_says(text):
    assert text != WRITTEN
    one_pass, _ = verified(text)
    found, _, _ = apart(text)
    assert found == one_pass


def test_a_line_that_is_not_one_whole_log_is_left_to_the_reader():
    keys = jwks()
    good, bad, trailing = WRITTEN.split("\n")[1].rstrip(","), '{"session_id":', '{"a":1} 2'
    found = check_log_lines(keys, PROFILES, NO_RULES, False, [good, bad, trailing, "[1]"])
    assert [f is None for f in found] == [False, True, True, True]
    checked = found[0]
    assert checked is not None
    assert checked.log.session_id == THREE_SESSIONS[0].session_id
    assert checked.log.entries == len(checked.log.leaves) > 0
    assert [ok for _, ok, _ in checked.checks] == [True] * 8
    assert checked.counts[:3] == (checked.log.entries, checked.log.entries, 1)
    assert checked.audits == []


def test_a_report_read_again_keeps_what_it_held_before():
    text = json.dumps(bundle_of(), indent=1)  # read again: its logs span many lines
    log = session_log(THREE_SESSIONS[0])  # an agreement, and no key given: I6 fails

    def both(**options: Any) -> tuple[list[Check], list[Check], str]:
        seen: list[Check] = []
        report = Report(keep_passing=False, on_check=seen.append)
        verify_log(log, None, report=report)
        verify_bundle_stream(io.StringIO(text), report=report, **options)
        return seen, report.checks, report.summary()

    one_pass = both()
    assert [c.name for c in one_pass[1]] == ["session sess-sfo-jfk: I6"]
    assert one_pass[2] == "39/39 entries valid, 2/3 agreements valid, 3/4 sessions pass I1-I7"
    assert both(lines_map=InThisProcess()) == one_pass
