"""``oanp verify --log URL`` against a C2SP tiled log served from memory over HTTP: the
checkpoint's signature and its witnesses' quorum, the log's growth checked against the state
file (a fork and a rollback printed with both signed notes), every entry of a bundle found and
proven from the tiles, read only at the widths the checkpoint implies, and each flag or log it
cannot use a one-line refusal with exit code 2."""

from __future__ import annotations

import io
import json
import re
import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from oanp.audit.merkle import leaf_hash
from oanp.audit.report import Report
from oanp.net import cli
from oanp.net.log_audit import LogOptions, logged_entries, open_log
from oanp.tlog import Checkpoint, Cosigner, NoteSigner, parse_log_state, sign_checkpoint
from oanp.tlog.tree import (
    TILE_WIDTH,
    Tile,
    leaf_data,
    parse_tile_path,
    root_hash,
    tile_root,
    tile_stored,
)
from tests.support.processes import free_port

ROOT = Path(__file__).resolve().parents[3]
BUNDLE = ROOT / "docs" / "vectors" / "bundle.json"
SESSION = ROOT / "docs" / "vectors" / "session.json"
ORIGIN = "log.example/oanp-log"
LOG_KEY = NoteSigner(ORIGIN, Ed25519PrivateKey.from_private_bytes(bytes(range(32))))
W1 = Cosigner("w1.example/w", Ed25519PrivateKey.from_private_bytes(bytes([1]) * 32))
W2 = Cosigner("w2.example/w", Ed25519PrivateKey.from_private_bytes(bytes([2]) * 32))
W3 = Cosigner("w3.example/w", Ed25519PrivateKey.from_private_bytes(bytes([3]) * 32))


def bundled_leaves(path: Path = BUNDLE) -> list[bytes]:
    bundle = json.loads(path.read_text(encoding="utf-8"))
    return [
        leaf_data(session["session_id"], entry["seq"], entry["entry_hash"])
        for session in bundle["sessions"]
        for entry in session["log"]
    ]


def filler(start: int, count: int) -> list[bytes]:
    return [leaf_data(f"other-{n}", 1, f"sha256:{n:064x}") for n in range(start, start + count)]


class MemoryLog:
    """A tiled log's leaves and level hashes, its checkpoint as served, and what was asked."""

    def __init__(self, leaves: Sequence[bytes] = ()) -> None:
        self.data: list[bytes] = []
        self.levels: list[list[bytes]] = [[]]
        self.cosigners: list[Cosigner] = []
        self.checkpoint = ""
        self.paths: list[str] = []
        self.partial_tiles = True  # a log may drop a partial tile once the full one exists
        self.url = ""
        self.broken: dict[str, bytes] = {}
        self.append(leaves)

    def append(self, leaves: Sequence[bytes]) -> None:
        for data in leaves:
            self.data.append(data)
            self.levels[0].append(leaf_hash(data))
            level = 0
            while len(self.levels[level]) % TILE_WIDTH == 0:
                full = self.levels[level][-TILE_WIDTH:]
                if len(self.levels) == level + 1:
                    self.levels.append([])
                self.levels[level + 1].append(tile_root(full))
                level += 1
        self.sign()

    def hashes(self, level: int, start: int, count: int) -> list[bytes]:
        return self.levels[level][start : start + count]

    def sign(self, size: int | None = None, root: bytes | None = None) -> str:
        size = len(self.data) if size is None else size
        if root is None:
            root = root_hash(self.hashes, size)
        assert root is not None
        body = Checkpoint(ORIGIN, size, root).body()
        note = sign_checkpoint(Checkpoint(ORIGIN, size, root), [LOG_KEY])
        self.checkpoint = note + "".join(c.cosign(body, 1_790_000_000) for c in self.cosigners)
        return self.checkpoint

    def answer(self, path: str) -> tuple[int, bytes, str]:
        self.paths.append(path)
        if path == "/.well-known/oanp.json":
            log = {"origin": ORIGIN, "url": self.url, "verifier_key": LOG_KEY.verifier_key}
            return 200, json.dumps({"log": log}).encode(), "application/json"
        if path == "/log/checkpoint":
            return 200, self.checkpoint.encode(), "text/plain; charset=utf-8"
        name = path.removeprefix("/log/")
        if name in self.broken:
            return 200, self.broken[name], "application/octet-stream"
        try:
            tile = parse_tile_path(name)
        except ValueError:
            return 404, b"not found", "text/plain"
        full = Tile(tile.level, tile.index)
        dropped = tile.width and not self.partial_tiles and tile_stored(full, len(self.data))
        if not tile_stored(tile, len(self.data)) or dropped:
            return 404, b"no such tile", "text/plain"
        start = tile.index * TILE_WIDTH
        if tile.level is None:
            leaves = self.data[start : start + tile.count]
            body = b"".join(len(d).to_bytes(2, "big") + d for d in leaves)
        else:
            body = b"".join(self.hashes(tile.level, start, tile.count))
        return 200, body, "application/octet-stream"


@pytest.fixture
def memory_log() -> Iterator[tuple[MemoryLog, str]]:
    """A log of 600 leaves, the bundle's 21 among them (in three tiles, two levels), served
    on a free port; the URL of its prefix."""
    log = MemoryLog([*filler(0, 250), *bundled_leaves(), *filler(250, 329)])

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body, kind = log.answer(self.path)
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    log.url = f"http://127.0.0.1:{server.server_address[1]}/log"
    try:
        yield log, log.url
    finally:
        server.shutdown()
        server.server_close()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["verify", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def lines(out: str, prefix: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(prefix)]


# A bundle's entries, the checkpoint and its witnesses ------------------------------------------


def test_every_entry_of_a_bundle_is_found_and_proven_in_the_log(
    memory_log: tuple[MemoryLog, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log, url = memory_log
    state = tmp_path / "state.json"
    code, out, err = run(capsys, str(BUNDLE), "--log", url, "--state", str(state), "--jobs", "1")
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == (
        f"note: the log's key is not pinned (--log-key): {url.removesuffix('/log')}"
        f"/.well-known/oanp.json names it: {LOG_KEY.verifier_key}"
    )
    assert "ok   inclusion proofs: 21/21 entries proven in the signed tree of 21" in out
    root = re.search(r"root (\S+), signed", out)
    assert root is not None
    assert lines(out, "ok   log") == [
        f"ok   log checkpoint: {ORIGIN}, size 600, root {root.group(1)}, signed by {ORIGIN}",
        "ok   log witnesses: 0/0 cosigned, quorum 0: no --witness given, only the log's own "
        "signature vouches for it",
        f"ok   log consistency: no earlier checkpoint of this log in {state}",
        "ok   log inclusion: 21/21 entries in the log, each proven in the tree of 600",
    ]
    assert out.splitlines()[-2:] == [
        f"note: the checkpoint of size 600 kept in {state}",
        "VERIFIED: 21/21 entries valid, 1/1 agreements valid, 2/2 sessions pass I1-I7",
    ]
    assert parse_log_state(state.read_text()).kept(ORIGIN) == log.checkpoint
    # Read at the widths 600 implies, and no other: level 0's tile 2 is 88 wide, level 1's 2.
    partial = {p for p in log.paths if ".p/" in p}
    assert partial == {"/log/tile/0/002.p/88", "/log/tile/entries/002.p/88", "/log/tile/1/000.p/2"}


def test_a_pinned_key_is_the_only_one_trusted(
    memory_log: tuple[MemoryLog, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log, url = memory_log
    state = tmp_path / "state.json"
    flags = ["--log", url, "--state", str(state)]
    code, out, _ = run(capsys, *flags, "--log-key", LOG_KEY.verifier_key)
    assert code == 0
    assert "not pinned" not in out
    assert "/.well-known/oanp.json" not in log.paths
    assert out.splitlines()[-1] == f"VERIFIED: log {ORIGIN}, tree of 600: 3/3 checks passed"
    # A key of the same name that is not the log's: nothing it signed.
    impostor = NoteSigner(ORIGIN, Ed25519PrivateKey.from_private_bytes(bytes(32)))
    before = state.read_text()
    code, out, _ = run(capsys, *flags, "--log-key", impostor.verifier_key)
    assert code == 1
    assert out.splitlines() == [
        "FAIL log checkpoint: note_unverified: no signature from a trusted key (the log's key: "
        f"{impostor.verifier_key})",
        f"FAILED: log {url}: 0/1 checks passed",
    ]
    assert state.read_text() == before


def test_witnesses_count_against_the_quorum(
    memory_log: tuple[MemoryLog, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log, url = memory_log
    log.cosigners = [W1, W2]
    log.sign()
    flags = ["--log", url, "--state", str(tmp_path / "state.json")]
    witnesses = ["--witness", W1.verifier_key, "--witness", W2.verifier_key]
    code, out, _ = run(capsys, *flags, *witnesses)
    assert code == 0
    assert "ok   log witnesses: 2/2 cosigned, quorum 2" in out
    code, out, _ = run(capsys, *flags, *witnesses, "--witness", W3.verifier_key)
    assert code == 1
    assert f"FAIL log witnesses: 2/3 cosigned, quorum 3; none from {W3.name}" in out
    assert "left as it was: a check failed" in out
    code, out, _ = run(capsys, *flags, *witnesses, "--witness", W3.verifier_key, "--quorum", "2")
    assert code == 0
    assert f"ok   log witnesses: 2/3 cosigned, quorum 2; none from {W3.name}" in out
    # A cosignature that does not verify counts for nothing, and hides nothing else.
    other = W2.cosign(Checkpoint(ORIGIN, 7, bytes(32)).body(), 1_790_000_000)
    log.cosigners = [W1]
    log.checkpoint = log.sign() + other
    code, out, _ = run(capsys, *flags, *witnesses)
    assert code == 1
    assert f"FAIL log witnesses: 1/2 cosigned, quorum 2; from {W2.name} one that does not" in out
    assert "ok   log checkpoint" in out


# Consistency with the state --------------------------------------------------------------------


def test_a_log_that_grows_is_checked_against_the_last_checkpoint_kept(
    memory_log: tuple[MemoryLog, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log, url = memory_log
    state = tmp_path / "nested" / "state.json"
    flags = ["--log", url, "--state", str(state)]
    assert run(capsys, *flags)[0] == 0
    code, out, _ = run(capsys, *flags)
    assert code == 0
    assert f"ok   log consistency: the same tree of 600 as kept in {state}" in out
    log.append(filler(1000, 300))  # 900: a full level-0 tile more, and a level-1 hash
    log.paths.clear()
    code, out, _ = run(capsys, *flags)
    assert code == 0
    assert (
        f"ok   log consistency: the tree of 600 kept in {state} is a prefix of this tree of 900"
        in out
    )
    assert parse_log_state(state.read_text()).kept(ORIGIN) == log.checkpoint
    partial = {p for p in log.paths if ".p/" in p}
    assert partial == {"/log/tile/0/003.p/132", "/log/tile/1/000.p/3"}


def test_another_root_at_the_same_size_is_a_fork_shown_with_both_notes(
    memory_log: tuple[MemoryLog, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log, url = memory_log
    state = tmp_path / "state.json"
    flags = ["--log", url, "--state", str(state)]
    assert run(capsys, *flags)[0] == 0
    kept = log.checkpoint
    forked = log.sign(600, bytes(range(32)))
    code, out, _ = run(capsys, *flags)
    assert code == 1
    assert (
        f"FAIL log consistency: FORK: two trees of size 600 with different roots, both signed "
        f"by {ORIGIN}" in out
    )
    shown = out.split("FORK", 1)[1]
    for note in (kept, forked):
        assert "\n".join(f"    {line}".rstrip() for line in note.splitlines()) in shown
    assert f"  kept in {state}:" in shown
    assert f"  served by {url}/checkpoint:" in shown
    assert parse_log_state(state.read_text()).kept(ORIGIN) == kept
    assert out.splitlines()[-1].startswith("FAILED: log")


def test_a_larger_tree_that_does_not_extend_the_kept_one_is_a_fork_too(
    memory_log: tuple[MemoryLog, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log, url = memory_log
    state = tmp_path / "state.json"
    flags = ["--log", url, "--state", str(state)]
    assert run(capsys, *flags)[0] == 0
    kept = log.checkpoint
    rewritten = MemoryLog([*filler(5000, 600), *filler(0, 100)])  # another history, 700 long
    log.data, log.levels, log.checkpoint = rewritten.data, rewritten.levels, rewritten.checkpoint
    code, out, _ = run(capsys, *flags)
    assert code == 1
    assert re.search(
        "FAIL log consistency: FORK: this tree of 700 does not extend the tree of 600 kept in "
        f"{re.escape(str(state))}, both signed by {ORIGIN}: its first 600 leaves hash to ",
        out,
    )
    assert "    " + kept.splitlines()[2] in out
    assert parse_log_state(state.read_text()).kept(ORIGIN) == kept


def test_a_smaller_tree_than_the_kept_one_is_a_rollback(
    memory_log: tuple[MemoryLog, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log, url = memory_log
    state = tmp_path / "state.json"
    flags = ["--log", url, "--state", str(state)]
    assert run(capsys, *flags)[0] == 0
    kept = log.checkpoint
    smaller = log.sign(500)
    code, out, _ = run(capsys, *flags)
    assert code == 1
    assert (
        f"FAIL log consistency: ROLLBACK: a tree of 500, smaller than the tree of 600 kept in "
        f"{state}, both signed by {ORIGIN}" in out
    )
    assert "    " + kept.splitlines()[2] in out
    assert "    " + smaller.splitlines()[2] in out
    assert parse_log_state(state.read_text()).kept(ORIGIN) == kept


def test_a_kept_checkpoint_the_log_did_not_sign_is_no_evidence(
    memory_log: tuple[MemoryLog, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _, url = memory_log
    impostor = NoteSigner(ORIGIN, Ed25519PrivateKey.from_private_bytes(bytes(32)))
    forged = sign_checkpoint(Checkpoint(ORIGIN, 600, bytes(32)), [impostor])
    state = tmp_path / "state.json"
    state.write_text(
        json.dumps({"format": "oanp-log-state/1", "logs": {ORIGIN: {"checkpoint": forged}}})
    )
    code, out, _ = run(capsys, "--log", url, "--state", str(state))
    assert code == 1
    assert "FAIL log consistency: the checkpoint kept in" in out
    assert "FORK" not in out


# Entries the log does not show -----------------------------------------------------------------


def check_bundle(url: str, state: Path, now: datetime) -> Report:
    options = LogOptions(url, None, (), 0, state)
    out = io.StringIO()
    report = Report()
    with open_log(options, out, now=lambda: now) as log:
        log.check(report, BUNDLE)
    return report


def test_entries_not_in_the_log_yet_are_told_apart_from_entries_missing(
    memory_log: tuple[MemoryLog, str], tmp_path: Path
) -> None:
    log, url = memory_log
    log.sign(260)  # the checkpoint covers sess-sfo-jfk's 9 entries and 1 of sess-lax-ord's
    received = datetime(2026, 4, 28, 10, 0, 11, tzinfo=UTC)  # sess-lax-ord's last entry
    soon = check_bundle(url, tmp_path / "state.json", received + timedelta(seconds=3))
    [failed] = [c for c in soon.checks if not c.ok]
    assert failed.line() == (
        "FAIL log inclusion: 10/21 entries in the log of size 260; 11 (sess-lax-ord #2, "
        "sess-lax-ord #3, sess-lax-ord #4, sess-lax-ord #5, sess-lax-ord #6 and 6 more) "
        "received in the last 5 minutes, not integrated yet: the log takes entries within "
        "seconds, retry in a few seconds"
    )
    later = check_bundle(url, tmp_path / "state.json", received + timedelta(days=1))
    assert [c.line() for c in later.checks if not c.ok] == [
        "FAIL log inclusion: 10/21 entries in the log of size 260; 11 (sess-lax-ord #2, "
        "sess-lax-ord #3, sess-lax-ord #4, sess-lax-ord #5, sess-lax-ord #6 and 6 more) "
        "not in the log"
    ]
    assert not (tmp_path / "state.json").exists()


def test_tiles_that_do_not_hash_to_the_root_prove_nothing(
    memory_log: tuple[MemoryLog, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log, url = memory_log
    log.broken["tile/0/001"] = bytes(TILE_WIDTH * 32)  # where sess-sfo-jfk #7 on are
    code, out, _ = run(capsys, str(BUNDLE), "--log", url, "--state", str(tmp_path / "s"))
    assert code == 1
    assert (
        "FAIL log inclusion: 6/21 entries in the log of size 600; 15 (sess-sfo-jfk #7, "
        "sess-sfo-jfk #8, sess-sfo-jfk #9, sess-lax-ord #1, sess-lax-ord #2 and 10 more) whose "
        "inclusion proof does not verify" in out
    )
    log.broken["tile/0/001"] = b"short"
    code, out, _ = run(capsys, str(BUNDLE), "--log", url, "--state", str(tmp_path / "s"))
    assert code == 1
    assert "FAIL log inclusion: the log does not serve tile/0/001: 5 bytes, not 256 hashes" in out


def test_a_partial_tile_no_longer_served_is_read_from_its_full_tile(
    memory_log: tuple[MemoryLog, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log, url = memory_log
    log.append(filler(2000, 200))  # 800 leaves, but the checkpoint still says 600
    log.sign(600)
    log.partial_tiles = False
    code, out, _ = run(capsys, str(BUNDLE), "--log", url, "--state", str(tmp_path / "s"))
    assert code == 0, out
    assert "ok   log inclusion: 21/21 entries in the log, each proven in the tree of 600" in out
    assert "/log/tile/0/002" in log.paths


def test_the_entries_of_a_session_log_are_read_as_a_bundles(tmp_path: Path) -> None:
    session = json.loads(SESSION.read_text(encoding="utf-8"))
    entries = logged_entries(SESSION)
    assert [(e.session_id, e.seq) for e in entries] == [("sess-sfo-jfk", n) for n in range(1, 10)]
    assert [e.entry_hash for e in entries] == [e["entry_hash"] for e in session["entries"]]
    assert [str(e) for e in logged_entries(BUNDLE)][8:10] == ["sess-sfo-jfk #9", "sess-lax-ord #1"]
    as_lines = tmp_path / "log.jsonl"
    as_lines.write_text("".join(json.dumps(e) + "\n" for e in session["entries"]))
    assert logged_entries(as_lines) == entries
    as_array = tmp_path / "log.json"
    as_array.write_text(json.dumps(session["entries"]))
    assert logged_entries(as_array) == entries
    other = tmp_path / "other.json"
    other.write_text('{"seq": 1}')
    with pytest.raises(ValueError, match="neither a bundle nor a session log"):
        logged_entries(other)


# What it cannot use ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ([], "verify needs FILE, or --log URL to check the log alone"),
        (["--witness", W1.verifier_key], "--log-key, --witness, --quorum and --state go with"),
        (["--log", "ftp://x/log"], "--log ftp://x/log: not an http(s) URL"),
        (["--log", "http://x/log", "--log-key", W1.verifier_key], "--log-key: not an Ed25519"),
        (
            ["--log", "http://x/log", "--witness", LOG_KEY.verifier_key],
            f"--witness {LOG_KEY.verifier_key}: not an Ed25519 cosigner",
        ),
        (["--log", "http://x/log", "--quorum", "1"], "--quorum 1: between 0 and the 0 --witness"),
    ],
)
def test_flags_it_cannot_use_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    code, out, err = run(capsys, *flags)
    assert (code, out) == (2, "")
    assert err.startswith(f"oanp: {message}")
    assert err.count("\n") == 1


def test_a_log_it_cannot_reach_or_a_state_it_cannot_read_is_exit_2(
    memory_log: tuple[MemoryLog, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _, url = memory_log
    vkey = LOG_KEY.verifier_key
    closed = f"http://127.0.0.1:{free_port()}/log"
    code, out, err = run(capsys, str(BUNDLE), "--log", closed, "--state", str(tmp_path / "s"))
    assert (code, out) == (2, "")
    assert err.startswith(f"oanp: http://127.0.0.1:{closed.split(':')[2].split('/')[0]}/")
    assert err.count("\n") == 1
    code, out, err = run(capsys, "--log", f"{url}/nothing", "--state", str(tmp_path / "s"))
    well_known = f"{url.removesuffix('/log')}/.well-known/oanp.json"
    assert (code, out.splitlines()) == (
        2,
        [
            f"note: the log's key is not pinned (--log-key): {well_known} names it: "
            f"{LOG_KEY.verifier_key}",
            f"note: {well_known} names the log {url}, not {url}/nothing",
        ],
    )
    assert err == (
        f"oanp: {url}/nothing/checkpoint: no checkpoint (404): no log there, or none signed yet\n"
    )
    bad_url = ["--log", "http://127.0.0.1:port/log", "--log-key", vkey]
    code, out, err = run(capsys, *bad_url, "--state", str(tmp_path / "s"))
    assert (code, out) == (2, "")
    assert err == "oanp: http://127.0.0.1:port/log/checkpoint: Invalid port: 'port'\n"
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    code, out, err = run(capsys, "--log", url, "--state", str(bad))
    assert (code, out) == (2, "")
    assert err == f"oanp: --state {bad}: not a log state file: no format 'oanp-log-state/1'\n"
