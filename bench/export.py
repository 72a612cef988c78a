"""export: an audit bundle of 100,000 entries, written and verified, against JCS + SHA-256.

The logs are made once, before any clock starts: whole SFO→JFK sessions (nine entries each,
the published trace) rehearsed in-process between the reference agents, with a fixed arbiter
key, fixed salts, a clock that steps one second per reading and counter ids, so every run
bundles the same bytes. Then, in one run:

- export: :func:`oanp.audit.build_bundle` (JCS of every entry as a Merkle leaf, the RFC 6962
  root, the signed checkpoint) and the file written as the dashboard's export writes it
  (compact JSON); best of a few repeats. Its peak memory is taken apart, in a pass of its own
  under ``tracemalloc``: what the export allocated beyond the logs it was handed;
- verify in-process: :func:`oanp.audit.verify_bundle` of the parsed file (every hash link,
  invariants I1–I7 and the agreement's signature per session, the Merkle root, the checkpoint);
- ``oanp verify FILE``: the auditor's command in a process of its own, reading and parsing
  the file strictly and verifying it; wall time and peak resident memory (``wait4``), beside
  the same interpreter that only imports the command;
- the peer: JCS + SHA-256 of the very same entries, the least any export or check must do.
"""

from __future__ import annotations

import gc
import hashlib
import json
import subprocess
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from itertools import count
from pathlib import Path
from typing import Any

from bench.report import Options, Row, Section, SectionResult, best_of, one_core, rate, times
from oanp.agents import BuyerAgent, BuyerVault, MerchantAgent, MerchantVault
from oanp.audit import build_bundle, verify_bundle
from oanp.canonical import JsonObject, canonical_bytes, json_value, read_json
from oanp.commitments import encode_salt
from oanp.machine import Arbiter
from oanp.rehearsal import rehearse
from oanp.signing import ArbiterKey, jwks_document
from oanp.strategies import ReferenceBuyer, ReferenceMerchant

TITLE = "export and verify an audit bundle, against JCS + SHA-256 of the same entries"
ARBITER_ID = "arbiter.bench"
JWKS_URI = "https://arbiter.bench/.well-known/jwks.json"
SEED = bytes(range(32))
START = datetime(2026, 4, 28, 9, 0, tzinfo=UTC)
CREATED_AT = datetime(2026, 4, 29, 9, 0, tzinfo=UTC)
ENTRIES_PER_SESSION = 9
MB = 1024 * 1024


@dataclass(frozen=True)
class Size:
    entries: int
    repeats: int


FULL = Size(entries=100_000, repeats=2)
QUICK = Size(entries=2_000, repeats=1)


# The logs --------------------------------------------------------------------------------------


class _SteppingClock:
    def __init__(self, start: datetime) -> None:
        self._next = start

    def __call__(self) -> datetime:
        now, self._next = self._next, self._next + timedelta(seconds=1)
        return now


def sfo_jfk_log(number: int, arbiter: Arbiter) -> list[JsonObject]:
    """Session ``number``: the published SFO→JFK negotiation, 320/370 then 340 accepted."""
    ids = count(1)

    def new_id() -> str:
        return f"m{number:06d}-{next(ids):02d}"

    buyer = BuyerAgent(
        agent_id="buyer-001",
        vault=BuyerVault(true_ceiling=Decimal(420), budget_cap=Decimal(400), urgency="medium"),
        strategy=ReferenceBuyer(),
        salt=encode_salt(b"\x01" * 32),
        new_message_id=new_id,
    )
    merchant = MerchantAgent(
        agent_id="merchant-sfo",
        vault=MerchantVault(floor_price=Decimal(280), ideal_price=Decimal(400)),
        strategy=ReferenceMerchant(),
        salt=encode_salt(b"\x02" * 32),
        new_message_id=new_id,
    )
    clock = _SteppingClock(START + timedelta(seconds=10 * number))
    opening = buyer.open(
        session_id=f"sess-{number:06d}",
        merchant_agent_id="merchant-sfo",
        item={"route": "SFO-JFK", "date": "2026-04-28"},
        currency="USD",
        max_rounds=5,
        now=clock(),
    )
    result = rehearse(buyer=buyer, merchant=merchant, arbiter=arbiter, opening=opening, clock=clock)
    return [entry.as_json() for entry in result.entries]


def build_logs(entries: int, key: ArbiterKey) -> list[list[JsonObject]]:
    """Enough whole sessions to hold at least ``entries`` entries."""
    arbiter = Arbiter(ARBITER_ID, key, JWKS_URI)
    sessions = -(-entries // ENTRIES_PER_SESSION)
    return [sfo_jfk_log(number, arbiter) for number in range(sessions)]


# The measurements ------------------------------------------------------------------------------


def export(logs: list[list[JsonObject]], jwks: dict[str, Any], key: ArbiterKey, path: Path) -> int:
    """Bundle the logs and write the file as the dashboard's export does; its size in bytes."""
    bundle = build_bundle(
        logs=logs,
        jwks=jwks,
        key=key,
        arbiter_id=ARBITER_ID,
        created_at=CREATED_AT,
        scope={"bench": True},
    )
    data = json.dumps(bundle, separators=(",", ":")).encode()
    path.write_bytes(data)
    return len(data)


def jcs_sha256(entries: list[JsonObject]) -> None:
    for entry in entries:
        hashlib.sha256(canonical_bytes(entry)).digest()


def export_peak_bytes(
    logs: list[list[JsonObject]], jwks: dict[str, Any], key: ArbiterKey, path: Path
) -> int:
    """The most memory the export held at once beyond the logs it was given (tracemalloc)."""
    gc.collect()
    tracemalloc.start()
    try:
        export(logs, jwks, key, path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak


#: ``oanp verify`` as its console script runs it, then the process's own peak resident set
#: (VmHWM, of this program only: rusage's maxrss would also count the parent it forked from).
_VERIFY_AND_PEAK = """
import sys
from oanp.net.cli import main
code = main(sys.argv[1:]) if len(sys.argv) > 1 else 0
sys.stdout.flush()
with open("/proc/self/status") as status:
    peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
sys.stderr.write(f"VmHWM {peak}\\n")
sys.exit(code)
"""


def _timed_process(args: list[str], stdout: Any) -> tuple[int, float, int, str]:
    """``oanp ARGS`` (none: only the import); exit code, wall seconds, peak RSS in bytes."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _VERIFY_AND_PEAK, *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    peak = next(
        (
            int(line.split()[1]) * 1024
            for line in done.stderr.splitlines()
            if line.startswith("VmHWM")
        ),
        0,
    )
    return done.returncode, wall, peak, done.stderr


def cli_verify(path: Path, workdir: Path) -> dict[str, Any]:
    """``oanp verify FILE`` in a process of its own, and the same interpreter doing nothing
    but importing the command, for the floor of its time and memory."""
    out_path = workdir / "verify.txt"
    with out_path.open("wb") as out:
        code, wall, rss, errors = _timed_process(["verify", str(path)], out)
    lines = out_path.read_text(encoding="utf-8").strip().splitlines()
    verdict = lines[-1] if lines else ""
    code_base, wall_base, rss_base, _ = _timed_process([], subprocess.DEVNULL)
    if code != 0 or code_base != 0:
        raise RuntimeError(f"oanp verify failed ({code}): {verdict} {errors[-2000:]}")
    return {
        "exit_code": code,
        "verdict": verdict,
        "wall_s": wall,
        "peak_rss_bytes": rss,
        "baseline_wall_s": wall_base,
        "baseline_peak_rss_bytes": rss_base,
    }


# The section -----------------------------------------------------------------------------------


def _s(seconds: float) -> str:
    return f"{seconds:,.2f} s"


def _mb(value: float) -> str:
    return f"{value / MB:,.1f} MB"


def run(options: Options) -> SectionResult:
    size = QUICK if options.quick else FULL
    key = ArbiterKey.from_ed25519_seed(SEED)
    jwks = jwks_document([key.public_jwk()])
    started = time.perf_counter()
    logs = build_logs(size.entries, key)
    made_s = time.perf_counter() - started
    entries = [entry for log in logs for entry in log]
    print(
        f"bench: export: {len(entries):,} entries in {len(logs):,} sessions made in {made_s:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="oanp-bench-export-") as workdir:
        path = Path(workdir) / "bundle.json"
        sizes: list[int] = []
        with one_core() as cpu:
            peer = best_of(size.repeats, lambda: jcs_sha256(entries))
            exported = best_of(size.repeats, lambda: sizes.append(export(logs, jwks, key, path)))
            document = json_value(read_json(path.read_text(encoding="utf-8")))
            assert isinstance(document, dict)
            reports = []
            verified = best_of(
                size.repeats, lambda: reports.append(verify_bundle(document, jwks=jwks))
            )
        peak = export_peak_bytes(logs, jwks, key, path)
        cli = cli_verify(path, Path(workdir))
    report = reports[-1]
    if not report.ok or report.entries_valid != len(entries):
        failed = [check.line() for check in report.checks if not check.ok][:5]
        raise RuntimeError(f"the bundle did not verify: {report.summary()} {failed}")
    file_bytes = sizes[-1]
    n = len(entries)
    figures: dict[str, Any] = {
        "sessions": len(logs),
        "entries": n,
        "logs_made_s": made_s,
        "cpu": cpu,
        "file_bytes": file_bytes,
        "export": {
            **exported.as_json(),
            "entries_per_s": n / exported.best_s,
            "peak_bytes_beyond_logs": peak,
        },
        "verify": {
            **verified.as_json(),
            "entries_per_s": n / verified.best_s,
            "summary": report.summary(),
        },
        "oanp_verify": {**cli, "entries_per_s": n / cli["wall_s"]},
        "jcs_sha256": {**peer.as_json(), "entries_per_s": n / peer.best_s},
        "export_over_jcs_sha256": exported.best_s / peer.best_s,
        "verify_over_jcs_sha256": verified.best_s / peer.best_s,
    }
    label = f"{n:,} entries"
    rows = [
        Row(
            f"export {label} (build_bundle + write)",
            f"{_s(exported.best_s)} ({rate(n / exported.best_s, 'entries/s')})",
            f"JCS + SHA-256 of the same entries: {_s(peer.best_s)} "
            f"({rate(n / peer.best_s, 'entries/s')}); export costs "
            f"{times(figures['export_over_jcs_sha256'])}",
        ),
        Row(
            "export: peak memory beyond the logs (tracemalloc)",
            _mb(peak),
            f"the file it writes: {_mb(file_bytes)}",
        ),
        Row(
            f"verify {label} in-process (verify_bundle)",
            f"{_s(verified.best_s)} ({rate(n / verified.best_s, 'entries/s')})",
            f"JCS + SHA-256 of the same entries: {_s(peer.best_s)}; verify costs "
            f"{times(figures['verify_over_jcs_sha256'])}",
        ),
        Row(
            "`oanp verify FILE`, a process of its own: wall time",
            _s(cli["wall_s"]),
            f"the same interpreter only importing the command: {_s(cli['baseline_wall_s'])}; "
            f"{cli['verdict']}",
        ),
        Row(
            "`oanp verify FILE`: peak resident memory",
            _mb(cli["peak_rss_bytes"]),
            f"the same interpreter only importing the command: "
            f"{_mb(cli['baseline_peak_rss_bytes'])}; the file: {_mb(file_bytes)}",
        ),
    ]
    notes = [
        f"{len(logs):,} whole SFO→JFK sessions of {ENTRIES_PER_SESSION} entries each, rehearsed "
        "in-process with a fixed key, salts, clock and ids (the same bytes every run), signed "
        "agreements included; making them is not timed.",
        "Export is oanp.audit.build_bundle (a JCS + SHA-256 Merkle leaf per entry, the RFC 6962 "
        "root, an Ed25519-signed checkpoint) and the compact JSON file the dashboard's export "
        "writes. Its peak memory is measured in a separate pass under tracemalloc, counting "
        "only what the export allocated beyond the logs already in memory.",
        "Verify checks every entry's hash and link, invariants I1–I7 and the signed agreement "
        "of every session, the Merkle root and the checkpoint's signature. In-process, it is "
        "timed on the already parsed file; `oanp verify` also reads and strictly parses it, "
        "and prints a line per check (to a file). Its peak memory is the process's maximum "
        "resident set (its VmHWM), interpreter and imports included.",
        "The in-process figures are the best of "
        f"{size.repeats} on one core; `oanp verify` runs once.",
    ]
    return SectionResult("export", TITLE, figures, rows, notes)


SECTION = Section("export", TITLE, run)
