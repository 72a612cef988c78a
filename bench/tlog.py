"""tlog: the transparency log's integrator, on PostgreSQL: what one batch of waiting entries
costs, against JCS + SHA-256 of the same leaves alone, and how long after its commit an entry
is in a signed checkpoint with envelopes arriving at the service section's rate.

In a fresh database of the section's own (``oanp_bench_tlog``), in one process
(:mod:`bench.jobs`, ``tlog-integration``):

- batch: opens submitted through the arbiter's own service until ``backlog`` entries wait; then
  one ``integrate()`` takes them all (the state row locked, the committed ids scanned, a leaf
  hash per entry and the tile hashes above full tiles, one INSERT of the leaves and one of the
  hashes, the root from the stored hashes, the checkpoint signed and stored). The peer: the
  same leaves' JCS + SHA-256 and nothing else;
- latency: opens arrive at ``rate`` a second for ``seconds`` while a thread runs
  ``integrate()`` every second, as beat runs the ``integrate-log`` task; each entry's latency
  is the first checkpoint covering it, as signed (``signed_at``, read as its run began), less
  the entry's ``received_at``.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass
from typing import Any

from bench.report import Options, Row, Section, SectionResult, rate
from bench.service import bench_database, fresh_database, percentile_ms, server_environment
from tests.support.processes import free_port, run_json

TITLE = (
    "the transparency log: an integration batch, against hashing its leaves; commit to checkpoint"
)


@dataclass(frozen=True)
class Size:
    backlog: int
    rate: float
    seconds: float


#: The service section's arbiter served about 230 envelopes/s at 10 pairs: the load to keep up with.
FULL = Size(backlog=5_000, rate=230, seconds=20)
QUICK = Size(backlog=200, rate=50, seconds=3)


def run(options: Options) -> SectionResult:
    size = QUICK if options.quick else FULL
    name = f"oanp_bench_tlog_quick_{os.getpid()}" if options.quick else "oanp_bench_tlog"
    database = bench_database(name)
    env = server_environment(database, free_port())
    with fresh_database(database) as version:
        found = run_json(
            env,
            "bench.jobs",
            "tlog-integration",
            str(size.backlog),
            str(size.rate),
            str(size.seconds),
        )
    latency = found["latency_s"]
    added = found["batch_added"]
    batch = {
        "entries": added,
        "s": found["batch_s"],
        "ms_per_entry": found["batch_s"] * 1000 / added,
        "entries_per_s": added / found["batch_s"],
        "hashing_s": found["hashing_s"],
        "over_hashing": found["batch_s"] / found["hashing_s"],
    }
    runs = found["integrator_runs_s"]
    arrival = {
        "target_per_s": size.rate,
        "achieved_per_s": found["achieved_rate"],
        "entries": found["sent"],
        "p50_ms": percentile_ms(latency, 50),
        "p99_ms": percentile_ms(latency, 99),
        "max_ms": max(latency) * 1000,
        "mean_ms": statistics.fmean(latency) * 1000,
        "integrator_run_mean_ms": statistics.fmean(runs) * 1000 if runs else None,
        "integrator_run_max_ms": max(runs) * 1000 if runs else None,
    }
    figures: dict[str, Any] = {"postgresql": version, "batch": batch, "arrival": arrival}
    rows = [
        Row(
            f"integrate a batch of {added:,} waiting entries",
            f"{batch['s'] * 1000:,.0f} ms ({rate(batch['entries_per_s'], 'entries/s')}, "
            f"{batch['ms_per_entry']:.3f} ms an entry)",
            f"JCS + SHA-256 of the same leaves alone: {found['hashing_s'] * 1000:,.0f} ms; "
            f"the batch costs {batch['over_hashing']:.1f}× that",
        ),
        Row(
            f"commit to signed checkpoint, p50 / p99, at {arrival['achieved_per_s']:,.0f} "
            "entries/s",
            f"{arrival['p50_ms']:,.0f} / {arrival['p99_ms']:,.0f} ms",
            f"max {arrival['max_ms']:,.0f} ms over {arrival['entries']:,} entries; the "
            "integrator runs every second (beat's integrate-log), each run "
            f"{arrival['integrator_run_mean_ms'] or 0:,.1f} ms on average, at most "
            f"{arrival['integrator_run_max_ms'] or 0:,.1f} ms",
        ),
    ]
    notes = [
        "An entry waits for the next run of the integrator (every second), then for that run's "
        "batch: about half a second on average and a second at worst, plus the run itself "
        f"({arrival['integrator_run_mean_ms'] or 0:,.0f} ms on average here). Witnesses' "
        "cosignatures come after, from the deliveries queue, and do not delay the checkpoint.",
        f"The arrivals are opens submitted through the arbiter's service by one thread of the "
        f"job, aiming at {size.rate:g} a second (the service section's arbiter at 10 pairs); "
        f"it reached {arrival['achieved_per_s']:,.0f} a second here. One batch of "
        f"{added:,} entries, the backlog of some {added / max(arrival['achieved_per_s'], 1):,.0f}"
        " s at that rate, takes well under the second between runs: the integrator keeps up.",
    ]
    return SectionResult("tlog", TITLE, figures, rows, notes)


SECTION = Section("tlog", TITLE, run)
