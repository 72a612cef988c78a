"""``oanp verify --log URL`` against the live arbiter, whose worker's beat integrates the log
every second: an export's every entry found and proven in the log, with the key the arbiter
publishes; the next run, after more sessions, checks the log grew from the checkpoint kept; and
a faulty arbiter, signing another root at the same size or a larger tree than it serves, is
caught as a fork or a rollback, as is a key that is not the log's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.utils import timezone

from arbiter_app import selectors
from arbiter_app.models import Entry, Session
from arbiter_app.tlog.keys import log_signer
from oanp.net import cli
from oanp.tlog import Checkpoint, LogState, NoteSigner, parse_log_state, sign_checkpoint
from tests.conftest import LOG_ORIGIN, LiveServer
from tests.support.factories.agents import Agent, HttpNegotiation, make_agent
from tests.support.factories.sessions import sfo_jfk_agents
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = LOG_ORIGIN["OANP_LOG_ORIGIN"]
#: Integration runs every second; a loaded machine may take many.
INTEGRATED_WITHIN = 60


@pytest.fixture
def keys() -> tuple[Agent, Agent]:
    return make_agent("buyer-001", "buyer"), make_agent("merchant-sfo", "merchant")


@pytest.fixture
def log_key(settings: Any) -> NoteSigner:
    """The log's signing key, read from the database as a faulty arbiter could (made there
    first if no process of the arbiter has made it yet: every one signs with the stored key)."""
    settings.OANP_LOG_ORIGIN = ORIGIN
    return log_signer()


def negotiate(live_arbiter: LiveServer, keys: tuple[Agent, Agent], *session_ids: str) -> None:
    with live_arbiter.client() as client:
        for session_id in session_ids:
            buyer, merchant = sfo_jfk_agents()
            HttpNegotiation(client, buyer, merchant, *keys).run(session_id)


def integrated(live_arbiter: LiveServer) -> int:
    """The size of the served checkpoint, once it covers every entry committed so far."""
    total = Entry.objects.count()

    def covered() -> int:
        """the served checkpoint covers every committed entry"""
        with live_arbiter.client() as client:
            response = client.get("/oanp/v0.1/log/checkpoint")
        size = int(response.text.split("\n")[1]) if response.status_code == 200 else 0
        return size if size >= total else 0

    return wait_for(covered, INTEGRATED_WITHIN, interval=0.2)


def export(path: Path) -> Path:
    """Every session, exported as the dashboard exports them."""
    sessions = Session.objects.order_by("session_id")
    with path.open("wb") as out:
        writer = selectors.audit_bundle_writer(out, sessions=sessions)
        for _, log in selectors.logs_of(sessions):
            writer.add(log)
        writer.finish(created_at=timezone.now())
    return path


def verify(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = cli.main(["verify", *argv])
    captured = capsys.readouterr()
    assert captured.err == ""
    return code, captured.out


def test_an_export_is_in_the_log_and_the_log_only_grows(
    live_arbiter: LiveServer,
    celery_worker_process: Any,
    keys: tuple[Agent, Agent],
    log_key: NoteSigner,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    url = f"{live_arbiter.url}/oanp/v0.1/log"
    state = tmp_path / "log-state.json"
    negotiate(live_arbiter, keys, "sess-a", "sess-b")
    size = integrated(live_arbiter)
    assert size == 18
    bundle = export(tmp_path / "first.json")
    code, out = verify(capsys, str(bundle), "--log", url, "--state", str(state), "--jobs", "1")
    assert code == 0, out
    vkey = log_key.verifier_key
    assert out.splitlines()[0] == (
        f"note: the log's key is not pinned (--log-key): {live_arbiter.url}/.well-known/oanp.json "
        f"names it: {vkey}"
    )
    assert re.search(
        f"^ok   log checkpoint: {ORIGIN}, size 18, root \\S+, signed by {ORIGIN}$", out, re.M
    )
    assert f"ok   log consistency: no earlier checkpoint of this log in {state}" in out
    assert "ok   log inclusion: 18/18 entries in the log, each proven in the tree of 18" in out
    assert out.splitlines()[-1].startswith("VERIFIED: 18/18 entries valid")
    kept = parse_log_state(state.read_text()).kept(ORIGIN)
    assert kept is not None
    assert kept.splitlines()[1] == "18"

    # Later, more sessions: the log alone, then a new export, each from the checkpoint kept.
    negotiate(live_arbiter, keys, "sess-c")
    assert integrated(live_arbiter) == 27
    pinned = ["--log", url, "--log-key", vkey, "--state", str(state)]
    code, out = verify(capsys, *pinned)
    assert code == 0, out
    assert "not pinned" not in out
    assert (
        f"ok   log consistency: the tree of 18 kept in {state} is a prefix of this tree of 27"
        in out
    )
    assert out.splitlines()[-1] == f"VERIFIED: log {ORIGIN}, tree of 27: 3/3 checks passed"
    code, out = verify(capsys, str(export(tmp_path / "second.json")), *pinned, "--jobs", "1")
    assert code == 0, out
    assert f"ok   log consistency: the same tree of 27 as kept in {state}" in out
    assert "ok   log inclusion: 27/27 entries in the log, each proven in the tree of 27" in out
    # The first export's entries are still there, proven in the grown tree.
    code, out = verify(capsys, str(bundle), *pinned, "--jobs", "1")
    assert code == 0, out
    assert "ok   log inclusion: 18/18 entries in the log, each proven in the tree of 27" in out


def test_a_fork_a_rollback_and_a_key_not_the_logs_fail(
    live_arbiter: LiveServer,
    celery_worker_process: Any,
    keys: tuple[Agent, Agent],
    log_key: NoteSigner,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    url = f"{live_arbiter.url}/oanp/v0.1/log"
    state = tmp_path / "log-state.json"
    flags = ["--log", url, "--state", str(state)]
    negotiate(live_arbiter, keys, "sess-fork")
    assert integrated(live_arbiter) == 9
    assert verify(capsys, *flags)[0] == 0
    served = parse_log_state(state.read_text()).kept(ORIGIN)
    assert served is not None

    # The arbiter showed this client another tree of the same size, signed with its key.
    other = sign_checkpoint(Checkpoint(ORIGIN, 9, bytes(range(32))), [log_key])
    state.write_text(LogState().keeping(ORIGIN, other).format())
    code, out = verify(capsys, *flags)
    assert code == 1
    assert (
        f"FAIL log consistency: FORK: two trees of size 9 with different roots, both signed by "
        f"{ORIGIN}" in out
    )
    evidence = out.split("FORK", 1)[1]
    for note in (other, served):
        assert "\n".join(f"    {line}".rstrip() for line in note.splitlines()) in evidence
    assert parse_log_state(state.read_text()).kept(ORIGIN) == other
    assert out.splitlines()[-1] == f"FAILED: log {ORIGIN}, tree of 9: 2/3 checks passed"

    # It showed a larger tree before, and serves a smaller one now.
    larger = sign_checkpoint(Checkpoint(ORIGIN, 19, bytes(32)), [log_key])
    state.write_text(LogState().keeping(ORIGIN, larger).format())
    code, out = verify(capsys, *flags)
    assert code == 1
    assert (
        f"FAIL log consistency: ROLLBACK: a tree of 9, smaller than the tree of 19 kept in "
        f"{state}, both signed by {ORIGIN}" in out
    )
    assert "    19" in out.split("ROLLBACK", 1)[1]

    # A key of the log's name that is not its key verifies nothing the log serves.
    impostor = NoteSigner(ORIGIN, Ed25519PrivateKey.generate())
    state.unlink()
    code, out = verify(capsys, *flags, "--log-key", impostor.verifier_key)
    assert code == 1
    assert out.splitlines()[0].startswith("FAIL log checkpoint: note_unverified")
    assert not state.exists()
