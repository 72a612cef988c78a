"""A party's signing key file (docs/protocol.md §17), without a server: ``oanp keygen`` writes
one and prints its public JWK; ``--signing-key`` refuses a file no agent can sign with, in one
line (exit 2), before anything connects."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from oanp.net import cli
from oanp.wire.party_signatures import PartyKey, check_party_signature, sign_envelope
from oanp.wire.signing import PRIVATE_MEMBERS, SigningKey
from tests.support.processes import ROOT

ENVELOPE: dict[str, Any] = {
    "oanp_version": "0.1",
    "message_id": "01SIGNED",
    "session_id": "s-signed",
    "timestamp": "2026-04-28T09:00:00Z",
    "sender": {"role": "buyer", "agent_id": "buyer-001"},
    "type": "offer.propose",
    "payload": {"round": 1, "price": 320.5, "constraints_commit": "sha256:" + "ab" * 32},
}
#: The moment the checks below take an envelope as received, with its key in force.
RECEIVED = datetime(2026, 4, 28, 9, 0, 1, tzinfo=UTC)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def verifies(envelope: dict[str, Any], public_jwk: dict[str, Any]) -> str:
    """The kid that signed ``envelope``, checked as the arbiter checks it, with ``public_jwk``
    registered for its sender just before."""
    registered = PartyKey(
        envelope["sender"]["agent_id"], public_jwk, datetime(2026, 1, 1, tzinfo=UTC)
    )
    return check_party_signature(envelope, [registered], RECEIVED)


# oanp keygen ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "alg", "kty"), [((), "Ed25519", "OKP"), (("--alg", "ES256"), "ES256", "EC")]
)
def test_keygen_writes_a_private_key_that_signs_and_prints_its_public_key(
    capsys, tmp_path: Path, flags: tuple[str, ...], alg: str, kty: str
) -> None:
    path = tmp_path / "buyer.jwk"
    code, out, err = run(capsys, "keygen", "--out", str(path), *flags)
    assert code == 0, err
    assert out.count("\n") == 1  # one line, the JWK's
    public = json.loads(out)
    assert (public["alg"], public["kty"], public["use"]) == (alg, kty, "sig")
    assert not PRIVATE_MEMBERS & set(public)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = SigningKey.from_private_jwk(json.loads(path.read_text()))
    assert key.public_jwk() == public
    signed = sign_envelope(ENVELOPE, key)
    assert verifies(signed, public) == public["kid"]
    assert public["kid"] in err  # the note on stderr; stdout holds the JWK alone


def test_keygen_never_overwrites_a_key_file_unless_forced(capsys, tmp_path: Path) -> None:
    path = tmp_path / "buyer.jwk"
    path.write_text("the key of another agent\n")
    path.chmod(0o644)
    code, out, err = run(capsys, "keygen", "--out", str(path))
    assert (code, out) == (2, "")
    assert err == f"oanp keygen: {path} exists: not overwritten (--force replaces it)\n"
    assert path.read_text() == "the key of another agent\n"

    code, out, err = run(capsys, "keygen", "--out", str(path), "--force", "--alg", "ES256")
    assert code == 0, err
    key = SigningKey.from_private_jwk(json.loads(path.read_text()))
    assert key.public_jwk() == json.loads(out)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["buyer.jwk"]  # no temporary file left


@pytest.mark.parametrize("force", [(), ("--force",)], ids=["new", "forced"])
def test_keygen_exits_2_naming_a_file_it_cannot_write(
    capsys, tmp_path: Path, force: tuple[str, ...]
) -> None:
    path = tmp_path / "no-such-folder" / "buyer.jwk"
    code, out, err = run(capsys, "keygen", "--out", str(path), *force)
    assert (code, out) == (2, "")
    assert err == f"oanp keygen: {path}: cannot write it: No such file or directory\n"


def test_keygen_refuses_an_unknown_algorithm(capsys, tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["keygen", "--out", str(tmp_path / "k.jwk"), "--alg", "RS256"])
    assert exited.value.code == 2
    assert "invalid choice: 'RS256'" in capsys.readouterr().err
    assert not (tmp_path / "k.jwk").exists()


# --signing-key FILE --------------------------------------------------------------------------

KEY = SigningKey.from_ed25519_seed(bytes(range(32)))


def bad_key_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Each kind of file no agent can sign with, and what the message says of it."""
    wrong_d = {
        **KEY.private_jwk(),
        "d": SigningKey.from_ed25519_seed(b"\1" * 32).private_jwk()["d"],
    }
    files: dict[str, tuple[Any, str]] = {
        "missing": (None, "no such file (oanp keygen --out FILE makes one)"),
        "a folder": ("folder", "cannot read it: Is a directory"),
        "not text": (b"\xff\xfe\x00", "not a JWK file (not UTF-8 text)"),
        "not JSON": ("-----BEGIN PRIVATE KEY-----", "not a JWK file (not JSON)"),
        "a key set": ({"keys": [KEY.private_jwk()]}, "not a JWK (expected one JSON object"),
        "public only": (KEY.public_jwk(), "holds a public key only (no 'd')"),
        "d of another key": (wrong_d, "not a usable private key: private JWK member 'x'"),
        "RSA": ({"kty": "RSA", "n": "AQAB", "e": "AQAB", "d": "AQAB"}, "not a usable private"),
    }
    made: dict[str, tuple[Path, str]] = {}
    for number, (name, (content, message)) in enumerate(files.items()):
        path = tmp_path / f"key-{number}.jwk"
        if content == "folder":
            path.mkdir()
        elif isinstance(content, bytes):
            path.write_bytes(content)
        elif isinstance(content, str):
            path.write_text(content)
        elif content is not None:
            path.write_text(json.dumps(content))
        made[name] = (path, message)
    return made


BAD_KEY_FILES = [
    "missing",
    "a folder",
    "not text",
    "not JSON",
    "a key set",
    "public only",
    "d of another key",
    "RSA",
]
CONNECTION = ("--server", "http://127.0.0.1:9", "--api-key", "k", "--agent-id")
COMMANDS = {
    "negotiate": ("negotiate", *CONNECTION, "buyer-001", "--merchant", "m", "--item", "a=b"),
    "merchant": ("merchant", *CONNECTION, "m", "--floor", "280", "--ideal", "400", "--state"),
    "mcp": ("mcp", *CONNECTION, "buyer-001", "--role", "buyer"),
}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("kind", BAD_KEY_FILES)
def test_a_key_file_no_agent_can_sign_with_exits_2_with_one_line(
    capsys, tmp_path: Path, command: str, kind: str
) -> None:
    path, message = bad_key_files(tmp_path)[kind]
    argv = list(COMMANDS[command])
    if command == "merchant":
        argv.append(str(tmp_path / "state.json"))
    code, _, err = run(capsys, *argv, "--signing-key", str(path))
    assert code == 2
    assert err.startswith(f"oanp {command}: --signing-key {path}: {message}")
    assert err.count("\n") == 1
    assert not (tmp_path / "state.json").exists()  # refused before anything started


def test_the_command_refuses_a_public_key_file_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "public.jwk"
    path.write_text(json.dumps(KEY.public_jwk()))
    done = subprocess.run(
        [sys.executable, "-m", "oanp.net.cli", *COMMANDS["negotiate"], "--signing-key", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr == (
        f"oanp negotiate: --signing-key {path}: holds a public key only (no 'd'): signing "
        "needs the private JWK oanp keygen wrote\n"
    )


def test_the_signing_key_file_may_come_from_the_environment(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OANP_SIGNING_KEY", str(tmp_path / "absent.jwk"))
    code, _, err = run(capsys, *COMMANDS["mcp"])
    assert code == 2
    assert err.startswith(f"oanp mcp: --signing-key {tmp_path / 'absent.jwk'}: no such file")
