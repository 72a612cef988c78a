"""broker: the embedded default's Celery broker (files under a folder, oanp_site.broker) beside
Redis, each through a real worker as ``make demo`` runs one (threads pool, two threads).

For each broker, in the same run and on the same machine:

- throughput: one producer process sends a burst of tasks as fast as it can while the worker
  consumes; the figure is tasks over the time from the first send to the last task's start;
- hand-over: tasks sent one at a time at a steady pace to an idle worker; the figure is each
  task's start less its send (both wall clocks of this machine), p50 / p99.

The task (:mod:`bench.broker_tasks`) only notes its times, so both figures are the broker's
and the worker's own cost. The embedded broker runs on a fresh temporary folder; Redis on
database 12, purged first.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.report import Options, Row, Section, SectionResult, rate, times
from bench.service import percentile_ms
from tests.support.processes import (
    product_free_environment,
    purge,
    run_json,
    spawn,
    tail,
    terminate,
    throwaway_secrets,
    wait_ready,
    worker_argv,
)

TITLE = "Celery's embedded broker beside Redis: task throughput and hand-over latency"
WORKER = "celery worker, threads pool, concurrency 2, as make demo runs it"
BROKERS = ("embedded", "redis")
# A database of the section's own: a worker of another section or of a test on the same Redis
# would take the section's tasks, and drop them as unknown to it.
REDIS_URL = "redis://127.0.0.1:6379/12"


@dataclass(frozen=True)
class Size:
    burst: int
    paced: int
    interval_s: float
    wait_s: float


FULL = Size(burst=5_000, paced=300, interval_s=0.05, wait_s=180)
QUICK = Size(burst=100, paced=20, interval_s=0.02, wait_s=60)


def environment(broker: str, folder: Path) -> dict[str, str]:
    """The product's settings on ``broker``; a database of their own that no task touches."""
    env = {**product_free_environment(), **throwaway_secrets()}
    env.update(
        DJANGO_SETTINGS_MODULE="oanp_site.settings",
        DATABASE_URL=f"sqlite:///{folder / 'db.sqlite3'}",
        OANP_BROKER_DIR=str(folder / "broker"),
        OANP_BENCH_BROKER_RECORD=str(folder / "record"),
        PYTHONUNBUFFERED="1",
    )
    if broker == "redis":
        env["REDIS_URL"] = REDIS_URL
    return env


@contextmanager
def worker(env: dict[str, str], log_path: Path) -> Iterator[None]:
    """A worker on the broker ``env`` names, with the bench's task, ready when yielded."""
    purge(env)
    process = spawn(worker_argv(2, include="bench.broker_tasks"), env, log_path)
    try:
        wait_ready(process, log_path, timeout=60, error=RuntimeError)
        yield
        if process.poll() is not None:
            raise RuntimeError(f"the Celery worker died:\n{tail(log_path)}")
    finally:
        terminate(process, 20)


def send(env: dict[str, str], phase: str, count: int, interval_s: float) -> float:
    send_s: float = run_json(env, "bench.broker_tasks", phase, str(count), str(interval_s))[
        "send_s"
    ]
    return send_s


def _runs(record: Path, phase: str) -> list[tuple[int, float, float]]:
    """Every run of the phase's tasks so far: (number, sent, started)."""
    try:
        lines = record.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    runs = []
    for line in lines:
        name, number, sent, started = line.split()
        if name == phase:
            runs.append((int(number), float(sent), float(started)))
    return runs


def ran(record: Path, phase: str, count: int, wait_s: float) -> list[tuple[int, float, float]]:
    """Every run of the phase's tasks, once all ``count`` have run at least once."""
    deadline = time.monotonic() + wait_s
    while True:
        runs = _runs(record, phase)
        if len({number for number, _, _ in runs}) >= count:
            return runs
        if time.monotonic() > deadline:
            raise RuntimeError(f"{phase}: {len(runs)} of {count} tasks ran in {wait_s:g} s")
        time.sleep(0.1)


def measure(broker: str, size: Size) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"bench-broker-{broker}-") as name:
        folder = Path(name)
        env = environment(broker, folder)
        record = folder / "record"
        with worker(env, folder / "worker.log"):
            burst_send_s = send(env, "burst", size.burst, 0)
            burst = ran(record, "burst", size.burst, size.wait_s)
            paced_send_s = send(env, "paced", size.paced, size.interval_s)
            paced = ran(record, "paced", size.paced, size.wait_s)
        rejected = folder / "broker" / "rejected"
        set_aside = len(os.listdir(rejected)) if rejected.exists() else 0
    wall_s = max(started for _, _, started in burst) - min(sent for _, sent, _ in burst)
    handover = [started - sent for _, sent, started in paced]
    return {
        "burst": {
            "tasks": size.burst,
            "runs": len(burst),
            "send_s": burst_send_s,
            "sent_per_s": size.burst / burst_send_s,
            "wall_s": wall_s,
            "tasks_per_s": size.burst / wall_s,
        },
        "handover": {
            "tasks": size.paced,
            "runs": len(paced),
            "interval_s": size.interval_s,
            "send_s": paced_send_s,
            "p50_ms": percentile_ms(handover, 50),
            "p99_ms": percentile_ms(handover, 99),
            "max_ms": max(handover) * 1000,
            "min_ms": min(handover) * 1000,
            "mean_ms": statistics.fmean(handover) * 1000,
        },
        "rejected": set_aside,
    }


def _spread(handover: dict[str, Any]) -> str:
    return f"{handover['p50_ms']:,.1f} / {handover['p99_ms']:,.1f} ms"


def run(options: Options) -> SectionResult:
    size = QUICK if options.quick else FULL
    measured = {}
    for broker in BROKERS:
        measured[broker] = measure(broker, size)
        print(
            f"bench: broker: {broker}: {measured[broker]['burst']['tasks_per_s']:,.0f} tasks/s, "
            f"hand-over p99 {measured[broker]['handover']['p99_ms']:,.1f} ms",
            file=sys.stderr,
            flush=True,
        )
    embedded, redis = measured["embedded"], measured["redis"]
    figures: dict[str, Any] = {
        "worker": WORKER,
        "redis": REDIS_URL,
        **measured,
        "throughput_embedded_over_redis": (
            embedded["burst"]["tasks_per_s"] / redis["burst"]["tasks_per_s"]
        ),
    }
    rows = [
        Row(
            f"task throughput through a worker, embedded broker ({size.burst:,} tasks)",
            rate(embedded["burst"]["tasks_per_s"], "tasks/s"),
            f"Redis, same worker: {rate(redis['burst']['tasks_per_s'], 'tasks/s')}; the "
            f"embedded broker reaches {times(figures['throughput_embedded_over_redis'])} of it",
        ),
        Row(
            f"hand-over, send → task start, p50 / p99, embedded broker ({size.paced} tasks)",
            _spread(embedded["handover"]),
            f"Redis: {_spread(redis['handover'])}; max {embedded['handover']['max_ms']:,.1f} "
            f"against {redis['handover']['max_ms']:,.1f} ms",
        ),
    ]
    notes = [
        f"A real worker ({WORKER}) and a task that only notes when it was sent and when it "
        "started. Throughput: one producer process sends the burst as fast as it can "
        f"({rate(embedded['burst']['sent_per_s'], 'sends/s')} to the embedded broker, "
        f"{rate(redis['burst']['sent_per_s'], 'sends/s')} to Redis) while the worker "
        "consumes; tasks over the time from the first send to the last task's start.",
        f"Hand-over: {size.paced} tasks sent one every {size.interval_s * 1000:g} ms to an "
        "idle worker; each task's start less its send. The embedded broker is a folder "
        "the worker polls every 0.1 s while it is idle (oanp_site.broker), so its hand-over "
        "is about half that on average and at most that; Redis pushes each task at once.",
        "Every task ran at least once on both brokers "
        f"(runs: {embedded['burst']['runs'] + embedded['handover']['runs']:,} embedded, "
        f"{redis['burst']['runs'] + redis['handover']['runs']:,} Redis, for "
        f"{size.burst + size.paced:,} tasks each); files the embedded broker set aside as "
        f"unreadable: {embedded['rejected']}.",
    ]
    return SectionResult("broker", TITLE, figures, rows, notes)


SECTION = Section("broker", TITLE, run)
