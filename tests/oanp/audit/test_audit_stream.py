"""A bundle verified one session at a time finds exactly what verifying it whole finds.

Every good bundle and every bad one this project has (``docs/vectors/``, and the tampering
cases of ``test_audit``) is written out as JSON and read back by
:func:`oanp.audit.verify_bundle_stream`, with a large buffer and through reads of a few
characters: the checks (name, ok, detail), in order, and the summary are those of
:func:`oanp.audit.verify_bundle` on the same bundle. A bundle laid out so that one pass cannot
check it is refused with ``NotStreamable`` and verifies whole; ``oanp verify`` prints what
either path finds.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from oanp.audit import (
    BUNDLE_DEPTH,
    BundleWriter,
    Check,
    NotStreamable,
    Report,
    extract,
    verify_bundle,
    verify_bundle_stream,
)
from oanp.audit.jsonstream import StreamError
from oanp.net import cli
from oanp.wire.canonical import JsonObject, json_value, read_json
from tests.oanp.audit import test_audit
from tests.oanp.audit.test_audit import check, failures, flip_hex
from tests.oanp.audit.test_jsonstream import Trickle
from tests.oanp.net.test_cli import run, write_json
from tests.oanp.test_vectors import BUNDLE, EXTENDED, by_kind
from tests.support.factories.logs import (
    ARBITER_ID,
    BUNDLED_AT,
    LINEAR_DEAL,
    NO_DEAL,
    SFO_JFK,
    THREE_SESSIONS,
    Scenario,
    arbiter_key,
    bundle_of,
    jwks,
    other_key,
    session_log,
)

#: The members in the order :class:`BundleWriter` writes them.
WRITER_ORDER = ("format", "jwks", "proofs", "sessions", "manifest", "checkpoint", "consistency")
Case = tuple[JsonObject, dict[str, Any]]
Outcome = tuple[list[tuple[str, bool, str]], str]


def outcome(report: Report) -> Outcome:
    """What a report says: every check, in order, and the summary."""
    return [(c.name, c.ok, c.detail) for c in report.checks], report.summary()


def streamed(text: str, *, most: int | None = None, **options: Any) -> Report:
    return verify_bundle_stream(Trickle(text, most), **options)


Arrange = Callable[[JsonObject], JsonObject]


def laid_out(*order: str) -> Arrange:
    """A bundle with its members in ``order`` (those it lacks left out)."""

    def arrange(bundle: JsonObject) -> JsonObject:
        assert set(bundle) <= set(order)
        return {key: bundle[key] for key in order if key in bundle}

    return arrange


def moved(key: str, *, after: str) -> Arrange:
    """The writer's order with ``key`` moved to just after ``after``."""
    order = [k for k in WRITER_ORDER if k != key]
    order.insert(order.index(after) + 1, key)
    return laid_out(*order)


def manifest_reversed(bundle: JsonObject) -> JsonObject:
    """The manifest's members in reverse JCS order."""
    return {**bundle, "manifest": dict(reversed(list(bundle["manifest"].items())))}


def earlier() -> JsonObject:
    return bundle_of([SFO_JFK])


def later() -> JsonObject:
    return bundle_of(THREE_SESSIONS, previous=[earlier()["checkpoint"]])


def subset() -> JsonObject:
    return extract(bundle_of(), [NO_DEAL.session_id, LINEAR_DEAL.session_id])


def edited(make: Callable[[], JsonObject], edit: Callable[[JsonObject], Any]) -> JsonObject:
    bundle = make()
    edit(bundle)
    return bundle


def case(make: Callable[[], JsonObject], **options: Any) -> Callable[[], Case]:
    return lambda: (make(), options)


def parameter_sets(test: Callable[..., Any]) -> list[Any]:
    """The cases one of ``test_audit``'s parametrized tests runs, first one of each value."""
    (mark,) = [m for m in test.pytestmark if m.name == "parametrize"]  # type: ignore[attr-defined]
    seen: list[Any] = []
    kept = []
    for params in mark.args[1]:
        if params.values[0] not in seen:
            seen.append(params.values[0])
            kept.append(params)
    return kept


# The cases -----------------------------------------------------------------------------------

GOOD = [
    pytest.param(case(bundle_of), id="three-sessions"),
    pytest.param(case(earlier), id="one-session"),
    pytest.param(case(subset), id="subset"),
    pytest.param(case(lambda: extract(bundle_of(), [SFO_JFK.session_id])), id="subset-first"),
    pytest.param(case(bundle_of, jwks=jwks()), id="keys-given"),
    pytest.param(case(lambda: bundle_of(key=other_key())), id="another-arbiters-own-keys"),
    pytest.param(case(later), id="later"),
    pytest.param(case(later, since=earlier()), id="later-since"),
    pytest.param(case(bundle_of, since=earlier()), id="since-without-consistency"),
    pytest.param(case(lambda: BUNDLE), id="vector-bundle"),
    pytest.param(case(lambda: EXTENDED), id="vector-extended"),
    pytest.param(case(lambda: EXTENDED, since=BUNDLE), id="vector-extended-since"),
]


def _swap_in_old_checkpoint(bundle: JsonObject) -> None:
    bundle["checkpoint"] = earlier()["checkpoint"]


def _swap_in_old_manifest(bundle: JsonObject) -> None:
    old = earlier()
    bundle["checkpoint"], bundle["manifest"] = old["checkpoint"], old["manifest"]


def _stranger_consistency(bundle: JsonObject) -> None:
    bundle["consistency"][0]["checkpoint"] = bundle_of([NO_DEAL])["checkpoint"]


def _flipped_consistency(bundle: JsonObject) -> None:
    proof = bundle["consistency"][0]["proof"]
    proof[0] = flip_hex(proof[0])


def _entry_not_an_object(sub: JsonObject) -> None:
    sub["sessions"][0]["log"][3] = "not an entry"


BAD = [
    *(
        pytest.param(case(lambda t=p.values[0]: edited(bundle_of, t)), id=f"tampered-{p.id}")
        for p in parameter_sets(test_audit.test_a_tampered_bundle_fails_the_check_that_covers_it)
    ),
    *(
        pytest.param(case(lambda t=p.values[0]: edited(subset, t)), id=f"subset-{p.id}")
        for p in parameter_sets(test_audit.test_a_subset_with_a_wrong_inclusion_proof_fails)
    ),
    *(
        pytest.param(case(p.values[0], since=earlier()), id=f"since-{p.id}")
        for p in parameter_sets(test_audit.test_a_later_bundle_that_rewrote_history_fails_since)
    ),
    *(
        pytest.param(
            case(lambda c=c: c["input"]["bundle"], since=c["input"].get("since")),
            id=f"vector-{c['name']}",
        )
        for c in by_kind("bundle")
    ),
    pytest.param(case(lambda: bundle_of(key=other_key()), jwks=jwks()), id="another-arbiter"),
    pytest.param(case(bundle_of, jwks={"keys": []}), id="no-trusted-key"),
    pytest.param(case(lambda: {**earlier(), "format": "oanp-audit-bundle/9"}), id="another-format"),
    pytest.param(case(lambda: edited(later, _swap_in_old_checkpoint)), id="old-checkpoint"),
    pytest.param(case(lambda: edited(later, _swap_in_old_manifest)), id="old-manifest"),
    pytest.param(case(lambda: edited(later, _stranger_consistency)), id="stranger-consistency"),
    pytest.param(case(lambda: edited(later, _flipped_consistency)), id="flipped-consistency"),
    pytest.param(
        case(lambda: extract(later(), [SFO_JFK.session_id]), since=earlier()), id="since-subset"
    ),
    pytest.param(
        case(later, since=bundle_of([SFO_JFK], key=other_key())), id="since-another-arbiter"
    ),
    pytest.param(
        case(lambda: edited(subset, lambda s: s["proofs"].update(tree_size=21))),
        id="subset-tree-size",
    ),
    pytest.param(case(lambda: edited(subset, _entry_not_an_object)), id="subset-entry-not-object"),
]


# Every bundle: the same checks, streamed or whole --------------------------------------------


@pytest.mark.parametrize(
    ("make", "ok"),
    [
        *(pytest.param(p.values[0], True, id=p.id) for p in GOOD),
        *(pytest.param(p.values[0], False, id=p.id) for p in BAD),
    ],
)
def test_a_streamed_bundle_gets_the_checks_and_summary_of_the_whole_one(make, ok):
    bundle, options = make()
    whole = verify_bundle(bundle, **options)
    assert whole.ok is ok, failures(whole)  # the good verify, the bad find something
    assert outcome(streamed(json.dumps(bundle, indent=1), **options)) == outcome(whole)
    assert outcome(streamed(json.dumps(bundle), most=61, **options)) == outcome(whole)


def _write(
    scenarios: Sequence[Scenario] = THREE_SESSIONS, *, prefixes: Sequence[JsonObject] = ()
) -> bytes:
    """A bundle as :class:`BundleWriter` writes it, byte for byte."""
    out = io.BytesIO()
    writer = BundleWriter(
        out, jwks=jwks(), key=arbiter_key(), arbiter_id=ARBITER_ID, prefixes=prefixes
    )
    for scenario in scenarios:
        writer.add(session_log(scenario))
    writer.finish(created_at=BUNDLED_AT, scope={"test": True})
    return out.getvalue()


def test_a_written_bundle_streams_at_every_buffer_boundary():
    text = _write().decode()
    whole = verify_bundle(json_value(read_json(text), max_depth=BUNDLE_DEPTH))
    assert whole.ok
    # One character per read: every character of the file is at some point the buffer's end.
    assert outcome(streamed(text, most=1)) == outcome(whole)


def test_a_subset_with_its_proofs_streams_at_every_buffer_boundary():
    sub = extract(earlier(), [SFO_JFK.session_id])
    whole = verify_bundle(sub)
    assert check(whole, "inclusion proofs") == (True, "9/9 entries proven in the signed tree of 9")
    assert outcome(streamed(json.dumps(sub), most=1)) == outcome(whole)


def test_a_written_bundle_has_the_one_pass_layout():
    lines = _write().decode().split("\n")
    assert lines[0].startswith('{"format":"oanp-audit-bundle/0.1","jwks":')
    assert lines[0].endswith('"proofs":null,"sessions":[')
    assert [json.loads(line.rstrip(","))["session_id"] for line in lines[1:4]] == [
        s.session_id for s in THREE_SESSIONS
    ]
    assert lines[4].startswith('],"manifest":{"arbiter_id":')


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param(p.values[0], id=p.id)
        for p in parameter_sets(test_audit.test_a_malformed_bundle_is_reported_not_raised)
        if p.id != "no-manifest"  # see the next test
    ],
)
def test_a_malformed_bundle_fails_the_same_checks_streamed(broken):
    bundle = edited(earlier, broken)
    whole = verify_bundle(bundle)
    stream = streamed(json.dumps(bundle))
    # The structure failure's detail names the reader's exception, which may differ.
    assert [(c.name, c.ok) for c in stream.checks] == [(c.name, c.ok) for c in whole.checks]
    assert stream.summary() == whole.summary()
    assert not stream.ok


def test_a_bundle_missing_its_manifest_fails_the_same_checks_streamed():
    bundle = edited(earlier, lambda b: b.pop("manifest"))
    assert outcome(streamed(json.dumps(bundle))) == outcome(verify_bundle(bundle))


def test_a_bundle_missing_its_sessions_is_read_whole_and_fails():
    # Its manifest then comes before any log: a one-pass reader cannot match its rows.
    bundle = edited(earlier, lambda b: b.pop("sessions"))
    with pytest.raises(NotStreamable, match="manifest comes before its logs"):
        streamed(json.dumps(bundle))
    assert failures(verify_bundle(bundle)) == {"bundle structure": "missing sessions"}


# --since: the earlier export is a prefix ------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "since", "ok"),
    [
        pytest.param(later, earlier, True, id="extends"),
        pytest.param(lambda: EXTENDED, lambda: BUNDLE, True, id="vectors"),
        pytest.param(lambda: bundle_of([NO_DEAL, SFO_JFK]), earlier, False, id="reordered"),
        pytest.param(lambda: bundle_of([NO_DEAL]), earlier, False, id="another-history"),
        pytest.param(later, lambda: bundle_of([]), True, id="since-empty"),
        pytest.param(later, later, True, id="since-itself"),
    ],
)
def test_since_finds_the_same_prefix_streamed(make, since, ok):
    bundle, old = make(), since()
    whole = verify_bundle(bundle, since=old)
    stream = streamed(json.dumps(bundle), most=97, since=old)
    assert check(stream, "earlier export is a prefix") == check(whole, "earlier export is a prefix")
    assert check(stream, "earlier export is a prefix")[0] is ok
    assert outcome(stream) == outcome(whole)


# Layouts ------------------------------------------------------------------------------------


NOT_STREAMABLE = [
    pytest.param(bundle_of, moved("format", after="consistency"), "format", id="format-last"),
    pytest.param(bundle_of, moved("format", after="jwks"), "format", id="format-second"),
    pytest.param(bundle_of, moved("jwks", after="sessions"), "keys", id="jwks-after-sessions"),
    pytest.param(bundle_of, moved("jwks", after="consistency"), "keys", id="jwks-last"),
    pytest.param(subset, moved("proofs", after="sessions"), "proofs", id="proofs-after-sessions"),
    pytest.param(subset, moved("proofs", after="consistency"), "proofs", id="proofs-last"),
    pytest.param(bundle_of, manifest_reversed, "JCS", id="manifest-reversed"),
    pytest.param(subset, manifest_reversed, "JCS", id="subset-manifest-reversed"),
]


@pytest.mark.parametrize(("make", "arrange", "why"), NOT_STREAMABLE)
def test_a_layout_one_pass_cannot_check_is_refused_and_verifies_whole(make, arrange, why):
    original = make()
    bundle = arrange(original)
    assert [list(bundle), list(bundle["manifest"])] != [list(original), list(original["manifest"])]
    with pytest.raises(NotStreamable, match=why):
        verify_bundle_stream(io.StringIO(json.dumps(bundle)))
    whole = verify_bundle(bundle)
    assert whole.ok, failures(whole)
    assert outcome(whole) == outcome(verify_bundle(original))


def test_a_tampered_bundle_in_such_a_layout_is_refused_too_and_fails_whole():
    bundle = moved("jwks", after="sessions")(edited(bundle_of, test_audit._bundle_drop_entry))
    with pytest.raises(NotStreamable):
        verify_bundle_stream(io.StringIO(json.dumps(bundle)))
    assert "session sess-lax-ord: complete" in failures(verify_bundle(bundle))


STREAMABLE = [
    pytest.param(
        case(
            lambda: laid_out("format", "checkpoint", "consistency", *WRITER_ORDER[1:5])(bundle_of())
        ),
        id="checkpoint-first",
    ),
    pytest.param(
        case(lambda: moved("proofs", after="consistency")(bundle_of())),
        id="null-proofs-last",
    ),
    pytest.param(case(lambda: edited(bundle_of, lambda b: b.pop("proofs"))), id="no-proofs"),
    pytest.param(
        case(lambda: edited(bundle_of, lambda b: b.pop("consistency"))), id="no-consistency"
    ),
    pytest.param(
        case(lambda: moved("jwks", after="sessions")(bundle_of()), jwks=jwks()),
        id="jwks-after-sessions-with-keys-given",
    ),
    pytest.param(
        case(lambda: moved("consistency", after="jwks")(later()), since=earlier()),
        id="consistency-first",
    ),
    pytest.param(
        case(lambda: laid_out("format", "checkpoint", *WRITER_ORDER[1:5], "consistency")(subset())),
        id="subset-checkpoint-first",
    ),
    pytest.param(
        case(
            lambda: {
                "format": "oanp-audit-bundle/0.1",
                "note": {"a": [1, 2.5]},
                **bundle_of(),
                "z": None,
            }
        ),
        id="unknown-members",
    ),
]


@pytest.mark.parametrize("make", STREAMABLE)
def test_another_layout_a_pass_can_check_streams_to_the_same_report(make):
    bundle, options = make()
    whole = verify_bundle(bundle, **options)
    assert whole.ok, failures(whole)
    assert outcome(streamed(json.dumps(bundle), most=97, **options)) == outcome(whole)


@pytest.mark.parametrize("make", [bundle_of, subset], ids=["whole", "subset"])
def test_a_manifest_before_the_sessions_streams_to_the_same_report(make):
    bundle = moved("manifest", after="proofs")(make())
    assert verify_bundle(bundle).ok
    try:
        stream = verify_bundle_stream(io.StringIO(json.dumps(bundle)))
    except NotStreamable:
        return  # refusing the layout would be right too
    assert outcome(stream) == outcome(verify_bundle(bundle))


# Subsets ------------------------------------------------------------------------------------


def test_an_extracted_subset_streams_with_every_entry_proven():
    sub = extract(later(), [NO_DEAL.session_id])
    assert list(sub)[:4] == ["format", "jwks", "proofs", "sessions"]
    stream = streamed(json.dumps(sub), most=13)
    assert stream.ok, failures(stream)
    assert check(stream, "inclusion proofs") == (
        True,
        "12/12 entries proven in the signed tree of 30",
    )
    assert "merkle root" not in [c.name for c in stream.checks]
    assert outcome(stream) == outcome(verify_bundle(sub))


# Not JSON -----------------------------------------------------------------------------------


def _cuts(text: str) -> list[int]:
    return sorted({*range(0, len(text), 211), *range(len(text) - 12, len(text))})


def test_a_truncated_bundle_never_verifies():
    text = _write().decode().rstrip()
    for cut in _cuts(text):
        try:
            report = streamed(text[:cut])
        except StreamError:
            continue
        assert not report.ok, cut


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(lambda t: t[: len(t) // 2], id="cut-in-half"),
        pytest.param(lambda t: t.rstrip()[:-1], id="last-brace-missing"),
        pytest.param(lambda t: t[:200], id="cut-in-the-keys"),
        pytest.param(lambda t: t.replace('],"manifest":', '] "manifest":'), id="missing-comma"),
    ],
)
def test_a_bundle_that_is_not_json_raises_stream_error(text):
    with pytest.raises(StreamError, match="at character"):
        streamed(text(_write().decode()))


# Reports that keep only failures -------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(case(bundle_of), id="good"),
        pytest.param(case(later, since=earlier()), id="since"),
        pytest.param(case(lambda: edited(bundle_of, test_audit._bundle_drop_entry)), id="bad"),
        pytest.param(case(lambda: edited(subset, test_audit._exchange)), id="bad-subset"),
    ],
)
@pytest.mark.parametrize("verify", ["stream", "whole"])
def test_a_lean_report_keeps_the_failures_and_shows_every_check(make, verify):
    bundle, options = make()

    def run_with(report: Report) -> Report:
        if verify == "whole":
            return verify_bundle(bundle, report=report, **options)
        return verify_bundle_stream(io.StringIO(json.dumps(bundle)), report=report, **options)

    full = run_with(Report())
    seen: list[Check] = []
    lean = Report(keep_passing=False, on_check=seen.append)
    assert run_with(lean) is lean
    assert seen == full.checks
    assert lean.checks == [c for c in full.checks if not c.ok]
    assert lean.failures == full.failures == len(lean.checks)
    assert lean.ok is full.ok
    assert lean.summary() == full.summary()
    assert lean.audits == []
    assert len(full.audits) == full.sessions_total > 0


def test_a_lean_report_of_a_good_bundle_keeps_nothing_but_its_counts():
    lean = Report(keep_passing=False)
    verify_bundle_stream(io.StringIO(_write().decode()), report=lean)
    assert lean.checks == []
    assert lean.ok
    assert lean.summary() == "30/30 entries valid, 2/2 agreements valid, 3/3 sessions pass I1-I7"


# oanp verify --------------------------------------------------------------------------------


def expected_lines(report: Report) -> list[str]:
    verdict = "VERIFIED" if report.ok else "FAILED"
    return [c.line() for c in report.checks] + [f"{verdict}: {report.summary()}"]


def test_cli_prints_what_verify_bundle_finds_in_a_written_bundle(capsys, tmp_path):
    path = tmp_path / "bundle.json"
    path.write_bytes(_write())
    code, out, err = run(capsys, "verify", str(path))
    assert (code, err) == (0, "")
    assert out.splitlines() == expected_lines(verify_bundle(cli.load_document(path)))
    assert out.splitlines()[-1].startswith("VERIFIED: 30/30 entries valid")


def test_cli_prints_what_verify_bundle_finds_in_a_tampered_written_bundle(capsys, tmp_path):
    path = tmp_path / "bundle.json"
    text = _write().decode()
    assert text.count('"price":370,') == 1
    path.write_text(text.replace('"price":370,', '"price":371,'), encoding="utf-8")
    code, out, _ = run(capsys, "verify", str(path))
    assert code == 1
    assert out.splitlines() == expected_lines(verify_bundle(cli.load_document(path)))
    assert "FAIL merkle root: 30 leaves against the signed root" in out.splitlines()


def test_cli_since_prints_what_verify_bundle_finds(capsys, tmp_path):
    old = write_json(tmp_path / "old.json", earlier())
    path = tmp_path / "new.json"
    path.write_bytes(_write(prefixes=[earlier()["checkpoint"]["statement"]]))
    code, out, _ = run(capsys, "verify", str(path), "--since", str(old))
    assert code == 0
    since = cli.load_document(old)
    assert out.splitlines() == expected_lines(verify_bundle(cli.load_document(path), since=since))
    assert "ok   earlier export is a prefix: its 9 entries are the first 9 of these 30" in out


@pytest.mark.parametrize(
    ("make", "arrange"),
    [
        pytest.param(bundle_of, moved("jwks", after="sessions"), id="jwks-after-sessions"),
        pytest.param(subset, moved("proofs", after="sessions"), id="proofs-after-sessions"),
        pytest.param(bundle_of, manifest_reversed, id="manifest-reversed"),
    ],
)
@pytest.mark.parametrize("tampered", [False, True], ids=["intact", "tampered"])
def test_cli_notes_a_reordered_bundle_then_verifies_it_whole(
    capsys, tmp_path, make, arrange, tampered
):
    bundle = arrange(make())
    if tampered:
        bundle["sessions"][0]["log"].pop()
    path = write_json(tmp_path / "bundle.json", bundle)
    code, out, _ = run(capsys, "verify", str(path))
    lines = out.splitlines()
    (note,) = [n for n, line in enumerate(lines) if line.startswith("note:")]
    assert str(path) in lines[note]
    expected = expected_lines(verify_bundle(cli.load_document(path)))
    assert lines[note + 1 :] == expected
    # Before the note: the checks the stream made before it met the layout, as they were made.
    assert lines[:note] == expected[:note]
    assert code == (1 if tampered else 0)
    assert expected[-1].startswith("FAILED" if tampered else "VERIFIED")


def test_cli_reads_a_bundle_that_does_not_start_with_its_format_whole(capsys, tmp_path):
    path = write_json(tmp_path / "bundle.json", moved("format", after="jwks")(bundle_of()))
    code, out, _ = run(capsys, "verify", str(path))
    assert code == 0
    assert out.splitlines() == expected_lines(verify_bundle(cli.load_document(path)))


def test_cli_refuses_a_truncated_bundle_as_unreadable(capsys, tmp_path):
    path = tmp_path / "bundle.json"
    data = _write()
    path.write_bytes(data[: len(data) // 2])
    code, _, err = run(capsys, "verify", str(path))
    assert code == 2
    assert err.startswith(f"oanp: {path}: ")


def test_cli_never_passes_a_truncated_bundle(capsys, tmp_path):
    path = tmp_path / "bundle.json"
    data = _write()
    path.write_bytes(data[: len(data) // 2])
    code, out, _ = run(capsys, "verify", str(path))
    assert code in (1, 2)
    assert "VERIFIED" not in out


# Appended after the document or given twice: never a pass ------------------------------------


def _stream_passes(text: str) -> bool:
    try:
        return streamed(text).ok
    except StreamError:
        return False


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda t: t.rstrip() + ' {"format": "x"}', id="second-document"),
        pytest.param(lambda t: t.rstrip() + "]", id="trailing-bracket"),
        pytest.param(lambda t: t.rstrip() + " garbage", id="trailing-garbage"),
    ],
)
def test_data_after_the_bundle_fails_it(edit):
    text = _write().decode()
    assert _stream_passes(text)
    assert not _stream_passes(edit(text))


@pytest.mark.parametrize("member", ["checkpoint", "consistency", "jwks", "sessions"])
def test_a_member_given_twice_fails_the_bundle(member):
    bundle = bundle_of()
    text = json.dumps(bundle)
    twice = text[:-1] + f", {json.dumps(member)}: {json.dumps(bundle[member])}}}"
    report = streamed(twice)
    assert failures(report)["bundle structure"] == f"ValueError: duplicate member {member!r}"


def test_cli_refuses_a_manifest_member_given_twice(capsys, tmp_path):
    text = _write().decode()
    assert text.count(',"tree_size":30}') == 1
    path = tmp_path / "bundle.json"
    path.write_text(text.replace(',"tree_size":30}', ',"tree_size":30,"tree_size":30}'))
    with pytest.raises(NotStreamable):
        streamed(path.read_text())
    code, out, err = run(capsys, "verify", str(path))
    assert code == 2
    assert "note:" in out
    assert err.startswith(f"oanp: {path}: ")  # the strict whole read refuses it
