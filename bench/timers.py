"""timers: 10,000 open sessions with armed timers on PostgreSQL; the sweep that expires those
due, against one bare UPDATE per session; and how late a real Celery worker fires a timer.

In a fresh PostgreSQL database of the section's own (``oanp_bench_timers``), Redis database 13
for the broker, the cache and the channel layer, as deployed:

- sweep: :mod:`bench.jobs` opens the sessions through the arbiter's own service, every other
  one with a deadline a moment ahead (these fall due) and the rest with an hour's response
  window (armed, not due). Their per-session tasks are not sent (the timer horizon is 0 for
  this step), so the sweep finds every due session itself: ``sweep_timers``, run until it finds
  nothing, batch after batch of the most overdue (``expire_due_sessions``: rows locked SKIP
  LOCKED, the machine's ``expire`` for each, one UPDATE, one INSERT, one announcement of the
  batch after its commit). The
  peer, in the same database and process: one UPDATE of one row per due session, each in its
  own transaction;
- lateness: a Celery worker with beat (``celery -A oanp_site worker -B``, the sweep every
  second as a backstop) runs; a few hundred sessions get deadlines spread over some seconds,
  each armed with its own task at the due time, as in production. Lateness is the close
  entry's ``received_at`` less the due time the session row held.
"""

from __future__ import annotations

import os
import re
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.report import Options, Row, Section, SectionResult, rate, times
from bench.service import (
    ROOT,
    Database,
    bench_database,
    fresh_database,
    percentile_ms,
    server_environment,
)
from tests.support.processes import (
    free_port,
    purge,
    run_json,
    spawn,
    terminate,
    wait_ready,
    worker_argv,
)

TITLE = "open sessions with armed timers: the sweep, against one UPDATE per session; lateness"
SWEEP_SECONDS = 1.0


@dataclass(frozen=True)
class Size:
    open_sessions: int
    due: int
    lead_s: float
    eta_sessions: int
    eta_spread_s: float
    eta_lead_s: float
    crowd: int
    crowd_lead_s: float


FULL = Size(
    open_sessions=10_000,
    due=5_000,
    lead_s=2,
    eta_sessions=300,
    eta_spread_s=15,
    eta_lead_s=10,
    crowd=1_000,
    crowd_lead_s=20,
)
QUICK = Size(
    open_sessions=60,
    due=30,
    lead_s=0.5,
    eta_sessions=20,
    eta_spread_s=1,
    eta_lead_s=1,
    crowd=30,
    crowd_lead_s=2,
)


def job(env: dict[str, str], *args: str) -> dict[str, Any]:
    return run_json(env, "bench.jobs", *args)


@contextmanager
def celery_worker(env: dict[str, str]) -> Iterator[Path]:
    """A Celery worker with beat on the section's database and broker; yields its log."""
    purge(env)
    log_path = ROOT / "var" / f"bench-worker-{os.getpid()}.log"
    log_path.parent.mkdir(exist_ok=True)
    process = spawn(worker_argv(4, beat_schedule=log_path.with_suffix(".beat")), env, log_path)
    try:
        wait_ready(process, log_path, timeout=60, error=RuntimeError)
        print(f"bench: timers: celery worker pid {process.pid}", file=sys.stderr)
        yield log_path
    finally:
        terminate(process, 20)
    for leftover in log_path.parent.glob(log_path.stem + ".beat*"):
        leftover.unlink(missing_ok=True)


_EXPIRED = re.compile(rb"tasks\.expire_session\[[^\]]+\] succeeded in [0-9.e-]+s: ([0-9]+)")
_SWEPT = re.compile(rb"tasks\.sweep_timers\[[^\]]+\] succeeded in [0-9.e-]+s: ([0-9]+)")


def closed_by(log: bytes) -> dict[str, int]:
    """How many sessions the worker's timer tasks closed (each closes every session due with
    its own), and how many its sweeps did."""
    return {
        "timer_task": sum(int(n) for n in _EXPIRED.findall(log)),
        "sweep": sum(int(n) for n in _SWEPT.findall(log)),
    }


def environment(database: Database) -> dict[str, str]:
    env = server_environment(database, free_port())
    env["OANP_TIMER_SWEEP_SECONDS"] = str(SWEEP_SECONDS)
    return env


def _ms(value: float) -> str:
    return f"{value:,.1f} ms"


def run(options: Options) -> SectionResult:
    size = QUICK if options.quick else FULL
    name = f"oanp_bench_timers_quick_{os.getpid()}" if options.quick else "oanp_bench_timers"
    database = bench_database(name)
    env = environment(database)
    with fresh_database(database) as version:
        sweep = job(
            {**env, "OANP_TIMER_HORIZON_SECONDS": "0"},
            "timers-sweep",
            str(size.open_sessions),
            str(size.due),
            str(size.lead_s),
        )
        print(
            f"bench: timers: {sweep['open_sessions']} open, {sweep['due']} due, swept in "
            f"{sweep['sweep_s']:.2f} s (peer {sweep['peer_s']:.2f} s)",
            file=sys.stderr,
            flush=True,
        )
        with celery_worker(env) as log_path:
            late = job(
                env,
                "timers-lateness",
                str(size.eta_sessions),
                str(size.eta_spread_s),
                str(size.eta_lead_s),
            )
            time.sleep(SWEEP_SECONDS * 1.5)  # the last log lines of the tasks
            closers = closed_by(log_path.read_bytes())
            crowd = job(
                env, "timers-lateness", str(size.crowd), "0", str(size.crowd_lead_s), "crowd"
            )
        log_path.unlink(missing_ok=True)
    if (
        sweep["closed_deadline_expired"] != sweep["due"]
        or late["closed"] != late["sessions"]
        or crowd["closed"] != crowd["sessions"]
    ):
        raise RuntimeError(
            f"not every due session closed: {sweep} {late['closed']} {crowd['closed']}"
        )
    lateness = late["lateness_s"]
    due = sweep["due"]
    sweep_fig = {
        "open_sessions": sweep["open_sessions"],
        "armed": sweep["armed"],
        "due": due,
        "not_due_left_open": sweep["still_open"],
        "sweep_s": sweep["sweep_s"],
        "sweep_calls": sweep["sweep_calls"],
        "sessions_per_s": due / sweep["sweep_s"],
        "ms_per_session": sweep["sweep_s"] * 1000 / due,
        "announce_ms_per_session": sweep["sweep_announce_s"] * 1000 / due,
        "opened_per_s": sweep["opened_per_s"],
    }
    peer = {
        "updates": sweep["peer_updates"],
        "s": sweep["peer_s"],
        "updates_per_s": sweep["peer_updates"] / sweep["peer_s"],
        "ms_per_update": sweep["peer_s"] * 1000 / sweep["peer_updates"],
    }
    lateness_fig = {
        "sessions": late["sessions"],
        "closed": late["closed"],
        "spread_s": size.eta_spread_s,
        "armed_after_first_due": late["armed_after_first_due"],
        "p50_ms": percentile_ms(lateness, 50),
        "p99_ms": percentile_ms(lateness, 99),
        "max_ms": max(lateness) * 1000,
        "min_ms": min(lateness) * 1000,
        "mean_ms": statistics.fmean(lateness) * 1000,
        "closed_by": closers,
        "sweep_interval_s": SWEEP_SECONDS,
        "worker": "celery worker -B, threads pool, concurrency 4",
    }
    crowd_fig = {
        "sessions": crowd["sessions"],
        "closed": crowd["closed"],
        "armed_after_due": crowd["armed_after_first_due"],
        "p50_ms": percentile_ms(crowd["lateness_s"], 50),
        "p99_ms": percentile_ms(crowd["lateness_s"], 99),
        "max_ms": max(crowd["lateness_s"]) * 1000,
        "all_seen_closed_ms": crowd["all_seen_closed_s"] * 1000,
    }
    figures: dict[str, Any] = {
        "postgresql": version,
        "redis": env["REDIS_URL"],
        "sweep": sweep_fig,
        "bare_update": peer,
        "sweep_over_bare": sweep_fig["ms_per_session"] / peer["ms_per_update"],
        "lateness": lateness_fig,
        "crowd": crowd_fig,
    }
    rows = [
        Row(
            f"sweep: expire {due:,} due of {sweep['open_sessions']:,} open sessions",
            f"{sweep['sweep_s']:,.2f} s ({rate(sweep_fig['sessions_per_s'], 'sessions/s')})",
            f"one bare UPDATE per session, same database: {peer['s']:,.2f} s "
            f"({rate(peer['updates_per_s'], 'updates/s')})",
        ),
        Row(
            "sweep: time per expired session",
            f"{sweep_fig['ms_per_session']:.2f} ms",
            f"bare UPDATE: {peer['ms_per_update']:.2f} ms; the sweep costs "
            f"{times(figures['sweep_over_bare'])}",
        ),
        Row(
            "sweep: of which the announcements after each batch's commit",
            f"{sweep_fig['announce_ms_per_session']:.2f} ms",
            "events.announce_all (listeners and wake-ups), timed through a wrapper in the same run",
        ),
        Row(
            f"timer lateness on a Celery worker, p50 / p99 ({late['sessions']} sessions)",
            f"{_ms(lateness_fig['p50_ms'])} / {_ms(lateness_fig['p99_ms'])}",
            f"max {_ms(lateness_fig['max_ms'])}; the backstop sweep runs every "
            f"{SWEEP_SECONDS:g} s; closed by their own task {closers['timer_task']}, "
            f"by the sweep {closers['sweep']}",
        ),
        Row(
            f"a crowd: {crowd['sessions']:,} deadlines at one instant, lateness p50 / p99",
            f"{_ms(crowd_fig['p50_ms'])} / {_ms(crowd_fig['p99_ms'])}",
            f"max {_ms(crowd_fig['max_ms'])}, by each close's own timestamp; every close "
            f"committed and seen {_ms(crowd_fig['all_seen_closed_ms'])} after the deadline",
        ),
    ]
    notes = [
        f"{sweep['open_sessions']:,} sessions opened through the arbiter's own service "
        f"(receive_envelope, in-process, {sweep_fig['opened_per_s']:,.0f} opens/s), every one "
        f"with a timer: {due:,} a deadline {size.lead_s:g} s after opening, the others a "
        "response window of an hour. The sweep is the sweep_timers task's body, called until "
        f"it finds nothing due ({sweep['sweep_calls']} calls, each closing batches of at most "
        f"{sweep['sweep_batch']} until one comes back short); it found every due session, "
        "since their own tasks were not sent for this step.",
        "Each batch is the whole service: SELECT … FOR UPDATE SKIP LOCKED of the due rows, the "
        "machine's close entry for each, chained with JCS + SHA-256, one UPDATE of the rows, "
        "one INSERT of the entries, the batch announced (listeners, then the channel layer on "
        "Redis) after commit. The peer is one UPDATE of one indexed row per due session, each "
        "its own transaction, in the same database from the same process.",
        f"Lateness: {late['sessions']} sessions with deadlines spread over "
        f"{size.eta_spread_s:g} s, each armed as in production with a Celery task at its due "
        "time (Redis broker); a worker with beat (threads pool, 4 threads) closes them. "
        "Lateness is the close entry's received_at less the due time, so it includes the "
        "broker's hand-over, the worker's timer and the service's transaction.",
        f"The crowd: {crowd['sessions']:,} sessions opened with one deadline "
        f"{size.crowd_lead_s:g} s ahead, each armed with its own task, on the same worker. The "
        "first tasks to fire close every due session in batches (as the sweep does, several "
        "threads sharing the crowd with SKIP LOCKED); the others find theirs closed. Lateness "
        "is each close's received_at, the clock its batch read before writing; the last figure "
        "is when the job, polling every 50 ms, saw the last close committed.",
    ]
    return SectionResult("timers", TITLE, figures, rows, notes)


SECTION = Section("timers", TITLE, run)
