"""export: an audit bundle of 1,000,000 entries written and verified, each in a process of its
own, against JCS + SHA-256 of the same entries.

The logs are made once, before any clock starts: whole SFO→JFK sessions (nine entries each,
the published trace) rehearsed in-process between the reference agents, with a fixed arbiter
key, fixed salts, a clock that steps one second per reading and counter ids, so every run
bundles the same bytes. They are written one session per line to a file, as a database cursor
would hand them over, and never held together in memory. Then, each in a process of its own,
timed (wall) with its peak resident memory (VmHWM):

- export: :class:`oanp.audit.BundleWriter` fed the sessions line by line, as the dashboard's
  export task feeds it from its cursor (JCS of every entry as a Merkle leaf, the RFC 6962
  root built incrementally, the manifest, the signed checkpoint);
- ``oanp verify FILE``: the auditor's command, streaming the bundle (every hash link,
  invariants I1–I7 and the agreement's signature per session, the Merkle root, the manifest
  and the checkpoint), its report printed to a file: with its default jobs (a worker process
  per usable core checking the logs) and, beside it, ``--jobs 1`` (no worker), the two reports
  compared byte for byte; its peak memory is its own and each worker's;
- the peer: reading the same session lines and JCS + SHA-256 of every entry, the least any
  export or check must do; beside it, the interpreter importing the command and nothing else.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from itertools import count
from pathlib import Path
from typing import Any

from bench.report import Options, Row, Section, SectionResult, judged, rate, times
from oanp.agents.parties import BuyerAgent, MerchantAgent
from oanp.agents.rehearsal import rehearse
from oanp.agents.strategies import ReferenceBuyer, ReferenceMerchant
from oanp.agents.vaults import BuyerVault, MerchantVault
from oanp.audit import BundleWriter
from oanp.net.workers import usable_cores
from oanp.wire.canonical import JsonObject, canonical_bytes
from oanp.wire.commitments import encode_salt
from oanp.wire.signing import SigningKey, jwks_document
from oanp.wire.state import Arbiter
from tests.support.processes import children

TITLE = "export and verify an audit bundle, against JCS + SHA-256 of the same entries"
ARBITER_ID = "arbiter.bench"
JWKS_URI = "https://arbiter.bench/.well-known/jwks.json"
SEED = bytes(range(32))
START = datetime(2026, 4, 28, 9, 0, tzinfo=UTC)
CREATED_AT = datetime(2026, 4, 29, 9, 0, tzinfo=UTC)
ENTRIES_PER_SESSION = 9
MB = 1024 * 1024
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Size:
    entries: int


FULL = Size(entries=1_000_000)
QUICK = Size(entries=2_000)


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


def bench_key() -> SigningKey:
    return SigningKey.from_ed25519_seed(SEED)


def write_logs(entries: int, path: Path) -> int:
    """Enough whole sessions to hold at least ``entries`` entries, one per line; how many."""
    arbiter = Arbiter(ARBITER_ID, bench_key(), JWKS_URI)
    sessions = -(-entries // ENTRIES_PER_SESSION)
    with path.open("w", encoding="utf-8") as out:
        for number in range(sessions):
            out.write(json.dumps(sfo_jfk_log(number, arbiter), separators=(",", ":")) + "\n")
    return sessions


def _logs(path: Path) -> Any:
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            yield json.loads(line)


# What each process of its own does (``python -m bench.export WORK ...``) ----------------------


def export_logs(logs: Path, bundle: Path) -> None:
    """The export: the logs, one session at a time, into a bundle file."""
    key = bench_key()
    with bundle.open("wb") as out:
        writer = BundleWriter(
            out, jwks=jwks_document([key.public_jwk()]), key=key, arbiter_id=ARBITER_ID
        )
        for log in _logs(logs):
            writer.add(log)
        writer.finish(created_at=CREATED_AT, scope={"bench": True})


def jcs_sha256(logs: Path) -> None:
    """The peer: read the same lines, JCS + SHA-256 of every entry."""
    for log in _logs(logs):
        for entry in log:
            hashlib.sha256(canonical_bytes(entry)).digest()


class ChildPeaks:
    """The peak resident set (VmHWM, bytes) of each child process, read from /proc while it
    lives: every few milliseconds, its last reading before it exits being its peak but for
    what it grew in those last milliseconds (``resource``'s maxrss of the children, read once
    they are gone, gives the largest exactly)."""

    def __init__(self, every_s: float = 0.02) -> None:
        self.peaks: dict[int, int] = {}
        self._every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> ChildPeaks:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._stop.wait(self._every_s):
            for pid in children(os.getpid()):
                peak = vm_hwm(pid)
                if peak:
                    self.peaks[pid] = max(peak, self.peaks.get(pid, 0))


def vm_hwm(pid: int | str = "self") -> int:
    """The peak resident set of process ``pid`` in bytes; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return 0


def _child(argv: list[str]) -> int:
    work = argv[0]
    peaks = ChildPeaks()
    if work == "export":
        export_logs(Path(argv[1]), Path(argv[2]))
    elif work == "peer":
        jcs_sha256(Path(argv[1]))
    elif work == "verify":
        from oanp.net.cli import main

        with peaks:
            code = main(argv[1:])
        if code:
            return code
    # "import": nothing but the imports above, for the floor of time and memory.
    sys.stdout.flush()
    largest_child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    sys.stderr.write(
        json.dumps(
            {
                "peak": vm_hwm(),
                "children": list(peaks.peaks.values()),
                "largest_child": largest_child,
            }
        )
        + "\n"
    )
    return 0


@dataclass(frozen=True)
class Run:
    exit_code: int
    wall_s: float
    peak_rss_bytes: int
    #: Each worker process's peak, and the largest child's as the kernel kept it.
    children_peak_rss_bytes: tuple[int, ...] = ()
    largest_child_rss_bytes: int = 0

    @property
    def tree_peak_rss_bytes(self) -> int:
        """The process's peak and each child's, added: an upper bound of the tree's at any
        moment, since the children's pages shared with the process they were forked from
        count in each."""
        return self.peak_rss_bytes + sum(self.children_peak_rss_bytes)

    def as_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "exit_code": self.exit_code,
            "wall_s": self.wall_s,
            "peak_rss_bytes": self.peak_rss_bytes,
        }
        if self.children_peak_rss_bytes:
            found |= {
                "workers": len(self.children_peak_rss_bytes),
                "workers_peak_rss_bytes": list(self.children_peak_rss_bytes),
                "largest_worker_rss_bytes": self.largest_child_rss_bytes,
                "tree_peak_rss_bytes": self.tree_peak_rss_bytes,
            }
        return found


def run_apart(args: list[str], stdout: Any = subprocess.DEVNULL) -> Run:
    """``python -m bench.export ARGS`` in a process of its own: exit code, wall, peak RSS
    (its own VmHWM: rusage's maxrss would also count the parent it forked from) and its
    children's."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "bench.export", *args],
        cwd=ROOT,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0 and args[0] != "verify":
        raise RuntimeError(f"bench.export {args[0]} failed: {done.stderr[-2000:]}")
    lines = done.stderr.strip().splitlines()
    try:
        peaks = json.loads(lines[-1])
    except (IndexError, ValueError):
        return Run(done.returncode, wall, 0)
    return Run(
        done.returncode,
        wall,
        peaks["peak"],
        tuple(sorted(peaks["children"])),
        peaks["largest_child"],
    )


# The section -----------------------------------------------------------------------------------


def _verify(bundle: Path, report_path: Path, n: int, *options: str) -> tuple[Run, str]:
    """``oanp verify`` of the bundle, its report in ``report_path``, which must say that every
    one of the ``n`` entries is valid: the run and its verdict."""
    with report_path.open("wb") as report:
        verified = run_apart(["verify", "verify", str(bundle), *options], stdout=report)
    lines = report_path.read_text(encoding="utf-8").strip().splitlines()
    verdict = lines[-1] if lines else ""
    if verified.exit_code != 0 or not verdict.startswith(f"VERIFIED: {n}/{n} entries valid"):
        raise RuntimeError(f"the bundle did not verify ({verified.exit_code}): {verdict}")
    return verified, verdict


def _s(seconds: float) -> str:
    return f"{seconds:,.2f} s"


def _mb(value: float) -> str:
    return f"{value / MB:,.1f} MB"


def run(options: Options) -> SectionResult:
    size = QUICK if options.quick else FULL
    with tempfile.TemporaryDirectory(prefix="oanp-bench-export-") as workdir:
        logs, bundle = Path(workdir) / "logs.jsonl", Path(workdir) / "bundle.json"
        started = time.perf_counter()
        sessions = write_logs(size.entries, logs)
        made_s = time.perf_counter() - started
        n = sessions * ENTRIES_PER_SESSION
        print(
            f"bench: export: {n:,} entries in {sessions:,} sessions made in {made_s:.1f} s",
            file=sys.stderr,
            flush=True,
        )
        floor = run_apart(["import"])
        peer = run_apart(["peer", str(logs)])
        exported = run_apart(["export", str(logs), str(bundle)])
        jobs = usable_cores()
        verified, verdict = _verify(bundle, Path(workdir) / "verify.txt", n)
        alone, _ = _verify(bundle, Path(workdir) / "verify-1.txt", n, "--jobs", "1")
        if (Path(workdir) / "verify.txt").read_bytes() != (
            Path(workdir) / "verify-1.txt"
        ).read_bytes():
            raise RuntimeError("oanp verify printed another report with workers than without")
        file_bytes = bundle.stat().st_size
        logs_bytes = logs.stat().st_size
    figures: dict[str, Any] = {
        "sessions": sessions,
        "entries": n,
        "logs_made_s": made_s,
        "logs_bytes": logs_bytes,
        "file_bytes": file_bytes,
        "import_only": floor.as_json(),
        "jcs_sha256": {**peer.as_json(), "entries_per_s": n / peer.wall_s},
        "export": {**exported.as_json(), "entries_per_s": n / exported.wall_s},
        "oanp_verify": {
            **verified.as_json(),
            "jobs": jobs,
            "entries_per_s": n / verified.wall_s,
            "verdict": verdict,
        },
        "oanp_verify_one_job": {**alone.as_json(), "entries_per_s": n / alone.wall_s},
        "export_over_jcs_sha256": exported.wall_s / peer.wall_s,
        "verify_over_jcs_sha256": verified.wall_s / peer.wall_s,
        "verify_one_job_over_jobs": alone.wall_s / verified.wall_s,
    }
    label = f"{n:,} entries"
    verify_rate = n / verified.wall_s
    largest_worker = max((*verified.children_peak_rss_bytes, verified.largest_child_rss_bytes))
    rows = [
        Row(
            f"export {label} (BundleWriter, a process of its own)",
            f"{_s(exported.wall_s)} ({rate(n / exported.wall_s, 'entries/s')})",
            f"JCS + SHA-256 of the same entries, read the same way: {_s(peer.wall_s)} "
            f"({rate(n / peer.wall_s, 'entries/s')}); export costs "
            f"{times(figures['export_over_jcs_sha256'])}",
        ),
        Row(
            "export: peak resident memory",
            _mb(exported.peak_rss_bytes),
            f"the peer: {_mb(peer.peak_rss_bytes)}; the interpreter with the imports only: "
            f"{_mb(floor.peak_rss_bytes)}; the file it writes: {_mb(file_bytes)}",
            "< 150 MB",
        ),
        Row(
            f"`oanp verify FILE` of {label} (its default: {jobs} worker processes)",
            f"{_s(verified.wall_s)} ({rate(verify_rate, 'entries/s')})",
            f"`--jobs 1`, no worker: {_s(alone.wall_s)} "
            f"({rate(n / alone.wall_s, 'entries/s')}); the workers give "
            f"{times(figures['verify_one_job_over_jobs'])} its rate, the same report byte for "
            f"byte; JCS + SHA-256 of the same entries: {_s(peer.wall_s)}, verify costs "
            f"{times(figures['verify_over_jcs_sha256'])}; {verdict}",
            judged("≥ 50,000 entries/s", verify_rate >= 50_000),
        ),
        Row(
            "`oanp verify FILE`: peak resident memory, the reading process / the largest worker",
            f"{_mb(verified.peak_rss_bytes)} / {_mb(largest_worker)}",
            f"the {1 + len(verified.children_peak_rss_bytes)} processes added: "
            f"{_mb(verified.tree_peak_rss_bytes)}; `--jobs 1`: {_mb(alone.peak_rss_bytes)}; "
            f"the interpreter with the imports only: {_mb(floor.peak_rss_bytes)}; "
            f"the file: {_mb(file_bytes)}",
            judged(
                "< 150 MB each",
                max(verified.peak_rss_bytes, largest_worker, alone.peak_rss_bytes) < 150 * MB,
            ),
        ),
    ]
    notes = [
        f"{sessions:,} whole SFO→JFK sessions of {ENTRIES_PER_SESSION} entries each, rehearsed "
        "in-process with a fixed key, salts, clock and ids (the same bytes every run), signed "
        f"agreements included, written one per line ({_mb(logs_bytes)}); making them "
        f"({made_s:,.0f} s) is not timed.",
        "Each figure is one run of a process of its own on an otherwise idle machine: wall "
        "time from start to exit, interpreter start and imports included, and the process's "
        "peak resident set (VmHWM); a worker's, read from /proc every 20 ms while it lives, "
        "counts the pages it shares with the process it was forked from, so the processes' "
        "sum is more than they ever held together.",
        "Export is oanp.audit.BundleWriter fed one session at a time, as the export task feeds "
        "it from its server-side cursor: each entry's JCS written as it is hashed into its "
        "Merkle leaf, the RFC 6962 root built incrementally, the manifest's rows spooled to a "
        "temporary file, then the manifest, the Ed25519-signed checkpoint.",
        "`oanp verify` reads the bundle one session at a time and checks every entry's hash "
        "and link, invariants I1–I7 and the signed agreement of every session, the manifest, "
        "the Merkle root and the checkpoint's signature, printing a line per check (to a "
        "file). It keeps a small record per session until the manifest is read, and no entry. "
        f"By default ({jobs} usable cores here) the reading process hands each session's line, "
        "unparsed, to one of as many worker processes, a few chunks ahead and no more; each "
        "parses it with the strict decoder and makes that session's checks, and sends back "
        "its report lines and its Merkle leaves (the JCS + SHA-256 of the hash chain), which "
        "the reader prints and builds the tree of in the file's order; `--jobs 1` makes every "
        "check in the reading process.",
        f"What bounds verify is CPU in pure Python, per entry: the strict JSON decoder and the "
        "normalization of every number, the envelope parser (every field validated as the API "
        "validates it), the invariants' walk, the JCS + SHA-256 of the hash chain, and an "
        f"Ed25519 verification per session. The workers divide that by the cores ({jobs} "
        f"here: {times(figures['verify_one_job_over_jobs'])} the rate of one process), less "
        "what the reading process keeps doing alone (reading, the tree, the manifest, the "
        "printing) and the hand-over; past what cores give, the aim needs the per-entry "
        "checks faster.",
    ]
    return SectionResult("export", TITLE, figures, rows, notes)


SECTION = Section("export", TITLE, run)


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
