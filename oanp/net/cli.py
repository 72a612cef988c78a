"""The ``oanp`` command: ``demo``, ``verify``, ``extract``, ``keygen`` (of
:mod:`oanp.net.signing_keys`), the agent commands of :mod:`oanp.net.commands`
(``negotiate``, ``merchant``, ``merchants``, ``mcp``), and ``witness`` (of
:mod:`oanp.net.witness`); ``verify --log`` checks the transparency log too
(:mod:`oanp.net.log_audit`).

This is the edge of the package where clocks, randomness and files are allowed: it draws the
demo's key, salts and message ids and hands them to the pure core.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, TextIO

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from oanp.agents.ids import new_ulid
from oanp.agents.parties import BuyerAgent, MerchantAgent
from oanp.agents.rehearsal import rehearse
from oanp.agents.strategies import ReferenceBuyer, ReferenceMerchant
from oanp.agents.vaults import BuyerVault, MerchantVault
from oanp.audit import (
    BUNDLE_DEPTH,
    BUNDLE_FORMAT,
    NotStreamable,
    Report,
    SignatureRules,
    build_bundle,
    extract,
    read_party_keys,
    unreadable_reason,
    verify_bundle,
    verify_bundle_stream,
    verify_log,
)
from oanp.audit.jsonstream import PullReader, StreamError
from oanp.net.commands import add_commands, run_command
from oanp.net.log_audit import LogAudit, LogSetupError, add_log_arguments, log_options, open_log
from oanp.net.log_tiles import LogUnavailable
from oanp.net.signing_keys import add_keygen_command, keygen_command
from oanp.net.witness import add_witness_command, witness_command
from oanp.net.workers import Workers, usable_cores
from oanp.wire.canonical import JsonValue, json_value, read_json
from oanp.wire.commitments import encode_salt
from oanp.wire.errors import MalformedEnvelope, ProtocolError
from oanp.wire.log import Entry
from oanp.wire.signing import SigningKey, jwks_document
from oanp.wire.state import Arbiter
from oanp.wire.transcript import describe_entry

DEMO_ARBITER_ID = "arbiter.demo"
DEMO_JWKS_URI = "http://127.0.0.1:8000/.well-known/jwks.json"


# oanp demo -----------------------------------------------------------------------------------


def demo(*, as_json: bool, bundle_path: Path | None, out: TextIO, err: TextIO) -> int:
    """The SFO→JFK session of docs/protocol.md §5, run in-process, then verified."""
    key = SigningKey.from_cryptography(Ed25519PrivateKey.generate())
    arbiter = Arbiter(DEMO_ARBITER_ID, key, DEMO_JWKS_URI)
    jwks = jwks_document([key.public_jwk()])
    item: dict[str, JsonValue] = {"route": "SFO-JFK", "date": "2026-04-28"}
    buyer = BuyerAgent(
        agent_id="buyer-001",
        vault=BuyerVault(true_ceiling=Decimal(420), budget_cap=Decimal(400), urgency="medium"),
        strategy=ReferenceBuyer(),
        salt=encode_salt(secrets.token_bytes(32)),
        new_message_id=new_ulid,
    )
    merchant = MerchantAgent(
        agent_id="merchant-sfo",
        vault=MerchantVault(floor_price=Decimal(280), ideal_price=Decimal(400)),
        strategy=ReferenceMerchant(),
        salt=encode_salt(secrets.token_bytes(32)),
        new_message_id=new_ulid,
    )

    def clock() -> datetime:
        return datetime.now(UTC)

    opening = buyer.open(
        session_id=new_ulid(),
        merchant_agent_id="merchant-sfo",
        item=item,
        currency="USD",
        max_rounds=5,
        now=clock(),
    )
    if not as_json:
        print(
            f"OANP demo: {item['route']} on {item['date']}, buyer-001 and merchant-sfo, "
            f"arbiter {DEMO_ARBITER_ID} ({key.alg}, kid {key.kid})\n"
            "Each side's private limit stays in its vault; only salted commitments cross "
            "the wire.\n",
            file=out,
        )

    def show(entry: Entry) -> None:
        if as_json:
            print(json.dumps(entry.as_json(), separators=(",", ":")), file=out)
        else:
            print(describe_entry(entry), file=out)
            print("     " + json.dumps(entry.envelope, separators=(",", ":")), file=out)

    result = rehearse(
        buyer=buyer, merchant=merchant, arbiter=arbiter, opening=opening, clock=clock, on_entry=show
    )
    state = result.negotiation.state
    log = [entry.as_json() for entry in result.entries]
    report = verify_log(log, jwks)
    summary = out if not as_json else err
    if state.final_price is not None:
        print(
            f"\nSettled at {state.final_price} {state.currency} in {state.round} rounds.",
            file=summary,
        )
    else:
        print(f"\nNo agreement: {state.close_reason}.", file=summary)
    print("\nVerifying the log and the signed agreement offline:", file=summary)
    _print_report(report, summary)
    if bundle_path is not None:
        bundle = build_bundle(
            logs=[log],
            jwks=jwks,
            key=key,
            arbiter_id=DEMO_ARBITER_ID,
            created_at=clock(),
            scope={"demo": True},
        )
        bundle_path.write_text(json.dumps(bundle, indent=1) + "\n", encoding="utf-8")
        print(
            f"Audit bundle written to {bundle_path}; check it with: oanp verify {bundle_path}",
            file=summary,
        )
    return 0 if report.ok else 1


# oanp verify ---------------------------------------------------------------------------------


class UnreadableInput(Exception):
    """A file that is not a bundle, a log or a key set; the message says why."""


def load_document(path: Path) -> JsonValue:
    """Read JSON (or JSON lines) strictly; numbers come back as the floats a log hashes.

    JSON holding a value nothing may hash (``1e400``, ``1e-400``, a lone surrogate) cannot be
    read either: the message says which value, and where.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UnreadableInput(f"{path}: {exc}") from exc
    try:
        document = read_json(text)
    except MalformedEnvelope as whole_failed:
        return _json_lines(path, text, whole_failed)
    return _hashable(path, document, "$")


def _json_lines(path: Path, text: str, whole_failed: MalformedEnvelope) -> list[JsonValue]:
    # JSON lines end at "\n" only: str.splitlines() would also split inside strings at
    # U+2028, \x0b, \x1c..., which JSON allows unescaped.
    lines = [line for line in text.split("\n") if line.strip()]
    if len(lines) < 2:
        raise UnreadableInput(f"{path}: {whole_failed.detail}") from whole_failed
    documents = []
    for n, line in enumerate(lines):
        try:
            document = read_json(line)
        except ProtocolError as exc:
            raise UnreadableInput(f"{path}: not JSON nor JSON lines: {exc.detail}") from exc
        documents.append(_hashable(path, document, f"$[{n}]"))
    return documents


def _hashable(path: Path, document: object, where: str) -> JsonValue:
    try:
        return json_value(document, where, max_depth=BUNDLE_DEPTH)
    except ProtocolError as exc:
        raise UnreadableInput(f"{path}: {unreadable_reason(exc)}") from exc


def _log_entries(document: JsonValue) -> Sequence[Mapping[str, JsonValue]]:
    if isinstance(document, dict) and isinstance(document.get("entries"), list):
        document = document["entries"]
    if not isinstance(document, list) or not all(isinstance(e, dict) for e in document):
        raise UnreadableInput("expected an audit bundle, a list of log entries, or JSON lines")
    return document  # type: ignore[return-value]


def _carried_keys(document: JsonValue) -> Any:
    """The key set a log downloaded from the dashboard carries (``jwks``), as a bundle does."""
    keys = document.get("jwks") if isinstance(document, dict) else None
    return keys if isinstance(keys, dict) and isinstance(keys.get("keys"), list) else None


def _carried_signature_rules(document: JsonValue, required: bool) -> SignatureRules:
    """The parties' keys a log downloaded from the dashboard carries (``party_keys``)."""
    listed = document.get("party_keys") if isinstance(document, dict) else None
    try:
        keys = read_party_keys(listed) if listed is not None else {}
    except ValueError as exc:
        raise UnreadableInput(f"party_keys: {exc}") from exc
    return SignatureRules(keys, required)


def _print_check(out: TextIO) -> Any:
    return lambda check: print(check.line(), file=out)


def _print_report(report: Report, out: TextIO) -> None:
    for check in report.checks:
        print(check.line(), file=out)
    _print_verdict(report, out)


def _print_verdict(report: Report, out: TextIO) -> None:
    verdict = "VERIFIED" if report.ok else "FAILED"
    print(f"{verdict}: {report.summary()}", file=out)


def verify(
    path: Path,
    *,
    jwks_path: Path | None,
    since_path: Path | None,
    out: TextIO,
    jobs: int = 1,
    require_signatures: bool = False,
    log: LogAudit | None = None,
) -> int:
    """Check a bundle or a single session log; 0 when everything verifies, 1 when not.
    Party signatures are checked wherever present; with ``require_signatures`` an unsigned
    party entry fails too. With ``log``, the transparency log's checks follow, every entry of
    the file among them.

    A bundle is read one session at a time and each check printed as it is made, its logs
    checked by ``jobs`` worker processes (in this one for 1) and printed in the bundle's order,
    the same lines whatever ``jobs`` is; any other file, or a bundle laid out otherwise than a
    writer lays it out, is read whole.
    """
    jwks: Any = load_document(jwks_path) if jwks_path else None
    if jwks is not None and not (isinstance(jwks, dict) and isinstance(jwks.get("keys"), list)):
        raise UnreadableInput(f'{jwks_path}: not a JWKS document (no "keys" list)')
    if _is_streamed_bundle(path):
        since = _earlier_bundle(since_path)
        report = Report(keep_passing=False, on_check=_print_check(out))
        try:
            with path.open(encoding="utf-8") as stream, _workers(jobs) as workers:
                lines_map = workers.map if workers is not None else None
                verify_bundle_stream(
                    stream,
                    jwks=jwks,
                    since=since,
                    report=report,
                    lines_map=lines_map,
                    require_signatures=require_signatures,
                )
        except (StreamError, UnicodeDecodeError, OSError) as exc:
            raise UnreadableInput(f"{path}: {exc}") from exc
        except NotStreamable as exc:
            print(f"note: {path} is read again, whole: {exc}", file=out)
        else:
            return _verdict(report, path, log, out)
    document = load_document(path)
    report = Report(on_check=_print_check(out))
    if isinstance(document, dict) and document.get("format") == BUNDLE_FORMAT:
        verify_bundle(
            document,
            jwks=jwks,
            since=_earlier_bundle(since_path),
            require_signatures=require_signatures,
            report=report,
        )
    else:
        if since_path is not None:
            raise UnreadableInput("--since compares two audit bundles; FILE is a session log")
        verify_log(
            _log_entries(document),
            jwks or _carried_keys(document),
            signatures=_carried_signature_rules(document, require_signatures),
            report=report,
        )
    return _verdict(report, path, log, out)


def _verdict(report: Report, path: Path, log: LogAudit | None, out: TextIO) -> int:
    if log is not None:
        log.check(report, path)
    _print_verdict(report, out)
    return 0 if report.ok else 1


def _verify_command(args: argparse.Namespace) -> int:
    """``oanp verify``: FILE, the log, or both."""
    options = log_options(args)
    if options is None and args.file is None:
        raise UnreadableInput("verify needs FILE, or --log URL to check the log alone")
    arguments: dict[str, Any] = {
        "jwks_path": args.jwks,
        "since_path": args.since,
        "out": sys.stdout,
        "jobs": args.jobs,
        "require_signatures": args.require_signatures,
    }
    if options is None:
        return verify(args.file, **arguments)
    with open_log(options, sys.stdout) as log:
        if args.file is None:
            return log.verify_alone()
        return verify(args.file, **arguments, log=log)


def _workers(jobs: int) -> AbstractContextManager[Workers | None]:
    return Workers(jobs) if jobs > 1 else nullcontext()


def _is_streamed_bundle(path: Path) -> bool:
    """Whether ``path`` opens as a bundle does: an object whose first member is its format."""
    try:
        with path.open(encoding="utf-8") as stream:
            reader = PullReader(stream, chunk=4096)
            reader.begin("{")
            return reader.next_key() == "format" and reader.value() == BUNDLE_FORMAT
    except (StreamError, UnicodeDecodeError, OSError):
        return False  # read whole, which says what is wrong with it


def _earlier_bundle(since_path: Path | None) -> Mapping[str, Any] | None:
    if since_path is None:
        return None
    earlier = load_document(since_path)
    if not (isinstance(earlier, dict) and earlier.get("format") == BUNDLE_FORMAT):
        # Dropping it would verify without the prefix check the caller asked for.
        raise UnreadableInput(f"{since_path}: not an audit bundle ({BUNDLE_FORMAT})")
    return earlier


def extract_sessions(path: Path, session_ids: Sequence[str], out_path: Path) -> int:
    """Write the named sessions of a bundle, each entry proven against its signed root."""
    bundle = load_document(path)
    if not (isinstance(bundle, dict) and bundle.get("format") == BUNDLE_FORMAT):
        raise UnreadableInput(f"{path}: not an audit bundle")
    try:
        subset = extract(bundle, session_ids)
    except KeyError as exc:
        raise UnreadableInput(str(exc.args[0])) from exc
    out_path.write_text(json.dumps(subset, indent=1) + "\n", encoding="utf-8")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="oanp", description="OANP v0.1 arbiter tools")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("demo", help="run the SFO→JFK negotiation in-process and verify it")
    run.add_argument("--json", action="store_true", help="print the log as JSON lines")
    run.add_argument("--bundle", type=Path, metavar="FILE", help="also write an audit bundle")
    check = commands.add_parser(
        "verify", help="verify an audit bundle or a session log offline, and the log it is in"
    )
    check.add_argument("file", type=Path, metavar="FILE", nargs="?")
    check.add_argument("--jwks", type=Path, metavar="FILE", help="public keys (JWKS) to trust")
    check.add_argument(
        "--since", type=Path, metavar="FILE", help="an earlier bundle this one must extend"
    )
    check.add_argument(
        "--require-signatures",
        action="store_true",
        help="fail on any party entry its sender did not sign (party signatures are checked "
        "whenever present)",
    )
    check.add_argument(
        "--jobs",
        type=_jobs,
        default=usable_cores(),
        metavar="N",
        help="check a bundle's sessions in N worker processes, 1 for none "
        "(default: the cores this process may use)",
    )
    add_log_arguments(check)
    cut = commands.add_parser(
        "extract", help="write some sessions of a bundle, with proofs against its checkpoint"
    )
    cut.add_argument("file", type=Path, metavar="BUNDLE")
    cut.add_argument("--session", action="append", required=True, metavar="ID")
    cut.add_argument("-o", "--output", type=Path, required=True, metavar="FILE")
    add_keygen_command(commands)
    add_commands(commands)
    add_witness_command(commands)
    return parser


def _jobs(text: str) -> int:
    try:
        jobs = int(text)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"not a number of processes, 1 or more: {text!r}")
    return jobs


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "demo":
            return demo(as_json=args.json, bundle_path=args.bundle, out=sys.stdout, err=sys.stderr)
        if args.command == "extract":
            return extract_sessions(args.file, args.session, args.output)
        if args.command == "keygen":
            return keygen_command(args, sys.stdout, sys.stderr)
        if args.command in ("negotiate", "merchant", "merchants", "mcp"):
            return run_command(args, sys.stdout, sys.stderr)
        if args.command == "witness":
            return witness_command(args, sys.stdout, sys.stderr)
        return _verify_command(args)
    except (UnreadableInput, LogSetupError, LogUnavailable) as exc:
        print(f"oanp: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
