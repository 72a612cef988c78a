"""``oanp witness``: a C2SP witness (c2sp.org/tlog-witness) for the arbiter's transparency log,
or any log that signs its checkpoints with Ed25519 note keys.

``oanp witness keygen --name NAME --out FILE`` makes the witness's Ed25519 cosigning key: the
signer key (:attr:`~oanp.tlog.cosignature.Cosigner.signer_key`) to FILE, mode 0600, an existing
file refused unless ``--force``; the verifier key, which logs and their clients trust, to
stdout. ``oanp witness serve --key FILE --state FILE --log VKEY...`` answers
``POST /add-checkpoint`` and ``GET /<origin hash>/checkpoint``; each ``--log`` is a log's
Ed25519 verifier key, named as the log's origin.

The decisions are :class:`oanp.tlog.witness.Witness`'s; this module adds the clock, the HTTP
server and the state file. The file holds each log's last cosigned size, root and checkpoint,
and is replaced whole (a new file written, synced and renamed over it) before a cosignature is
answered; checking a request and recording its checkpoint happen under one lock, so a slower
request for an older size cannot roll the record back after a newer one was cosigned.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Any, TextIO
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from oanp.audit.merkle import HASH_SIZE
from oanp.net.files import replace_file, write_key_file
from oanp.tlog.cosignature import Cosigner, parse_signer_key
from oanp.tlog.errors import TlogError
from oanp.tlog.note import decode_base64, encode_base64, note_verifier
from oanp.tlog.witness import (
    MAX_REQUEST_BYTES,
    Answer,
    LogRecord,
    Witness,
    log_verifiers,
)

DEFAULT_LISTEN = "127.0.0.1:8090"
STATE_FORMAT = "oanp-witness-state/1"
#: A client that stops sending mid-request does not hold a thread for longer.
REQUEST_TIMEOUT = 30

_CHECKPOINT_PATH = re.compile(r"/([0-9a-f]{64})/checkpoint")


class WitnessSetupError(Exception):
    """A flag or file the witness cannot start with; the message names it and says why."""


# Key file -----------------------------------------------------------------------------------


def write_signer_key(path: Path, cosigner: Cosigner, *, force: bool = False) -> None:
    """Write ``cosigner``'s signer key to ``path``, mode 0600; an existing file is refused
    unless ``force``, which replaces it whole."""
    data = (cosigner.signer_key + "\n").encode("utf-8")
    try:
        write_key_file(path, data, force=force)
    except FileExistsError:
        raise WitnessSetupError(f"{path} exists: not overwritten (--force replaces it)") from None
    except OSError as exc:
        raise WitnessSetupError(f"{path}: cannot write it: {exc.strerror or exc}") from None


def read_signer_key(path: Path) -> Cosigner:
    """The cosigner a key file written by ``oanp witness keygen`` holds."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise WitnessSetupError(
            f"{path}: no such file (oanp witness keygen --name NAME --out FILE makes one)"
        ) from None
    except UnicodeDecodeError:
        raise WitnessSetupError(f"{path}: not a witness key file (not UTF-8 text)") from None
    except OSError as exc:
        raise WitnessSetupError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    try:
        return parse_signer_key(text.removesuffix("\n"))
    except ValueError as exc:
        raise WitnessSetupError(f"{path}: not a witness key file: {exc}") from None


# State file ---------------------------------------------------------------------------------


class StateFile:
    """Each log's record, by origin, in one JSON file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[str, LogRecord]:
        """The records kept so far: none when the file does not exist yet."""
        if not self.path.parent.is_dir():
            raise WitnessSetupError(f"{self.path}: its folder does not exist")
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            raise WitnessSetupError(f"{self.path}: cannot read it: {exc}") from None
        try:
            return _records(json.loads(text))
        except (ValueError, KeyError, TypeError) as exc:
            raise WitnessSetupError(f"{self.path}: not a witness state file: {exc}") from None

    def save(self, records: Mapping[str, LogRecord]) -> None:
        """Replace the file with ``records`` (see :func:`replace_file`)."""
        logs = {
            origin: {
                "size": record.size,
                "root": encode_base64(record.root),
                "checkpoint": record.checkpoint,
            }
            for origin, record in sorted(records.items())
        }
        text = json.dumps({"format": STATE_FORMAT, "logs": logs}, indent=1) + "\n"
        replace_file(self.path, text.encode("utf-8"))


def _records(document: Any) -> dict[str, LogRecord]:
    if not isinstance(document, dict) or document.get("format") != STATE_FORMAT:
        raise ValueError(f"no format {STATE_FORMAT!r}")
    records = {}
    for origin, kept in dict(document["logs"]).items():
        size, root, checkpoint = kept["size"], decode_base64(kept["root"]), kept["checkpoint"]
        if type(size) is not int or size < 0 or len(root) != HASH_SIZE:
            raise ValueError(f"the record of {origin!r} is not a size and a root hash")
        if not isinstance(checkpoint, str):
            raise ValueError(f"the record of {origin!r} holds no checkpoint")
        records[str(origin)] = LogRecord(size, root, checkpoint)
    return records


# HTTP ---------------------------------------------------------------------------------------


class WitnessServer(ThreadingHTTPServer):
    """The witness over HTTP: its records in memory, the state file kept in step."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        witness: Witness,
        state: StateFile,
        records: Mapping[str, LogRecord],
    ) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, WitnessHandler)
        self.witness = witness
        self.state = state
        self.records = dict(records)
        self.lock = threading.Lock()

    def add_checkpoint(self, body: bytes) -> Answer:
        """Decide ``body`` and record what was cosigned, under the lock, before answering."""
        with self.lock:
            answer = self.witness.add_checkpoint(body, self.records, int(time.time()))
            if answer.record is None or answer.origin is None:
                return answer
            records = {**self.records, answer.origin: answer.record}
            try:
                self.state.save(records)
            except OSError as exc:
                print(f"oanp witness: cannot record a checkpoint: {exc}", file=sys.stderr)
                return Answer(500, "the witness could not record the checkpoint\n")
            self.records = records
            return answer

    def checkpoint(self, hashed_origin: str) -> Answer:
        """The last checkpoint cosigned of the log whose origin hashes to ``hashed_origin``."""
        with self.lock:
            return self.witness.served_checkpoint(hashed_origin, self.records)


class WitnessHandler(BaseHTTPRequestHandler):
    """``POST /add-checkpoint`` and ``GET /<origin hash>/checkpoint``; keep-alive kept."""

    protocol_version = "HTTP/1.1"
    timeout = REQUEST_TIMEOUT
    server: WitnessServer

    def do_POST(self) -> None:
        length = self.headers.get("Content-Length")
        if length is None or not length.isascii() or not length.isdigit():
            self.close_connection = True
            self._answer(Answer(411, "a Content-Length is required\n"))
            return
        if int(length) > MAX_REQUEST_BYTES:
            # The body is left unread, so this connection cannot carry another request.
            self.close_connection = True
            self._answer(Answer(413, f"the body is over {MAX_REQUEST_BYTES} bytes\n"))
            return
        # Read whatever the path: on a kept-alive connection, an unread body would be taken
        # for the start of the next request.
        body = self.rfile.read(int(length))
        if urlsplit(self.path).path != "/add-checkpoint":
            self._answer(Answer(404, "not found\n"))
            return
        self._answer(self.server.add_checkpoint(body))

    def do_GET(self) -> None:
        match = _CHECKPOINT_PATH.fullmatch(urlsplit(self.path).path)
        if match is None:
            self._answer(Answer(404, "not found\n"))
            return
        self._answer(self.server.checkpoint(match.group(1)))

    def _answer(self, answer: Answer) -> None:
        data = answer.body.encode("utf-8")
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


# Command line -------------------------------------------------------------------------------


def add_witness_command(commands: Any) -> None:
    """Register ``witness keygen`` and ``witness serve`` on the ``oanp`` subparsers."""
    witness = commands.add_parser(
        "witness", help="a C2SP transparency log witness: make its key, or serve it"
    )
    actions = witness.add_subparsers(dest="witness_command", required=True)
    keygen = actions.add_parser(
        "keygen", help="make a witness key: the signer key to a file, the verifier key to stdout"
    )
    keygen.add_argument("--name", required=True, help="the witness's key name, e.g. a host/path")
    keygen.add_argument(
        "--out", type=Path, required=True, metavar="FILE", help="written with mode 0600"
    )
    keygen.add_argument("--force", action="store_true", help="replace an existing FILE")
    serve = actions.add_parser("serve", help="cosign the checkpoints of the logs it follows")
    serve.add_argument("--key", type=Path, required=True, metavar="FILE", help="from keygen")
    serve.add_argument(
        "--state", type=Path, required=True, metavar="FILE", help="each log's last cosigned tree"
    )
    serve.add_argument(
        "--log",
        action="append",
        required=True,
        metavar="VKEY",
        help="a log's Ed25519 verifier key, named as its origin (repeatable)",
    )
    serve.add_argument(
        "--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT", help="default: %(default)s"
    )


def witness_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``oanp witness keygen|serve``: 2 with one line on ``err`` for a flag or file it cannot
    use."""
    try:
        if args.witness_command == "keygen":
            return _keygen(args, out, err)
        return _serve(args, err)
    except WitnessSetupError as exc:
        print(f"oanp witness {args.witness_command}: {exc}", file=err)
        return 2


def _keygen(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        cosigner = Cosigner(args.name, Ed25519PrivateKey.generate())
    except ValueError:
        raise WitnessSetupError(
            f"--name {args.name!r}: a key name is non-empty, without spaces or '+'"
        ) from None
    write_signer_key(args.out, cosigner, force=args.force)
    print(cosigner.verifier_key, file=out)
    print(f"oanp witness keygen: the key of {cosigner.name} written to {args.out}", file=err)
    return 0


def listen_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6 address]:PORT`` too) as a host and a port number."""
    host, colon, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not colon or not host or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise WitnessSetupError(f"--listen {text!r}: expected HOST:PORT")
    return host, int(port)


def _serve(args: argparse.Namespace, err: TextIO) -> int:
    cosigner = read_signer_key(args.key)
    for vkey in args.log:
        try:
            note_verifier(vkey)
        except TlogError as exc:
            raise WitnessSetupError(f"--log {vkey}: {exc.detail}") from None
    logs = log_verifiers(args.log)
    state = StateFile(args.state)
    records = state.load()
    address = listen_address(args.listen)
    try:
        server = WitnessServer(address, Witness([cosigner], logs), state, records)
    except OSError as exc:
        raise WitnessSetupError(f"--listen {args.listen}: {exc.strerror or exc}") from None
    host = f"[{address[0]}]" if ":" in address[0] else address[0]
    print(
        f"oanp witness: {cosigner.verifier_key} on http://{host}:{server.server_address[1]}, "
        f"for {', '.join(sorted(logs))}",
        file=err,
        flush=True,
    )
    signal.signal(signal.SIGTERM, _stop)
    with server, contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


def _stop(signum: int, frame: FrameType | None) -> None:
    # SIGTERM ends serve_forever as Ctrl-C does: the server closes, the exit status is 0.
    raise KeyboardInterrupt
