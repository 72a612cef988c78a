"""health: what one probe of ``/healthz`` and ``/readyz`` and one scrape of ``/metrics`` cost,
against a real Daphne with a Celery worker and beat running, so that ``/readyz`` answers 200.

Two deployments, one after the other, each with a metrics folder of its own:

- PostgreSQL + Redis: a fresh database of the section's own on the server ``DATABASE_URL``
  names (:func:`bench.service.bench_database`), Redis database 9 for the broker, the cache and
  the channel layer (a worker of another section on another database takes none of its tasks);
- the embedded default: SQLite and the file broker in a temporary folder, the in-memory channel
  layer.

Each endpoint is requested one request at a time from a client process of its own
(:mod:`bench.load`), as a probe or a scraper does; latency is the client's round trip, and the
CPU per request is Daphne's (and, on PostgreSQL, its backends') over the run
(:func:`bench.service.load`).

Then, on PostgreSQL + Redis, the scrape again after more processes have left their counters
in the metrics folder, as restarts do: prometheus-client's multiprocess mode reads and sums
every file there on each scrape, and nothing removes a dead process's counters. Each added
process is ``python -m bench.health``, which writes the counters of a server and a worker
that have seen a day's traffic (:func:`write_counters`) and exits.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench import broker
from bench.report import Options, Row, Section, SectionResult
from bench.service import (
    ROOT,
    Database,
    Server,
    bench_database,
    daphne,
    fresh_database,
    load,
    prepare,
    server_environment,
    summary,
)
from bench.timers import celery_worker
from tests.support.processes import free_port

TITLE = "the cost of a probe of /healthz and /readyz and a scrape of /metrics"
REDIS_URL = "redis://127.0.0.1:6379/9"
ENDPOINTS = ("/healthz", "/readyz", "/metrics")
DEPLOYMENTS = {"postgresql": "PostgreSQL + Redis", "sqlite": "SQLite + file broker"}
READY_WAIT_S = 60
#: Probes of /readyz come seconds apart, each a round of checks; back to back, a server that
#: reuses a reading for a moment would be measured answering from it.
PACED = {"/readyz": 1.25}


@dataclass(frozen=True)
class Size:
    requests: dict[str, int]
    warmup: int
    #: Processes added to the metrics folder before each further scrape, cumulatively.
    added_processes: tuple[int, ...]
    #: Scrapes at each of those steps: the last ones are the slowest of the section.
    growth_requests: int


FULL = Size(
    requests={"/healthz": 2_000, "/readyz": 60, "/metrics": 500},
    warmup=50,
    added_processes=(20, 100),
    growth_requests=150,
)
QUICK = Size(
    requests={"/healthz": 10, "/readyz": 4, "/metrics": 10},
    warmup=3,
    added_processes=(5,),
    growth_requests=10,
)


# The counters a dead process leaves behind -----------------------------------------------------

ROUTES = (
    ("POST", "/oanp/v0.1/envelopes", (201, 400, 401, 409, 422, 429)),
    ("GET", "/oanp/v0.1/sessions/<str:session_id>", (200, 404)),
    ("GET", "/oanp/v0.1/sessions/<str:session_id>/log", (200, 404)),
    ("GET", "/oanp/v0.1/sessions/<str:session_id>/events", (200,)),
    ("GET", "/oanp/v0.1/inbox", (200,)),
    ("GET", "/.well-known/jwks.json", (200,)),
    ("GET", "/", (200, 302)),
    ("GET", "/healthz", (200,)),
    ("GET", "/readyz", (200, 503)),
    ("GET", "/metrics", (200,)),
)
TASKS = (
    "arbiter_app.tasks.expire_session",
    "arbiter_app.tasks.sweep_timers",
    "arbiter_app.tasks.sweep_deliveries",
    "arbiter_app.tasks.deliver_handoff",
    "arbiter_app.tasks.deliver_callback",
    "arbiter_app.tasks.heartbeat",
)


def write_counters() -> None:
    """Every counter and histogram of :mod:`arbiter_app.metrics`, with the labels a server and
    a worker that have run a day come to use, into this process's files."""
    from arbiter_app import metrics
    from oanp.wire.envelope import MessageType

    for method, route, statuses in ROUTES:
        for status in statuses:
            metrics.REQUEST_SECONDS.labels(method=method, route=route, status=status).observe(0.01)
    for type_ in MessageType:
        for outcome in ("accepted", "replayed", "refused"):
            metrics.count_envelope(type_.value, outcome)
    for code in ("unauthorized", "rate_limited", "invalid_envelope", "out_of_turn"):
        metrics.REFUSALS.labels(code=code).inc()
    for status in ("continue", "agreed", "failed"):
        metrics.VERDICTS.labels(status=status).inc()
    for kind in ("handoff", "callback"):
        for delivery in ("delivered", "retry", "rejected", "gone"):
            metrics.DELIVERIES.labels(kind=kind, outcome=delivery).inc()
    for task in TASKS:
        for outcome in ("success", "failure"):
            metrics.TASKS.labels(task=task, outcome=outcome).inc()
    metrics.TIMER_LATENESS.observe(0.2)


def add_processes(env: dict[str, str], count: int) -> None:
    """``count`` processes, all at once, each writing its counters into the folder and exiting."""
    writers = [
        subprocess.Popen(
            [sys.executable, "-m", "bench.health"],
            cwd=ROOT,
            env=env,
            stderr=subprocess.PIPE,
        )
        for _ in range(count)
    ]
    for writer in writers:
        _, err = writer.communicate()
        if writer.returncode != 0:
            raise RuntimeError(f"a counter-writing process failed:\n{err.decode()[-4000:]}")


def folder_facts(folder: Path) -> dict[str, int]:
    """Files in the metrics folder, their bytes, and how many processes wrote them; a file is
    named ``KIND_PID.db``."""
    files = list(folder.glob("*.db"))
    return {
        "files": len(files),
        "bytes": sum(f.stat().st_size for f in files),
        "processes": len({f.stem.rsplit("_", 1)[-1] for f in files}),
    }


# A deployment ----------------------------------------------------------------------------------


def wait_ready(server: Server) -> None:
    """Until ``/readyz`` says 200: the worker's first heartbeat and beat's start are written."""
    deadline = time.monotonic() + READY_WAIT_S
    while True:
        answer = httpx.get(f"{server.url}/readyz", timeout=10)
        if answer.status_code == 200:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"/readyz stayed {answer.status_code}: {answer.text[:2000]}")
        time.sleep(0.2)


def measure(
    env: dict[str, str], server: Server, database: Database | None, path: str, requests: int
) -> dict[str, Any]:
    """``requests`` GETs of ``path``, one at a time, paced where :data:`PACED` says."""
    report = load(
        env,
        server,
        database,
        {
            "kind": "get",
            "url": server.url,
            "path": path,
            "workers": 1,
            "requests": requests,
            "status": 200,
            "interval_s": PACED.get(path, 0.0),
        },
    )
    figures = summary(report)
    figures["postgres_cpu_ms_per_request"] = report["postgres_cpu_s"] * 1000 / report["requests"]
    return figures


@contextmanager
def running(env: dict[str, str], port: int) -> Iterator[Server]:
    """The worker with beat and Daphne on ``env``, once ``/readyz`` answers 200."""
    with celery_worker(env) as log_path, daphne(env, port) as server:
        wait_ready(server)
        yield server
    log_path.unlink(missing_ok=True)


def endpoints(
    env: dict[str, str], server: Server, database: Database | None, size: Size
) -> dict[str, Any]:
    with httpx.Client(base_url=server.url, timeout=10) as client:
        for path in ENDPOINTS:  # untimed: imports, the pool, the first files read
            for _ in range(size.warmup):
                client.get(path).raise_for_status()
    return {path: measure(env, server, database, path, size.requests[path]) for path in ENDPOINTS}


def on_postgresql(size: Size, name: str, metrics_dir: Path) -> dict[str, Any]:
    database = bench_database(name)
    port = free_port()
    env = server_environment(database, port)
    env.update(REDIS_URL=REDIS_URL, PROMETHEUS_MULTIPROC_DIR=str(metrics_dir))
    with fresh_database(database) as version:
        prepare(env, 0)
        with running(env, port) as server:
            measured = endpoints(env, server, database, size)
            growth = [{**folder_facts(metrics_dir), "metrics": measured["/metrics"]}]
            for count in size.added_processes:
                add_processes(env, count)
                scrape = measure(env, server, database, "/metrics", size.growth_requests)
                growth.append({**folder_facts(metrics_dir), "metrics": scrape})
                print(
                    f"bench: health: /metrics with {growth[-1]['processes']} processes' files: "
                    f"p50 {scrape['p50_ms']:.1f} ms",
                    file=sys.stderr,
                    flush=True,
                )
    return {"postgresql": version, "redis": REDIS_URL, "endpoints": measured, "growth": growth}


def on_sqlite(size: Size, folder: Path) -> dict[str, Any]:
    env = broker.environment("embedded", folder)
    env["PROMETHEUS_MULTIPROC_DIR"] = str(folder / "metrics")
    port = free_port()
    prepare(env, 0)
    with running(env, port) as server:
        measured = endpoints(env, server, None, size)
    return {"database": "sqlite", "broker": "file", "endpoints": measured}


# The section -----------------------------------------------------------------------------------


def _spread(figures: dict[str, Any]) -> str:
    return f"{figures['p50_ms']:,.2f} / {figures['p99_ms']:,.2f} ms"


def _cpu(figures: dict[str, Any], postgres: bool) -> str:
    text = f"Daphne {figures['server_cpu_ms_per_request']:.2f} ms"
    if postgres:
        text += f", PostgreSQL backends {figures['postgres_cpu_ms_per_request']:.2f} ms"
    return text


def endpoint_rows(deployment: str, measured: dict[str, Any]) -> list[Row]:
    postgres = deployment == "postgresql"
    floor = measured["/healthz"]
    rows = []
    for path in ENDPOINTS:
        figures = measured[path]
        beside = f"CPU per request: {_cpu(figures, postgres)}"
        if path != "/healthz":
            beside += f"; /healthz: {_spread(floor)}, {_cpu(floor, postgres)}"
        rows.append(
            Row(
                f"{DEPLOYMENTS[deployment]}: GET {path}, latency p50 / p99 "
                f"({figures['requests']:,} requests)",
                _spread(figures),
                beside,
            )
        )
    return rows


def growth_rows(growth: list[dict[str, Any]]) -> list[Row]:
    first = growth[0]
    rows = []
    for step in growth[1:]:
        scrape = step["metrics"]
        rows.append(
            Row(
                f"PostgreSQL + Redis: GET /metrics with {step['processes']} processes' counters "
                f"in the folder ({step['files']} files, {step['bytes'] / 2**20:,.0f} MiB)",
                _spread(scrape),
                f"CPU per request: {_cpu(scrape, True)}; with {first['processes']} processes' "
                f"counters ({first['files']} files): {_spread(first['metrics'])}, "
                f"{_cpu(first['metrics'], True)}",
            )
        )
    return rows


def notes_for(first: dict[str, Any]) -> list[str]:
    """What the table's figures are, given the folder's first state (``growth[0]``)."""
    return [
        "One Daphne process serving the product's application, a Celery worker with beat "
        "(threads pool, 4 threads) on the same database and broker, and one client process "
        "sending one request at a time, as a probe or a scraper does; every answer was 200. "
        "Latency is the client's round trip; CPU per request is Daphne's CPU time (all its "
        "threads, /readyz's checks included) over the run, divided by the requests, and on "
        "PostgreSQL that of every backend on the section's database, the worker's and beat's "
        "included, so their background queries over the run count too. /readyz is "
        f"requested once every {PACED['/readyz']:g} s, as a probe every few seconds is, so "
        "that each request runs a round of checks; the others back to back.",
        "/healthz touches nothing: it is the floor of a request through this server and its "
        "middleware. /readyz runs its five checks at once in threads of their own (a SELECT 1, "
        "the broker's queue declared, a message echoed through the channel layer, the worker's "
        "and beat's heartbeat rows). /metrics sums every process's counter files and reads "
        "sessions by phase, workers alive and the queue depth at scrape time.",
        f"The first /metrics figure is with the files of this run's own processes only "
        f"({first['processes']} processes, {first['files']} files). Each "
        "further one adds processes that each leave the counters of a server and a worker "
        f"after a day's traffic ({len(ROUTES)} routes with their statuses, every envelope type "
        "and outcome, every task): about what one restart of a server and its worker leaves "
        "between their two files. While a deployment runs nothing removes a dead process's "
        "files (make demo forgets them only when it starts), and every scrape reads them all.",
    ]


def run(options: Options) -> SectionResult:
    size = QUICK if options.quick else FULL
    with tempfile.TemporaryDirectory(prefix="bench-health-") as name:
        folder = Path(name)
        name = f"oanp_bench_health_quick_{os.getpid()}" if options.quick else "oanp_bench_health"
        postgresql = on_postgresql(size, name, folder / "metrics-postgresql")
        sqlite = on_sqlite(size, folder / "sqlite")
    figures: dict[str, Any] = {
        "client": "one process, one request in flight at a time (httpx)",
        "paced_s": PACED,
        "worker": "celery worker -B, threads pool, concurrency 4",
        "postgresql": postgresql,
        "sqlite": sqlite,
    }
    rows = [
        *endpoint_rows("postgresql", postgresql["endpoints"]),
        *growth_rows(postgresql["growth"]),
        *endpoint_rows("sqlite", sqlite["endpoints"]),
    ]
    notes = notes_for(postgresql["growth"][0])
    return SectionResult("health", TITLE, figures, rows, notes)


SECTION = Section("health", TITLE, run)


if __name__ == "__main__":
    write_counters()
