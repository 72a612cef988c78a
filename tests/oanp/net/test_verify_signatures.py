"""``oanp verify`` and party signatures (§17): a bundle or a downloaded log of signed sessions
reports its signed entries; ``--require-signatures`` fails on an unsigned party entry; a log's
malformed ``party_keys`` is an unreadable input, said in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oanp.audit import build_bundle
from oanp.net import cli
from tests.support.factories.logs import (
    ARBITER_ID,
    BUNDLED_AT,
    arbiter_key,
    jwks,
    party_keys,
    session_log,
    signed_log,
)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def bundle_file(tmp_path: Path, *logs: list) -> Path:
    key = arbiter_key()
    written = build_bundle(
        logs=list(logs),
        jwks=jwks(key),
        key=key,
        arbiter_id=ARBITER_ID,
        created_at=BUNDLED_AT,
        party_keys=party_keys(),
    )
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(written), encoding="utf-8")
    return path


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_signed_bundle_verifies_and_says_how_many_entries_were_signed(
    capsys, tmp_path: Path, jobs: str
) -> None:
    path = bundle_file(tmp_path, signed_log())
    code, out = run(capsys, "verify", str(path), "--jobs", jobs)
    assert code == 0, out
    assert (
        "ok   session sess-sfo-jfk: party signatures: 6/6 signed entries valid, 0 unsigned" in out
    )
    assert out.rstrip().endswith("signed entries: 6/6 valid")
    assert run(capsys, "verify", str(path), "--require-signatures")[0] == 0


def test_require_signatures_fails_a_bundle_with_an_unsigned_party_entry(
    capsys, tmp_path: Path
) -> None:
    path = bundle_file(tmp_path, signed_log(), session_log())
    assert run(capsys, "verify", str(path))[0] == 0
    code, out = run(capsys, "verify", str(path), "--require-signatures")
    assert code == 1
    assert "FAIL session sess-sfo-jfk: party signatures: 0/0 signed entries valid" in out


def test_a_downloaded_log_carries_its_parties_keys(capsys, tmp_path: Path) -> None:
    document = {"session_id": "sess-sfo-jfk", "entries": signed_log(), "jwks": jwks()}
    path = tmp_path / "log.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    code, out = run(capsys, "verify", str(path))
    assert code == 1  # signed, and no keys to check them with
    assert "is not a key agent" in out
    path.write_text(json.dumps({**document, "party_keys": party_keys()}), encoding="utf-8")
    code, out = run(capsys, "verify", str(path))
    assert code == 0, out
    path.write_text(json.dumps({**document, "party_keys": {"buyer-001": 7}}), encoding="utf-8")
    code, out = run(capsys, "verify", str(path))
    assert code == 2
    assert "party_keys" in out
    assert "Traceback" not in out
