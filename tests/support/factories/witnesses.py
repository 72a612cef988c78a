"""A witness of the arbiter's transparency log (docs/protocol.md §18), the one ``oanp witness
serve`` runs, served on a thread of this process and stopped when a test wants it gone; and the
log's checkpoints signed and sent to the witnesses configured, as the integrator's task does."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from arbiter_app.log_records import LogCheckpoint
from arbiter_app.tlog.integrator import integrate
from arbiter_app.tlog.keys import log_identity
from arbiter_app.tlog.witnesses import submit
from oanp.net.witness import StateFile, WitnessServer
from oanp.tlog import Cosigner, Witness, log_verifiers


@dataclass
class RunningWitness:
    cosigner: Cosigner
    server: WitnessServer
    thread: threading.Thread

    @property
    def name(self) -> str:
        return self.cosigner.name

    @property
    def line(self) -> str:
        """Its line of ``OANP_WITNESSES``."""
        host, port = self.server.server_address[:2]
        return f"{self.cosigner.verifier_key} http://{host!s}:{port}"

    def stop(self) -> None:
        """Gone, as a witness whose machine went down: its port refuses connections."""
        if self.thread.is_alive():
            self.server.shutdown()
            self.thread.join()
        self.server.server_close()


@contextmanager
def running_witness(state: Path, name: str = "witness.example/w1") -> Iterator[RunningWitness]:
    """A witness that follows this arbiter's log (its verifier key), keeping its state in the
    folder ``state``."""
    cosigner = Cosigner(name, Ed25519PrivateKey.generate())
    follows = Witness([cosigner], log_verifiers([log_identity()["verifier_key"]]))
    server = WitnessServer(("127.0.0.1", 0), follows, StateFile(state / "witness.json"), {})
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    witness = RunningWitness(cosigner, server, thread)
    try:
        yield witness
    finally:
        witness.stop()


def checkpoint_sent(now: datetime | None = None) -> LogCheckpoint:
    """The entries waiting integrated, their checkpoint signed and sent to every witness
    configured: what beat's ``integrate_log`` and the ``cosign_checkpoint`` it sends do."""
    done = integrate(now)
    assert done.checkpoint is not None, "no entry was waiting"
    submit(done.checkpoint, now)
    return done.checkpoint
