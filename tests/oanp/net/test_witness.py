"""``oanp witness``: keygen's key file and verifier key, serve's refusals before it listens, and
the witness served as a process, cosigning a growing log over HTTP and keeping its state
across a restart."""

from __future__ import annotations

import base64
import json
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from oanp.audit.merkle import EMPTY_ROOT, consistency_proof, leaf_hash, root
from oanp.net import cli
from oanp.net.witness import (
    StateFile,
    WitnessServer,
    listen_address,
    read_signer_key,
    write_signer_key,
)
from oanp.tlog import (
    Checkpoint,
    Cosigner,
    LogRecord,
    NoteSigner,
    Witness,
    cosignature_verifier,
    log_verifiers,
    origin_hash,
    parse_signer_key,
    parse_verifier_key,
    sign_checkpoint,
    verify_checkpoint,
    verify_cosignature,
)
from tests.support.processes import free_port, product_free_environment, spawn, tail, terminate
from tests.support.waiting import fail, wait_for

ORIGIN = "example.com/log"
LOG = NoteSigner(ORIGIN, Ed25519PrivateKey.from_private_bytes(bytes(range(32))))
LEAVES = [leaf_hash(f"entry {i}".encode()) for i in range(32)]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# keygen --------------------------------------------------------------------------------------


def test_keygen_writes_the_signer_key_and_prints_the_verifier_key(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "witness.key"
    name = "w.example/tést"
    code, out, err = run(capsys, "witness", "keygen", "--name", name, "--out", str(path))
    assert code == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    vkey = parse_verifier_key(out.strip())
    assert (vkey.name, vkey.sig_type) == (name, 0x04)
    cosigner = read_signer_key(path)
    assert cosigner.verifier_key == out.strip()
    assert err.count("\n") == 1
    assert cosigner.signer_key not in err


def test_keygen_keeps_an_existing_file_unless_forced(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "witness.key"
    path.write_text("kept\n")
    code, out, err = run(capsys, "witness", "keygen", "--name", "w", "--out", str(path))
    assert (code, out) == (2, "")
    assert err == f"oanp witness keygen: {path} exists: not overwritten (--force replaces it)\n"
    assert path.read_text() == "kept\n"
    code, out, _ = run(capsys, "witness", "keygen", "--name", "w", "--out", str(path), "--force")
    assert code == 0
    assert parse_signer_key(path.read_text().strip()).verifier_key == out.strip()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_keygen_refuses_a_name_no_key_may_have(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(capsys, "witness", "keygen", "--name", "a b", "--out", str(tmp_path / "k"))
    assert code == 2
    assert err.count("\n") == 1
    assert "--name 'a b'" in err
    assert not (tmp_path / "k").exists()


# serve's refusals, before it listens ----------------------------------------------------------


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "witness.key"
    write_signer_key(path, Cosigner("w.example/1", Ed25519PrivateKey.generate()))
    return path


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        (["--log", "nonsense"], "--log nonsense: a verifier key is"),
        (["--log", "w+00000000+BAAA"], "--log w+00000000+BAAA: "),
        (["--log", LOG.verifier_key, "--listen", "8090"], "--listen '8090': expected HOST:PORT"),
        (["--log", LOG.verifier_key, "--listen", "h:http"], "expected HOST:PORT"),
        (["--log", LOG.verifier_key, "--listen", "h:70000"], "expected HOST:PORT"),
    ],
)
def test_serve_refuses_a_flag_in_one_line(
    capsys: pytest.CaptureFixture[str],
    key_file: Path,
    tmp_path: Path,
    flags: list[str],
    reason: str,
) -> None:
    state = tmp_path / "state.json"
    code, _, err = run(
        capsys, "witness", "serve", "--key", str(key_file), "--state", str(state), *flags
    )
    assert code == 2
    assert err.startswith("oanp witness serve: ")
    assert reason in err
    assert err.count("\n") == 1


def test_serve_refuses_a_cosigner_key_as_a_log_key(
    capsys: pytest.CaptureFixture[str], key_file: Path, tmp_path: Path
) -> None:
    witness_vkey = parse_signer_key(key_file.read_text().strip()).verifier_key
    argv = ["witness", "serve", "--key", str(key_file), "--state", str(tmp_path / "s")]
    code, _, err = run(capsys, *argv, "--log", witness_vkey)
    assert code == 2
    assert "not an Ed25519 note key" in err


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "no such file"),
        ("not a key\n", "not a witness key file"),
        (LOG.verifier_key + "\n", "not a witness key file"),
    ],
)
def test_serve_refuses_a_key_file_it_cannot_cosign_with(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str | None, reason: str
) -> None:
    key = tmp_path / "witness.key"
    if content is not None:
        key.write_text(content)
    argv = ["witness", "serve", "--key", str(key), "--state", str(tmp_path / "s")]
    code, _, err = run(capsys, *argv, "--log", LOG.verifier_key)
    assert code == 2
    assert reason in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        "{}",
        '{"format": "oanp-witness-state/1", "logs": {"o": {"size": -1, "root": ""}}}',
        '{"format": "oanp-witness-state/1", "logs": {"o": {"size": 1}}}',
    ],
)
def test_serve_refuses_a_state_file_it_cannot_read(
    capsys: pytest.CaptureFixture[str], key_file: Path, tmp_path: Path, content: str
) -> None:
    state = tmp_path / "state.json"
    state.write_text(content)
    argv = ["witness", "serve", "--key", str(key_file), "--state", str(state)]
    code, _, err = run(capsys, *argv, "--log", LOG.verifier_key)
    assert code == 2
    assert "not a witness state file" in err
    assert err.count("\n") == 1


def test_serve_refuses_a_state_file_in_no_folder(
    capsys: pytest.CaptureFixture[str], key_file: Path, tmp_path: Path
) -> None:
    argv = ["witness", "serve", "--key", str(key_file), "--state", str(tmp_path / "no" / "s")]
    code, _, err = run(capsys, *argv, "--log", LOG.verifier_key)
    assert code == 2
    assert "its folder does not exist" in err


def test_listen_addresses_take_a_bracketed_ipv6_host() -> None:
    assert listen_address("127.0.0.1:8090") == ("127.0.0.1", 8090)
    assert listen_address("[::1]:0") == ("::1", 0)


def test_the_state_file_is_replaced_whole_and_reads_back(tmp_path: Path) -> None:
    state = StateFile(tmp_path / "state.json")
    assert state.load() == {}
    records = {ORIGIN: LogRecord(0, EMPTY_ROOT, "note\n")}
    state.save(records)
    assert state.load() == records
    assert json.loads(state.path.read_text())["logs"][ORIGIN]["size"] == 0
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


# The witness as a process ----------------------------------------------------------------------


def body(old: int, size: int, root_hash: bytes | None = None) -> str:
    """An add-checkpoint body from ``old`` to ``size``, proof included."""
    tree_root = root(LEAVES[:size]) if root_hash is None else root_hash
    note = sign_checkpoint(Checkpoint(ORIGIN, size, tree_root), [LOG])
    proof = consistency_proof(LEAVES[:size], old) if old <= size else []
    lines = "".join(base64.b64encode(node).decode() + "\n" for node in proof)
    return f"old {old}\n{lines}\n{note}"


class Served:
    """``oanp witness serve`` as a process of its own, on a free port (see :func:`start`)."""

    def __init__(self, tmp_path: Path, key: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.argv = [
            sys.executable,
            "-m",
            "oanp.net.cli",
            "witness",
            "serve",
            "--key",
            str(key),
            "--state",
            str(tmp_path / "state.json"),
            "--log",
            LOG.verifier_key,
            "--listen",
            f"127.0.0.1:{self.port}",
        ]
        self.log_path = tmp_path / "witness.log"
        self.process: subprocess.Popen[bytes] | None = None


def start(witness: Served) -> None:
    """Start the witness, and wait until it answers on its port."""
    process = spawn(witness.argv, product_free_environment(), witness.log_path, append=True)
    witness.process = process

    def answers() -> bool:
        """the witness answering on its port"""
        try:
            httpx.get(f"{witness.url}/{'0' * 64}/checkpoint", timeout=2)
        except httpx.TransportError:
            if process.poll() is not None:
                fail(f"the witness exited:\n{tail(witness.log_path)}")
            return False
        return True

    wait_for(answers, 30, interval=0.1, message=lambda: tail(witness.log_path))


def stop(witness: Served) -> None:
    """SIGTERM, as a supervisor stops it."""
    if witness.process is not None:
        terminate(witness.process)
        assert witness.process.returncode == 0, tail(witness.log_path)
        witness.process = None


@pytest.fixture
def served(tmp_path: Path, key_file: Path) -> Iterator[Served]:
    witness = Served(tmp_path, key_file)
    start(witness)
    try:
        yield witness
    finally:
        stop(witness)


def test_the_witness_cosigns_a_growing_log_and_keeps_it_across_a_restart(
    served: Served, key_file: Path, tmp_path: Path
) -> None:
    witness = cosignature_verifier(parse_signer_key(key_file.read_text().strip()).verifier_key)
    with httpx.Client(base_url=served.url, timeout=10) as client:
        for old, size in [(0, 0), (0, 5), (5, 9)]:
            answer = client.post("/add-checkpoint", content=body(old, size))
            assert answer.status_code == 200, answer.text
            checkpoint_body = Checkpoint(ORIGIN, size, root(LEAVES[:size])).body()
            assert verify_cosignature(answer.text, checkpoint_body, witness) > 0
        stale = client.post("/add-checkpoint", content=body(5, 9))
        assert (stale.status_code, stale.text) == (409, "9\n")
        assert stale.headers["content-type"] == "text/x.tlog.size"
        forked = client.post("/add-checkpoint", content=body(9, 9, bytes(32)))
        assert forked.status_code == 422
        served_checkpoint = client.get(f"/{origin_hash(ORIGIN)}/checkpoint")
        assert served_checkpoint.status_code == 200
        verified = verify_checkpoint(served_checkpoint.text, [LOG.verifier(), witness])
        assert verified.checkpoint.size == 9
        assert verified.signed_by == (ORIGIN, witness.name)
        assert client.get(f"/{origin_hash('example.com/other')}/checkpoint").status_code == 404

    stop(served)
    assert json.loads((tmp_path / "state.json").read_text())["logs"][ORIGIN]["size"] == 9
    start(served)
    with httpx.Client(base_url=served.url, timeout=10) as client:
        again = client.get(f"/{origin_hash(ORIGIN)}/checkpoint")
        assert again.text == served_checkpoint.text
        stale = client.post("/add-checkpoint", content=body(5, 9))
        assert (stale.status_code, stale.text) == (409, "9\n")
        assert client.post("/add-checkpoint", content=body(9, 9)).status_code == 200


def test_the_witness_answers_what_it_does_not_serve(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=10) as client:
        assert client.post("/checkpoint", content="x").status_code == 404
        assert client.get("/add-checkpoint").status_code == 404
        unknown = NoteSigner("example.com/other", Ed25519PrivateKey.generate())
        note = sign_checkpoint(Checkpoint("example.com/other", 0, EMPTY_ROOT), [unknown])
        assert client.post("/add-checkpoint", content=f"old 0\n\n{note}").status_code == 404
        assert client.post("/add-checkpoint", content="old x\n\n").status_code == 400
        too_large = client.post("/add-checkpoint", content=b"x" * (2 << 20))
        assert too_large.status_code == 413


def test_racing_requests_from_one_size_are_cosigned_one_at_most(
    key_file: Path, tmp_path: Path
) -> None:
    # The spec's race: two requests checked against the same recorded size. Checked and
    # recorded under one lock, the second sees the first's record and gets 409; neither can
    # roll the other back.
    witness = Witness([read_signer_key(key_file)], log_verifiers([LOG.verifier_key]))
    state = StateFile(tmp_path / "state.json")
    server = WitnessServer(("127.0.0.1", 0), witness, state, {})
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/add-checkpoint"
    try:
        assert httpx.post(url, content=body(0, 5)).status_code == 200
        size = 5
        barrier = threading.Barrier(2)

        def submit(new_size: int, old: int) -> tuple[int, int]:
            barrier.wait()
            return new_size, httpx.post(url, content=body(old, new_size)).status_code

        with ThreadPoolExecutor(2) as pool:
            for _ in range(10):
                answers = list(pool.map(submit, [size + 1, size + 2], [size, size]))
                cosigned = [new_size for new_size, status in answers if status == 200]
                assert len(cosigned) == 1, answers
                assert sorted(status for _, status in answers) == [200, 409]
                size = cosigned[0]
                assert state.load()[ORIGIN].size == size
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
