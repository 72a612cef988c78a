"""The ``oanp`` command: the demo's published trace, its bundle, and ``verify`` exit codes.

``verify`` exits 0 when everything verifies, 1 when a check fails (and prints it), 2 when an
input cannot be read (a message on stderr, never a traceback).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, example, given, settings

from oanp.net import cli
from oanp.net.arguments import parse_issue
from tests.support.factories.logs import (
    NO_DEAL,
    SEED,
    SFO_JFK,
    SteppingClock,
    bundle_of,
    counter_ids,
    jwks,
    self_dealing_log,
    session_log,
)
from tests.support.numbers import LANDMARKS, NOT_NUMBERS, is_json_number, number_spellings, reading

PRIVATE_LIMITS = ("420", "280")  # the buyer's true_ceiling and the merchant's floor_price


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write_json(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value, indent=1), encoding="utf-8")
    return path


@pytest.fixture
def pinned_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo with its key, salts, ids and clock fixed, so its bytes are the same every run.

    A real run's hashes, signatures and ids are random hex and base64: one run in three
    contains "420" or "280" by chance, so a byte-level search for the private limits is only
    meaningful on pinned bytes.
    """
    clock = SteppingClock()
    monkeypatch.setattr(cli, "new_ulid", counter_ids("01DEMO"))
    monkeypatch.setattr(cli, "secrets", SimpleNamespace(token_bytes=lambda n: b"\x07" * n))
    monkeypatch.setattr(
        cli,
        "Ed25519PrivateKey",
        SimpleNamespace(generate=lambda: Ed25519PrivateKey.from_private_bytes(SEED)),
    )
    monkeypatch.setattr(cli, "datetime", SimpleNamespace(now=lambda tz=None: clock()))


# oanp demo -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "buyer    offer.propose  round 1: 320",
        "merchant offer.counter  round 1: 370",
        "arbiter  round.verdict  round 1: fair (opening_moves), buyer 320, merchant 370, spread 50",
        "buyer    offer.propose  round 2: 340",
        "merchant offer.accept   round 2: 340",
        "arbiter  session.agree  340 USD",
        "Settled at 340 USD in 2 rounds.",
        "VERIFIED: 9/9 entries valid, 1/1 agreements valid, 1/1 sessions pass I1-I7",
    ],
)
def test_the_demo_prints_the_published_trace(capsys, line):
    code, out, _ = run(capsys, "demo")
    assert code == 0
    assert line in out


def test_the_demo_prints_the_trace_in_order(capsys):
    _, out, _ = run(capsys, "demo")
    steps = ["round 1: 320", "round 1: 370", "fair (opening_moves)", "round 2: 340", "accept"]
    positions = [out.index(step) for step in steps]
    assert positions == sorted(positions)


def test_the_demo_json_lines_never_contain_the_private_limits(capsys, pinned_demo):
    code, out, _ = run(capsys, "demo", "--json")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 9
    for number, line in enumerate(lines, start=1):
        for limit in PRIVATE_LIMITS:
            assert limit not in line, f"line {number} holds {limit}: {line}"


def test_the_demo_json_report_never_contains_the_private_limits(capsys, pinned_demo):
    _, _, err = run(capsys, "demo", "--json")
    assert "9/9 entries valid, 1/1 agreements valid" in err
    for limit in PRIVATE_LIMITS:
        assert limit not in err


def test_an_unpinned_demo_json_carries_no_private_value(capsys):
    # Random bytes may spell "420" inside a hash; no value of the log may be a limit.
    _, out, _ = run(capsys, "demo", "--json")
    for line in out.splitlines():
        for value in _leaves(json.loads(line)):
            assert value not in (420, 280, "true_ceiling", "floor_price", "budget_cap")


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [*value, *(leaf for v in value.values() for leaf in _leaves(v))]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def test_the_demo_json_lines_are_the_log_of_the_bundle(capsys, tmp_path):
    bundle_path = tmp_path / "bundle.json"
    _, out, _ = run(capsys, "demo", "--json", "--bundle", str(bundle_path))
    bundle = json.loads(bundle_path.read_text(encoding="utf-8"))
    assert [json.loads(line) for line in out.splitlines()] == bundle["sessions"][0]["log"]


def test_the_demo_json_lines_verify_as_a_log(capsys, tmp_path):
    bundle_path = tmp_path / "bundle.json"
    _, out, _ = run(capsys, "demo", "--json", "--bundle", str(bundle_path))
    log = tmp_path / "log.jsonl"
    log.write_text(out, encoding="utf-8")
    keys = write_json(tmp_path / "jwks.json", json.loads(bundle_path.read_text())["jwks"])
    code, report, _ = run(capsys, "verify", str(log), "--jwks", str(keys))
    assert (code, report.splitlines()[-1][:9]) == (0, "VERIFIED:")


def test_the_demo_bundle_verifies(capsys, tmp_path):
    bundle_path = tmp_path / "bundle.json"
    assert run(capsys, "demo", "--bundle", str(bundle_path))[0] == 0
    code, out, _ = run(capsys, "verify", str(bundle_path))
    assert code == 0
    assert out.splitlines()[-1] == (
        "VERIFIED: 9/9 entries valid, 1/1 agreements valid, 1/1 sessions pass I1-I7"
    )


def test_the_demo_says_where_the_bundle_went(capsys, tmp_path):
    bundle_path = tmp_path / "bundle.json"
    _, out, _ = run(capsys, "demo", "--bundle", str(bundle_path))
    assert f"Audit bundle written to {bundle_path}" in out


# oanp verify: 0 and 1 ------------------------------------------------------------------------


@pytest.fixture
def bundle_file(tmp_path: Path) -> Path:
    return write_json(tmp_path / "bundle.json", bundle_of())


def test_verify_passes_a_bundle(capsys, bundle_file):
    code, out, _ = run(capsys, "verify", str(bundle_file))
    assert code == 0
    assert "FAIL" not in out


def test_verify_exits_1_and_names_the_check_a_tampered_bundle_fails(capsys, bundle_file):
    text = bundle_file.read_text(encoding="utf-8")
    assert text.count('"price": 370,') == 1
    bundle_file.write_text(text.replace('"price": 370,', '"price": 371,'), encoding="utf-8")
    code, out, _ = run(capsys, "verify", str(bundle_file))
    assert code == 1
    assert (
        "FAIL session sess-sfo-jfk: hash chain: entry 4: entry_hash does not match its contents"
        in out.splitlines()
    )
    assert out.splitlines()[-1].startswith("FAILED: 29/30 entries valid")


def test_verify_exits_1_for_a_bundle_signed_by_a_key_not_in_jwks(capsys, tmp_path, bundle_file):
    stranger = write_json(tmp_path / "other.json", {"keys": []})
    code, out, _ = run(capsys, "verify", str(bundle_file), "--jwks", str(stranger))
    assert code == 1
    assert "FAIL checkpoint signature: unknown_kid" in out


def test_verify_passes_a_log_with_its_keys(capsys, tmp_path):
    log = write_json(tmp_path / "log.json", session_log())
    keys = write_json(tmp_path / "jwks.json", jwks())
    assert run(capsys, "verify", str(log), "--jwks", str(keys))[0] == 0


def test_verify_exits_1_for_a_log_without_keys(capsys, tmp_path):
    log = write_json(tmp_path / "log.json", session_log())
    code, out, _ = run(capsys, "verify", str(log))
    assert code == 1
    assert "no key set to verify the agreement with" in out


def test_verify_exits_1_and_names_roles_distinct_for_an_agent_in_both_seats(capsys, tmp_path):
    log = write_json(tmp_path / "log.json", self_dealing_log())
    keys = write_json(tmp_path / "jwks.json", jwks())
    code, out, _ = run(capsys, "verify", str(log), "--jwks", str(keys))
    assert code == 1
    assert [line for line in out.splitlines() if line.startswith("FAIL ")] == [
        "FAIL session sess-sfo-jfk: I2: fail "
        "(roles_distinct: the buyer 'buyer-001' names itself as the merchant)"
    ]


def test_verify_exits_1_for_a_cut_log(capsys, tmp_path):
    log = write_json(tmp_path / "log.json", session_log()[:-1])
    keys = write_json(tmp_path / "jwks.json", jwks())
    code, out, _ = run(capsys, "verify", str(log), "--jwks", str(keys))
    assert code == 1
    assert "without session.agree" in out


def test_verify_since_passes_a_later_bundle(capsys, tmp_path):
    earlier = bundle_of([SFO_JFK])
    old = write_json(tmp_path / "old.json", earlier)
    new = write_json(tmp_path / "new.json", bundle_of(previous=[earlier["checkpoint"]]))
    code, out, _ = run(capsys, "verify", str(new), "--since", str(old))
    assert code == 0
    assert "ok   earlier export is a prefix" in out


def test_verify_since_exits_1_for_a_rewritten_history(capsys, tmp_path):
    old = write_json(tmp_path / "old.json", bundle_of([SFO_JFK]))
    new = write_json(tmp_path / "new.json", bundle_of([NO_DEAL, SFO_JFK]))
    code, out, _ = run(capsys, "verify", str(new), "--since", str(old))
    assert code == 1
    assert "FAIL earlier export is a prefix" in out


# oanp extract --------------------------------------------------------------------------------


def test_an_extracted_session_verifies(capsys, tmp_path, bundle_file):
    subset = tmp_path / "subset.json"
    code, _, _ = run(
        capsys, "extract", str(bundle_file), "--session", NO_DEAL.session_id, "-o", str(subset)
    )
    assert code == 0
    code, out, _ = run(capsys, "verify", str(subset))
    assert code == 0
    assert "ok   inclusion proofs: 12/12 entries proven in the signed tree of 30" in out


def test_extract_exits_2_for_an_unknown_session(capsys, tmp_path, bundle_file):
    code, _, err = run(
        capsys, "extract", str(bundle_file), "--session", "sess-x", "-o", str(tmp_path / "o")
    )
    assert (code, err) == (2, "oanp: not in the bundle: sess-x\n")


# Strategies by name --------------------------------------------------------------------------

NEGOTIATE = ("negotiate", "--merchant", "merchant-sfo", "--item", "route=SFO-JFK")


@pytest.mark.parametrize("name", ["tit-for-tat", "titfortat"])
def test_the_agent_commands_take_a_strategys_name_or_its_first_spelling(name, tmp_path):
    parse = cli._parser().parse_args
    assert parse([*NEGOTIATE, "--strategy", name]).strategy == "tit-for-tat"
    merchant = ["merchant", "--state", str(tmp_path / "state.json"), "--strategy", name]
    assert parse(merchant).strategy == "tit-for-tat"


def test_an_unknown_strategy_exits_2_naming_the_known_ones(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main([*NEGOTIATE, "--strategy", "gambler"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'gambler'" in err
    assert "'linear', 'tit-for-tat')" in err


# Unreadable input: exit 2, one line on stderr ------------------------------------------------


def _garbage(d: Path) -> list[str]:
    (d / "garbage.json").write_bytes(b"\xff\xfe\x00\x9c garbage \x81")
    return ["verify", str(d / "garbage.json")]


def _empty(d: Path) -> list[str]:
    (d / "empty.json").write_bytes(b"")
    return ["verify", str(d / "empty.json")]


def _not_json(d: Path) -> list[str]:
    (d / "text.json").write_text("this is not json\nnor is this\n")
    return ["verify", str(d / "text.json")]


def _neither(d: Path) -> list[str]:
    return ["verify", str(write_json(d / "other.json", {"hello": "world"}))]


def _a_number(d: Path) -> list[str]:
    return ["verify", str(write_json(d / "number.json", 42))]


def _a_list_of_numbers(d: Path) -> list[str]:
    return ["verify", str(write_json(d / "numbers.json", [1, 2, 3]))]


def _missing(d: Path) -> list[str]:
    return ["verify", str(d / "missing.json")]


def _directory(d: Path) -> list[str]:
    return ["verify", str(d)]


def _duplicate_key(d: Path) -> list[str]:
    (d / "dup.json").write_text('{"format": "a", "format": "b"}')
    return ["verify", str(d / "dup.json")]


def _jwks_not_jwks(d: Path) -> list[str]:
    bundle = write_json(d / "bundle.json", bundle_of([SFO_JFK]))
    return ["verify", str(bundle), "--jwks", str(write_json(d / "j.json", {"kty": "OKP"}))]


def _jwks_garbage(d: Path) -> list[str]:
    bundle = write_json(d / "bundle.json", bundle_of([SFO_JFK]))
    (d / "j.json").write_bytes(b"\x00\x01\x02")
    return ["verify", str(bundle), "--jwks", str(d / "j.json")]


def _jwks_missing(d: Path) -> list[str]:
    bundle = write_json(d / "bundle.json", bundle_of([SFO_JFK]))
    return ["verify", str(bundle), "--jwks", str(d / "nowhere.json")]


def _since_a_log(d: Path) -> list[str]:
    bundle = write_json(d / "bundle.json", bundle_of([SFO_JFK]))
    return ["verify", str(bundle), "--since", str(write_json(d / "log.json", session_log()))]


def _since_on_a_log(d: Path) -> list[str]:
    log = write_json(d / "log.json", session_log())
    return ["verify", str(log), "--since", str(write_json(d / "b.json", bundle_of([SFO_JFK])))]


def _with_price(text: str, literal: str) -> str:
    """``text`` with the merchant's first counter, 370, spelled ``literal``."""
    assert text.count('"price": 370,') == 1
    return text.replace('"price": 370,', f'"price": {literal},')


def _huge_exponent(d: Path) -> list[str]:
    log = d / "log.json"
    log.write_text(_with_price(json.dumps(session_log(), indent=1), "1e1000000000000000000"))
    return ["verify", str(log)]


def _tiny_number_in_keys(d: Path) -> list[str]:
    bundle = write_json(d / "bundle.json", bundle_of([SFO_JFK]))
    (d / "j.json").write_text('{"keys": [], "n": -1e-400}')
    return ["verify", str(bundle), "--jwks", str(d / "j.json")]


def _extract_a_log(d: Path) -> list[str]:
    log = write_json(d / "log.json", session_log())
    return ["extract", str(log), "--session", SFO_JFK.session_id, "-o", str(d / "out.json")]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        pytest.param(_garbage, "garbage.json", id="garbage-bytes"),
        pytest.param(_empty, "empty.json", id="empty-file"),
        pytest.param(_not_json, "not JSON nor JSON lines", id="not-json"),
        pytest.param(_neither, "expected an audit bundle, a list of log entries", id="neither"),
        pytest.param(_a_number, "expected an audit bundle", id="a-number"),
        pytest.param(_a_list_of_numbers, "expected an audit bundle", id="numbers"),
        pytest.param(_missing, "missing.json", id="missing-file"),
        pytest.param(_directory, "directory", id="directory"),
        pytest.param(_duplicate_key, "duplicate key 'format'", id="duplicate-key"),
        pytest.param(_jwks_not_jwks, "not a JWKS document", id="jwks-not-jwks"),
        pytest.param(_jwks_garbage, "j.json", id="jwks-garbage"),
        pytest.param(_jwks_missing, "nowhere.json", id="jwks-missing"),
        pytest.param(_since_a_log, "log.json: not an audit bundle", id="since-a-log"),
        pytest.param(_since_on_a_log, "--since compares two audit bundles", id="since-on-a-log"),
        pytest.param(_extract_a_log, "log.json: not an audit bundle", id="extract-a-log"),
        pytest.param(
            _huge_exponent,
            "log.json: number out of range at $[3].envelope.payload.price: beyond ±(2^53-1)",
            id="huge-exponent",
        ),
        pytest.param(
            _tiny_number_in_keys,
            "j.json: number too small at $.n: is not 0, but a double rounds it to 0",
            id="tiny-number",
        ),
    ],
)
def test_unreadable_input_exits_2_with_a_message(capsys, tmp_path, make, message):
    code, out, err = run(capsys, *make(tmp_path))
    assert code == 2
    assert out == ""
    assert err.startswith("oanp: ")
    assert message in err
    assert err.count("\n") == 1


# The installed console script ----------------------------------------------------------------


def _console_script() -> str:
    script = Path(sys.executable).with_name("oanp")
    assert script.is_file(), f"the oanp console script is not installed next to {sys.executable}"
    return str(script)


def test_the_console_script_verifies_a_bundle(bundle_file):
    done = subprocess.run(
        [_console_script(), "verify", str(bundle_file)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("VERIFIED: 30/30 entries valid")


def test_the_console_script_exits_2_without_a_traceback(tmp_path):
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(b"\xff\xfe garbage")
    done = subprocess.run(
        [_console_script(), "verify", str(garbage)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert done.stderr.startswith("oanp: ")
    assert "Traceback" not in done.stderr


def test_the_console_script_exits_2_for_a_number_nothing_hashes(tmp_path):
    """The issue's number, in a bundle read as it streams: one line on stderr, no traceback."""
    bundle = tmp_path / "bundle.json"
    text = json.dumps(bundle_of([SFO_JFK]), indent=1)
    bundle.write_text(_with_price(text, "1e1000000000000000000"), encoding="utf-8")
    done = subprocess.run(
        [_console_script(), "verify", str(bundle)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert done.stderr == (
        f"oanp: {bundle}: number out of range at "
        "$.sessions[0].log[3].envelope.payload.price: beyond ±(2^53-1)\n"
    )


# Numbers however spelled: 0, 1 or 2 as the README says -------------------------------------


@cache
def _published_files() -> tuple[str, str, str]:
    """A session log, its keys, and a bundle of it, as JSON text."""
    return (
        json.dumps(session_log(), indent=1),
        json.dumps(jwks()),
        json.dumps(bundle_of([SFO_JFK]), indent=1),
    )


def _landmarks(test: Any) -> Any:
    for literal in (*LANDMARKS, *NOT_NUMBERS, "370.000", "3.7e2", "-0"):
        test = example(literal=literal)(test)
    return test


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@_landmarks
@given(literal=number_spellings())
def test_verify_reads_a_price_however_spelled_or_exits_2_naming_it(capsys, tmp_path, literal):
    """370 however spelled verifies (a log hashes numbers by value), another number fails
    (1), and what is not a number or is one nothing hashes makes the file unreadable (2),
    whether it is read whole (a log) or as it streams (a bundle)."""
    log, keys, bundle = _published_files()
    (tmp_path / "jwks.json").write_text(keys, encoding="utf-8")
    expected = reading(literal) if is_json_number(literal) else None
    for name, text, options in (
        ("log.json", log, ["--jwks", str(tmp_path / "jwks.json")]),
        ("bundle.json", bundle, []),
    ):
        path = tmp_path / name
        path.write_text(_with_price(text, literal), encoding="utf-8")
        code, out, err = run(capsys, "verify", str(path), *options)
        if expected is None or isinstance(expected, str):
            assert code == 2, out
            assert err.startswith(f"oanp: {path}: ")
            assert err.count("\n") == 1
            if expected is not None:
                assert f"{expected} at " in err
                assert ".envelope.payload.price: " in err
        else:
            assert err == ""
            assert code == (0 if expected == 370 else 1), out
            assert out.splitlines()[-1].startswith("VERIFIED" if code == 0 else "FAILED")


def test_an_issue_option_holding_a_comma_is_written_as_a_json_string() -> None:
    issue = parse_issue('support=choice:"24/7, phone", mail ,none')
    assert issue == {
        "name": "support",
        "kind": "choice",
        "options": ["24/7, phone", "mail", "none"],
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('support=choice:"24/7, phone,none', "a quoted value must be a JSON string"),
        ('support=choice:"24/7"phone,none', "options are separated by commas"),
        ("support=choice:gold,,none", "options must be 2 to 16 distinct strings"),
    ],
)
def test_a_choice_written_wrong_is_refused_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=re.escape(message)):
        parse_issue(text)
