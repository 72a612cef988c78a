"""The log's witnesses end to end (§18): ``oanp witness serve`` as a process of its own, with a
key made by ``oanp witness keygen`` and the arbiter's log key to follow, and the arbiter
configured with it. Sessions run in this process; each batch integrated is sent to the witness
as ``add-checkpoint``, from the size it last cosigned, and its cosignature is served with the
checkpoint. A witness that stops delays only its own cosignature, and says so in /readyz. A log
that signs two roots for one size is refused by the witness (422), and so is a checkpoint that
would take it backwards (409, with its size); the two notes of such a fork are kept in a
fixture, the evidence a client of the log prints."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.test import Client

from arbiter_app.log_records import (
    Cosignature,
    LogCheckpoint,
    LogLeaf,
    TreeHash,
    TreeState,
    WitnessRecord,
)
from arbiter_app.models import Entry
from arbiter_app.tlog import reads, witnesses
from arbiter_app.tlog.integrator import integrate
from arbiter_app.tlog.keys import log_signer
from oanp.audit.merkle import verify_consistency
from oanp.tlog import (
    AddCheckpoint,
    VerifiedCheckpoint,
    cosignature_verifier,
    note_verifier,
    origin_hash,
    parse_add_checkpoint,
    parse_note,
    verify_checkpoint,
    verify_cosignature,
)
from oanp.tlog.tree import TILE_WIDTH
from oanp.tlog.witness import SIZE_CONTENT_TYPE, add_checkpoint_body
from tests.support.factories.agents import Agent, ClientNegotiation
from tests.support.processes import (
    ROOT,
    free_port,
    product_free_environment,
    spawn,
    tail,
    terminate,
)
from tests.support.waiting import fail, wait_for

pytestmark = pytest.mark.django_db

LOG = "/oanp/v0.1/log"
WITNESS_NAME = "witness.test/w1"


# The witness as a process ---------------------------------------------------------------------


@dataclass
class WitnessProcess:
    """``oanp witness serve`` on a free port, following the arbiter's log (see :func:`start`)."""

    key: Path
    state: Path
    log_path: Path
    #: Its cosigning key, as ``oanp witness keygen`` printed it.
    verifier_key: str
    #: The arbiter's log key, the one ``--log`` it follows.
    log_key: str
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def name(self) -> str:
        return cosignature_verifier(self.verifier_key).name


def cli(*args: str) -> list[str]:
    """``oanp`` with ``args``, the checkout's own, as an operator runs it."""
    return [sys.executable, "-m", "oanp.net.cli", *args]


def keygen(name: str, out: Path) -> str:
    """``oanp witness keygen``: the key to ``out``, the verifier key it prints returned."""
    done = subprocess.run(
        cli("witness", "keygen", "--name", name, "--out", str(out)),
        cwd=ROOT,
        env=product_free_environment(),
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def start(witness: WitnessProcess) -> None:
    """Start the witness (again, on the same port and state), and wait until it answers."""
    argv = cli(
        "witness",
        "serve",
        *("--key", str(witness.key), "--state", str(witness.state), "--log", witness.log_key),
        *("--listen", f"127.0.0.1:{witness.port}"),
    )
    process = spawn(argv, product_free_environment(), witness.log_path, append=True)
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

    wait_for(answers, 60, interval=0.1, message=lambda: tail(witness.log_path))


def stop(witness: WitnessProcess) -> None:
    """SIGTERM, as a supervisor stops it."""
    if witness.process is not None:
        terminate(witness.process)
        assert witness.process.returncode == 0, tail(witness.log_path)
        witness.process = None


@pytest.fixture
def witness(db: None, tmp_path: Path, settings: Any) -> Iterator[WitnessProcess]:
    """A witness of the arbiter's log, running, and the arbiter configured with it alone: its
    cosignature is the quorum."""
    key = tmp_path / "witness.key"
    served = WitnessProcess(
        key=key,
        state=tmp_path / "witness.state",
        log_path=tmp_path / "witness.log",
        verifier_key=keygen(WITNESS_NAME, key),
        log_key=log_signer().verifier_key,
    )
    start(served)
    settings.OANP_WITNESSES = [f"{served.verifier_key} {served.url}"]
    settings.OANP_WITNESS_QUORUM = 1
    try:
        yield served
    finally:
        stop(served)


@dataclass(frozen=True)
class Exchange:
    """One ``add-checkpoint`` the arbiter made: what it sent, and the witness's answer."""

    sent: AddCheckpoint
    status: int
    answer: str


@pytest.fixture
def exchanges(monkeypatch: pytest.MonkeyPatch) -> list[Exchange]:
    """Every ``add-checkpoint`` the arbiter makes from now on, in order; those that got no
    answer (the witness away) are not in it."""
    made: list[Exchange] = []
    post = httpx.Client.post

    def recorded(self: httpx.Client, url: str, **kwargs: Any) -> httpx.Response:
        response = post(self, url, **kwargs)
        made.append(
            Exchange(parse_add_checkpoint(kwargs["content"]), response.status_code, response.text)
        )
        return response

    monkeypatch.setattr(httpx.Client, "post", recorded)
    return made


# The arbiter's side -----------------------------------------------------------------------------


def batch(client: Client, buyer: Agent, merchant: Agent, session_id: str) -> LogCheckpoint:
    """A session run to its agreement, its nine entries integrated: the checkpoint signed."""
    negotiation = ClientNegotiation(client, buyer, merchant, session_id, f"{session_id}-")
    negotiation.open()
    negotiation.finish()
    done = integrate()
    assert done.checkpoint is not None
    assert done.checkpoint.size == Entry.objects.count()
    return done.checkpoint


def served(client: Client, witness: WitnessProcess) -> VerifiedCheckpoint:
    """The checkpoint GET /log/checkpoint serves, verified with the log's key and the
    witness's (its cosignature need not be there)."""
    response = client.get(f"{LOG}/checkpoint")
    assert response.status_code == 200, response.content
    keys = [note_verifier(witness.log_key), cosignature_verifier(witness.verifier_key)]
    return verify_checkpoint(response.content, keys)


def cosignature_of(note: str, name: str) -> str:
    """The signature line of ``name`` in a signed note."""
    lines = [s.line() for s in parse_note(note).signatures if s.name == name]
    assert len(lines) == 1, note
    return lines[0]


def record_of(witness: WitnessProcess) -> WitnessRecord:
    return WitnessRecord.objects.get(name=witness.name)


def witness_checkpoint(witness: WitnessProcess) -> VerifiedCheckpoint:
    """The checkpoint the witness serves monitors: the last it cosigned, with both keys."""
    origin = log_signer().name
    response = httpx.get(f"{witness.url}/{origin_hash(origin)}/checkpoint", timeout=10)
    assert response.status_code == 200, response.text
    keys = [note_verifier(witness.log_key), cosignature_verifier(witness.verifier_key)]
    return verify_checkpoint(response.text, keys)


# Cosigned, and grown by consistency proofs ------------------------------------------------------


def test_each_checkpoint_is_cosigned_from_the_size_the_witness_last_cosigned(
    client: Client,
    buyer: Agent,
    merchant: Agent,
    witness: WitnessProcess,
    exchanges: list[Exchange],
) -> None:
    first = batch(client, buyer, merchant, "sess-w1")
    assert witnesses.submit(first) == 1
    assert [(e.sent.old_size, e.sent.proof, e.status) for e in exchanges] == [(0, (), 200)]
    checkpoint = served(client, witness)
    assert (checkpoint.checkpoint.size, checkpoint.checkpoint.root) == (first.size, first.root)
    assert checkpoint.signed_by == (log_signer().name, witness.name)
    # The witness's line verifies with its key alone, over the checkpoint's text.
    line = cosignature_of(checkpoint.note.format(), witness.name)
    assert verify_cosignature(line, checkpoint.note.text, witness.verifier_key) > 0
    assert record_of(witness).size == first.size

    # The next batch goes from the size the witness cosigned, with the RFC 6962 proof from it.
    second = batch(client, buyer, merchant, "sess-w2")
    assert witnesses.submit(second) == 1
    sent = exchanges[-1].sent
    assert (sent.old_size, exchanges[-1].status) == (first.size, 200)
    assert sent.proof
    assert verify_consistency(
        first.size, second.size, bytes(first.root), bytes(second.root), list(sent.proof)
    )
    assert served(client, witness).checkpoint.size == second.size
    assert witness_checkpoint(witness).checkpoint.root == bytes(second.root)

    # The arbiter's record says an older size than the witness's: a 409 names the witness's,
    # and the request is made once more from it.
    WitnessRecord.objects.filter(name=witness.name).update(size=first.size)
    third = batch(client, buyer, merchant, "sess-w3")
    assert witnesses.submit(third) == 1
    stale, retried = exchanges[-2:]
    assert (stale.sent.old_size, stale.status, stale.answer) == (
        first.size,
        409,
        f"{second.size}\n",
    )
    assert (retried.sent.old_size, retried.status) == (second.size, 200)
    assert verify_consistency(
        second.size, third.size, bytes(second.root), bytes(third.root), list(retried.sent.proof)
    )
    assert record_of(witness).size == third.size
    assert served(client, witness).signed_by == (log_signer().name, witness.name)
    assert Cosignature.objects.filter(witness=witness.name).count() == 3


# A witness away -----------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)  # /readyz reads in threads of its own
def test_a_stopped_witness_delays_only_its_own_cosignature(
    client: Client,
    buyer: Agent,
    merchant: Agent,
    witness: WitnessProcess,
    exchanges: list[Exchange],
    settings: Any,
) -> None:
    first = batch(client, buyer, merchant, "sess-w1")
    assert witnesses.submit(first) == 1
    stop(witness)

    second = batch(client, buyer, merchant, "sess-w2")
    assert witnesses.submit(second) == 0
    # Signed by the log all the same, with no cosignature.
    log_only = verify_checkpoint(second.note, [note_verifier(witness.log_key)])
    assert (log_only.checkpoint.size, log_only.signed_by) == (second.size, (log_signer().name,))
    assert not second.cosignatures.exists()
    record = record_of(witness)
    assert record.failed_at is not None
    assert record.error
    assert record.size == first.size
    # The witness's cosignature is the quorum: the last checkpoint that has it is served.
    assert reads.served_checkpoint() == first
    assert served(client, witness).checkpoint.size == first.size

    def warned() -> dict[str, Any] | None:
        """/readyz's log check warning that the witness stopped answering"""
        check: dict[str, Any] = client.get("/readyz").json()["checks"]["log"]
        return (
            check
            if f"witness {witness.name} stopped answering" in check.get("warning", "")
            else None
        )

    check = wait_for(warned, 30, interval=0.2)
    assert check["witnesses"][witness.name]["answering"] is False
    assert check["witnesses"][witness.name]["size"] == first.size

    # Nothing else stops: sessions run, their entries are integrated and checkpoints signed.
    third = batch(client, buyer, merchant, "sess-w3")
    assert witnesses.submit(third) == 0
    assert LogLeaf.objects.count() == third.size == Entry.objects.count()
    # With no quorum asked for, the latest is served, with the log's signature alone.
    settings.OANP_WITNESS_QUORUM = 0
    assert served(client, witness).signed_by == (log_signer().name,)
    assert served(client, witness).checkpoint.size == third.size
    settings.OANP_WITNESS_QUORUM = 1

    # Back: the next checkpoint goes to it from the size it last cosigned, with the proof.
    start(witness)
    exchanges.clear()
    assert witnesses.submit(third) == 1
    assert [(e.sent.old_size, e.status) for e in exchanges] == [(first.size, 200)]
    assert verify_consistency(
        first.size, third.size, bytes(first.root), bytes(third.root), list(exchanges[0].sent.proof)
    )
    assert served(client, witness).checkpoint.size == third.size

    def answering() -> dict[str, Any] | None:
        """/readyz's log check with the witness answering again"""
        check: dict[str, Any] = client.get("/readyz").json()["checks"]["log"]
        return check if check["witnesses"][witness.name]["answering"] else None

    check = wait_for(answering, 30, interval=0.2)
    assert "warning" not in check


def test_a_witness_taken_out_of_the_configuration_is_not_reported(
    client: Client, buyer: Agent, merchant: Agent, witness: WitnessProcess, settings: Any
) -> None:
    stop(witness)
    assert witnesses.submit(batch(client, buyer, merchant, "sess-w1")) == 0
    assert "stopped answering" in reads.log_health()["warning"]  # type: ignore[operator]
    # The operator removes the witness that is gone: its record stays, its warning does not.
    settings.OANP_WITNESSES = []
    health = reads.log_health()
    assert health["witnesses"] == {}
    assert "warning" not in health
    assert record_of(witness).failed_at is not None


# Forks and rollbacks refused ---------------------------------------------------------------------


@dataclass(frozen=True)
class Fork:
    """Two checkpoints the log signed for one size with different roots, each verifying with
    its key: the one the witness cosigned (its cosignature included), and the other. Either
    alone looks sound; together they prove the log showed two histories."""

    cosigned: str
    forked: str
    log_key: str
    witness_key: str
    #: The forked checkpoint's row, to send to the witness.
    checkpoint: LogCheckpoint


def rewind(size: int, tampered_leaf: int) -> None:
    """Take the tree back to its first ``size`` leaves, as if the later entries had never
    been integrated, and replace the stored hash of leaf ``tampered_leaf`` (one of those): what
    a log whose database was written under it, or restored from a bad copy, would do."""
    last = LogLeaf.objects.get(index=size - 1).entry_id
    LogLeaf.objects.filter(index__gte=size).delete()
    level, width = 0, size
    while TreeHash.objects.filter(level=level).exists():
        TreeHash.objects.filter(level=level, index__gte=width).delete()
        level, width = level + 1, width // TILE_WIDTH
    LogCheckpoint.objects.filter(size__gt=size).delete()
    TreeState.objects.filter(pk=1).update(size=size, scanned_to=last)
    forged = hashlib.sha256(b"not the entry's leaf").digest()
    assert TreeHash.objects.filter(level=0, index=tampered_leaf).update(hash=forged) == 1


@pytest.fixture
def fork(client: Client, buyer: Agent, merchant: Agent, witness: WitnessProcess) -> Fork:
    """Two batches cosigned; then the tree taken back to the first with one of its leaf hashes
    tampered with, and the second batch integrated again: the log signs the second batch's size
    anew, over another root."""
    first = batch(client, buyer, merchant, "sess-w1")
    second = batch(client, buyer, merchant, "sess-w2")
    assert witnesses.submit(first) + witnesses.submit(second) == 2
    cosigned = reads.note_text(second)
    rewind(first.size, tampered_leaf=3)
    done = integrate()
    assert done.checkpoint is not None
    return Fork(
        cosigned, done.checkpoint.note, witness.log_key, witness.verifier_key, done.checkpoint
    )


def test_the_witness_refuses_a_second_root_for_a_size_it_cosigned(
    fork: Fork, witness: WitnessProcess, exchanges: list[Exchange]
) -> None:
    log_key, witness_key = note_verifier(fork.log_key), cosignature_verifier(fork.witness_key)
    cosigned = verify_checkpoint(fork.cosigned, [log_key, witness_key])
    forked = verify_checkpoint(fork.forked, [log_key, witness_key])
    # One origin, one size, two roots, both signed by the log: a fork.
    assert cosigned.checkpoint.origin == forked.checkpoint.origin
    assert cosigned.checkpoint.size == forked.checkpoint.size
    assert cosigned.checkpoint.root != forked.checkpoint.root
    assert cosigned.signed_by == (log_key.name, witness_key.name)
    assert forked.signed_by == (log_key.name,)

    assert witnesses.submit(fork.checkpoint) == 0
    [refused] = exchanges
    assert (refused.sent.old_size, refused.sent.proof) == (fork.checkpoint.size, ())
    assert (refused.status, refused.answer) == (422, "another root at the cosigned size\n")
    assert not Cosignature.objects.filter(checkpoint=fork.checkpoint).exists()
    record = record_of(witness)
    assert "422" in record.error
    assert record.failed_at is not None
    # The witness still vouches for the root it cosigned, and for nothing else.
    assert witness_checkpoint(witness).checkpoint.root == cosigned.checkpoint.root

    # From an older size the arbiter believes in, the same: a 409 names the witness's size, the
    # retry from it is refused, and the size the witness named is kept.
    WitnessRecord.objects.filter(name=witness.name).update(size=3)
    exchanges.clear()
    assert witnesses.submit(fork.checkpoint) == 0
    assert [(e.sent.old_size, e.status) for e in exchanges] == [
        (3, 409),
        (fork.checkpoint.size, 422),
    ]
    assert record_of(witness).size == fork.checkpoint.size


def test_a_witness_asked_to_go_backwards_answers_409_with_its_size(
    client: Client,
    buyer: Agent,
    merchant: Agent,
    witness: WitnessProcess,
    exchanges: list[Exchange],
) -> None:
    first = batch(client, buyer, merchant, "sess-w1")
    second = batch(client, buyer, merchant, "sess-w2")
    assert witnesses.submit(first) + witnesses.submit(second) == 2
    url = f"{witness.url}/add-checkpoint"
    for old in (0, first.size):
        answer = httpx.post(url, content=add_checkpoint_body(old, [], first.note), timeout=10)
        assert (answer.status_code, answer.text) == (409, f"{second.size}\n")
        assert answer.headers["content-type"] == SIZE_CONTENT_TYPE
    assert witness_checkpoint(witness).checkpoint.size == second.size

    # The arbiter sending the older one (its task ran late) learns the witness is past it: one
    # request, no cosignature, and no failure reported, since none happened.
    exchanges.clear()
    assert witnesses.submit(first) == 0
    assert [(e.sent.old_size, e.status, e.answer) for e in exchanges] == [
        (0, 409, f"{second.size}\n")
    ]
    record = record_of(witness)
    assert (record.size, record.failed_at, record.error) == (second.size, None, "")
    assert first.cosignatures.count() == 1
    assert "warning" not in reads.log_health()
