"""service: whole SFO→JFK sessions over HTTP on PostgreSQL, against a bare Django JSON endpoint.

Everything runs as deployed, on this machine, in one run:

- a fresh PostgreSQL database of the bench's own on the server ``DATABASE_URL`` names (or
  127.0.0.1 as ``postgres``), migrated, with API keys issued by the arbiter's own service
  (:mod:`bench.prepare`); Redis database 13 for the cache, the throttle and the channel layer;
- the Procfile's web (:mod:`oanp_site.serve`): its default of Daphne processes sharing one port,
  each on a socket of its own, serving ``oanp_site.asgi:application`` with the bench's settings
  (:mod:`bench.site`: the product's, plus the peer's URL of :mod:`bench.urls`); at the judged
  level, one Daphne process alone and the same processes on one shared socket as well, side
  by side;
- the client in a separate process (:mod:`bench.load`), asyncio and ``httpx.AsyncClient``.

For each concurrency, N agent pairs (each a buyer and a merchant with their own keys) negotiate
whole sessions at once, each pair one envelope in flight at a time, reading what to send next
from each 201 answer. Then N workers post the very same bodies, pair by pair, to the peer:
parse the JSON, one INSERT, a small JSON answer. Latency is the client's round trip of one
POST. CPU time of the client, of Daphne and of the whole machine over each run is reported, so
a reader can tell which side ran out.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import httpx
import psycopg
from psycopg import sql

from bench.peer import BARE_PATH
from bench.report import Options, Row, Section, SectionResult, judged, rate, times
from oanp_site.serve import concurrency
from tests.support.processes import (
    ROOT,
    children,
    free_port,
    product_free_environment,
    run_json,
    start_daphne,
    start_web,
    tail,
    throwaway_secrets,
)

#: The aims: envelopes/s and p99 at 10 pairs, and the arbiter within 1.5× of the peer.
AIM_ENVELOPES_PER_S = 300
AIM_P99_MS = 50.0
AIM_PAIRS = 10
AIM_BARE_OVER_ARBITER = 1.5
#: Envelopes/s at the judged level over those at one pair, on the production setup.
AIM_SCALING = 2.5
#: Web processes, as the Procfile's web starts them by default.
WEB_PROCESSES = concurrency()

REDIS_URL = "redis://127.0.0.1:6379/13"
#: The product's throttle still runs; it is only raised so a busy pair is not refused.
RATE_LIMIT_PER_MINUTE = 1_000_000_000
TITLE = "sessions over HTTP on PostgreSQL, against a bare Django JSON endpoint"


@dataclass(frozen=True)
class Setup:
    """How the web runs for a level: its Daphne processes, and whether they share one socket
    (``OANP_WEB_REUSEPORT=0``) or each has its own, as the Procfile's web does."""

    processes: int
    shared_socket: bool

    @property
    def tag(self) -> str:
        return f"{self.processes}{'s' if self.shared_socket else ''}"

    def words(self) -> str:
        setup = f"{self.processes} web process{'es' if self.processes > 1 else ''}"
        return f"{setup}, one shared socket" if self.shared_socket else setup


@dataclass(frozen=True)
class Size:
    levels: tuple[int, ...]
    #: Sessions each pair negotiates at a level of this many pairs.
    sessions: dict[int, int]
    warmup_sessions: int

    def sessions_per_pair(self, pairs: int) -> int:
        return self.sessions[pairs]


FULL = Size(levels=(1, 10, 50), sessions={1: 100, 10: 25, 50: 8}, warmup_sessions=20)
QUICK = Size(levels=(1, 2), sessions={1: 2, 2: 2}, warmup_sessions=1)


# The database ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Database:
    host: str
    port: int
    user: str
    password: str
    name: str

    def conninfo(self, dbname: str) -> str:
        return psycopg.conninfo.make_conninfo(
            host=self.host,
            port=self.port,
            user=self.user,
            password=self.password or None,
            dbname=dbname,
        )

    @property
    def url(self) -> str:
        secret = f":{quote(self.password, safe='')}" if self.password else ""
        user = quote(self.user, safe="")
        return f"postgres://{user}{secret}@{self.host}:{self.port}/{self.name}"


def bench_database(name: str, environ: dict[str, str] | None = None) -> Database:
    """The server ``DATABASE_URL`` points at (127.0.0.1 as ``postgres`` by default), with the
    bench's own database ``name`` on it."""
    url = (environ if environ is not None else os.environ).get("DATABASE_URL", "")
    parts = urlsplit(url) if url.startswith(("postgres://", "postgresql://")) else None
    if parts is None:
        return Database("127.0.0.1", 5432, "postgres", "", name)
    return Database(
        parts.hostname or "127.0.0.1",
        parts.port or 5432,
        unquote(parts.username or "postgres"),
        unquote(parts.password or ""),
        name,
    )


@contextmanager
def fresh_database(database: Database) -> Iterator[str]:
    """Create ``database`` anew (dropping any left over), yield the server's version, drop it."""
    admin = database.conninfo("postgres")
    ident = sql.Identifier(database.name)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(ident))
        version = str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
    try:
        yield version
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))


# The server ------------------------------------------------------------------------------------


def server_environment(database: Database, port: int) -> dict[str, str]:
    env = {**product_free_environment(), **throwaway_secrets()}
    env.update(
        DJANGO_SETTINGS_MODULE="bench.site",
        DATABASE_URL=database.url,
        REDIS_URL=REDIS_URL,
        OANP_PUBLIC_URL=f"http://127.0.0.1:{port}",
        OANP_RATE_LIMIT_PER_MINUTE=str(RATE_LIMIT_PER_MINUTE),
        PYTHONUNBUFFERED="1",
    )
    return env


def prepare(env: dict[str, str], pairs: int) -> list[dict[str, str]]:
    issued: list[dict[str, str]] = run_json(env, "bench.prepare", str(pairs))
    return issued


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    processes: int = 1

    def log_tail(self) -> str:
        return tail(self.log_path)

    def cpu_s(self) -> float:
        """CPU seconds of the server so far: the process, and every Daphne process it runs."""
        return sum(process_cpu_s(pid) for pid in (self.process.pid, *children(self.process.pid)))


@contextmanager
def daphne(env: dict[str, str], port: int, processes: int = 1) -> Iterator[Server]:
    """The project's ASGI application served as in production: by one Daphne process, or by
    the Procfile's web with ``processes`` of them on one port."""
    log_path = ROOT / "var" / f"bench-daphne-{port}.log"
    log_path.parent.mkdir(exist_ok=True)
    if processes == 1:
        process = start_daphne(port, env, log_path, error=RuntimeError)
    else:
        process = start_web(port, env, log_path, processes, error=RuntimeError)
    server = Server(f"http://127.0.0.1:{port}", process, log_path, processes)
    try:
        print(
            f"bench: service: {processes} Daphne process(es), pid {process.pid}, on {server.url}",
            file=sys.stderr,
        )
        yield server
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    log_path.unlink(missing_ok=True)


# CPU -------------------------------------------------------------------------------------------

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (0 where /proc is not there)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


def machine_busy_s() -> float:
    """CPU seconds the whole machine spent not idle so far, summed over cores."""
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
    except OSError:
        return 0.0
    ticks = [int(v) for v in first[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / _TICKS


# Load ------------------------------------------------------------------------------------------


def backend_pids(database: Database | None) -> set[int]:
    """The PostgreSQL backends serving the bench's database (Daphne's pooled connections);
    none for a server on SQLite."""
    if database is None:
        return set()
    with psycopg.connect(database.conninfo("postgres"), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s", [database.name]
        ).fetchall()
    return {int(pid) for (pid,) in rows}


def load(
    env: dict[str, str], server: Server, database: Database | None, job: dict[str, Any]
) -> dict[str, Any]:
    """Run one load in a client process of its own; its report plus the server side's CPU."""
    client = subprocess.Popen(
        [sys.executable, "-m", "bench.load"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert client.stdin is not None
    assert client.stdout is not None
    client.stdin.write(json.dumps(job) + "\n")
    client.stdin.flush()
    if client.stdout.readline().strip() != "ready":
        client.kill()
        raise RuntimeError(f"bench.load did not get ready:\n{server.log_tail()}")
    backends = backend_pids(database)
    backends_before = {pid: process_cpu_s(pid) for pid in backends}
    server_before, machine_before = server.cpu_s(), machine_busy_s()
    started = time.monotonic()
    client.stdin.write("go\n")
    client.stdin.flush()
    out, _ = client.communicate()
    window = time.monotonic() - started
    server_cpu = server.cpu_s() - server_before
    machine_cpu = machine_busy_s() - machine_before
    # Backends opened during the run count from zero; those closed during it are lost.
    backends_cpu = sum(
        process_cpu_s(pid) - backends_before.get(pid, 0.0)
        for pid in backends | backend_pids(database)
    )
    if client.returncode != 0:
        raise RuntimeError(f"bench.load failed; the server said:\n{server.log_tail()}")
    report: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    report["server_cpu_s"] = server_cpu
    report["machine_cpu_s"] = machine_cpu
    report["postgres_cpu_s"] = backends_cpu
    report["window_s"] = window
    return report


def percentile_ms(latencies_s: Sequence[float], percent: int) -> float:
    """The nearest-rank percentile, in milliseconds."""
    ordered = sorted(latencies_s)
    rank = max(1, -(-percent * len(ordered) // 100))
    return ordered[rank - 1] * 1000


def summary(report: dict[str, Any]) -> dict[str, Any]:
    wall = report["wall_s"]
    window = report["window_s"]
    latencies = report["latencies_s"]
    return {
        "requests": report["requests"],
        "wall_s": round(wall, 4),
        "requests_per_s": report["requests"] / wall,
        "p50_ms": percentile_ms(latencies, 50),
        "p99_ms": percentile_ms(latencies, 99),
        "mean_ms": statistics.fmean(latencies) * 1000,
        "max_ms": max(latencies) * 1000,
        "client_cpu_cores": report["cpu_s"] / wall,
        "server_cpu_cores": report["server_cpu_s"] / window,
        "postgres_cpu_cores": report["postgres_cpu_s"] / window,
        "server_cpu_ms_per_request": report["server_cpu_s"] * 1000 / report["requests"],
        "machine_busy_cores": report["machine_cpu_s"] / window,
    }


def measure_level(
    env: dict[str, str],
    server: Server,
    database: Database,
    pairs: list[dict[str, str]],
    sessions: int,
    tag: str,
) -> dict[str, Any]:
    """The arbiter with these pairs at once, then the peer with the same bodies and workers."""
    arbiter_report = load(
        env,
        server,
        database,
        {
            "kind": "arbiter",
            "url": server.url,
            "pairs": pairs,
            "sessions_per_pair": sessions,
            "tag": tag,
        },
    )
    bare_report = load(
        env,
        server,
        database,
        {
            "kind": "bare",
            "url": server.url,
            "path": "/" + BARE_PATH,
            "bodies": arbiter_report["bodies"],
        },
    )
    arbiter = summary(arbiter_report)
    arbiter["envelopes"] = arbiter.pop("requests")
    arbiter["envelopes_per_s"] = arbiter.pop("requests_per_s")
    arbiter["sessions"] = sum(arbiter_report["states"].values())
    arbiter["states"] = arbiter_report["states"]
    arbiter["agreed"] = arbiter_report["states"].get("AGREED", 0)
    arbiter["sessions_per_s"] = arbiter["sessions"] / arbiter_report["wall_s"]
    arbiter["envelopes_per_session"] = arbiter["envelopes"] / max(1, arbiter["sessions"])
    bare = summary(bare_report)
    return {
        "pairs": len(pairs),
        "web_processes": server.processes,
        "sessions_per_pair": sessions,
        "arbiter": arbiter,
        "bare": bare,
        "bare_over_arbiter": bare["requests_per_s"] / arbiter["envelopes_per_s"],
    }


# The section -----------------------------------------------------------------------------------


def _pair_word(pairs: int) -> str:
    return f"{pairs} pair" if pairs == 1 else f"{pairs} pairs"


def _ms(value: float) -> str:
    return f"{value:,.1f}"


def _cpu_words(run: dict[str, Any]) -> str:
    return (
        f"PostgreSQL backends {run['postgres_cpu_cores']:.2f}, client "
        f"{run['client_cpu_cores']:.2f}, whole machine {run['machine_busy_cores']:.2f} busy"
    )


def rows_for(level: dict[str, Any], judged_at: int) -> list[Row]:
    pairs = level["pairs"]
    arbiter, bare = level["arbiter"], level["bare"]
    setup = Setup(level.get("web_processes", 1), level.get("shared_socket", False))
    who = f"arbiter, {_pair_word(pairs)}, {setup.words()}"
    aimed = pairs == judged_at and setup == Setup(WEB_PROCESSES, shared_socket=False)
    states = ", ".join(f"{count} {state}" for state, count in sorted(arbiter["states"].items()))
    return [
        Row(
            f"{who}: envelopes/s",
            rate(arbiter["envelopes_per_s"]),
            f"bare endpoint: {rate(bare['requests_per_s'], 'req/s')}",
            judged(
                f"≥ {AIM_ENVELOPES_PER_S:,} /s", arbiter["envelopes_per_s"] >= AIM_ENVELOPES_PER_S
            )
            if aimed
            else "",
        ),
        Row(
            f"{who}: sessions/s",
            f"{arbiter['sessions_per_s']:,.1f} /s",
            f"{arbiter['sessions']} sessions ({states}), "
            f"{arbiter['envelopes_per_session']:g} party envelopes each",
        ),
        Row(
            f"{who}: envelope latency p50 / p99",
            f"{_ms(arbiter['p50_ms'])} / {_ms(arbiter['p99_ms'])} ms",
            f"bare endpoint: {_ms(bare['p50_ms'])} / {_ms(bare['p99_ms'])} ms",
            judged(f"p99 < {AIM_P99_MS:g} ms", arbiter["p99_ms"] < AIM_P99_MS) if aimed else "",
        ),
        Row(
            f"{who}: bare endpoint throughput / arbiter throughput",
            times(level["bare_over_arbiter"]),
            "same bodies, same concurrency, same server",
            judged(
                f"≤ {AIM_BARE_OVER_ARBITER:g}×",
                level["bare_over_arbiter"] <= AIM_BARE_OVER_ARBITER,
            ),
        ),
        Row(
            f"{who}: web CPU per request",
            f"{arbiter['server_cpu_ms_per_request']:.1f} ms",
            f"bare endpoint: {bare['server_cpu_ms_per_request']:.1f} ms",
        ),
        Row(
            f"{who}: CPU, in cores, during the arbiter's run",
            f"web {arbiter['server_cpu_cores']:.2f}",
            _cpu_words(arbiter) + " (bare run: web "
            f"{bare['server_cpu_cores']:.2f}, {_cpu_words(bare)})",
        ),
    ]


def aims_of(levels: list[dict[str, Any]], judged_at: int) -> dict[str, Any]:
    """Judged on the production setup: the Procfile's web processes, a socket each."""
    served = [
        level
        for level in levels
        if level["web_processes"] == WEB_PROCESSES and not level.get("shared_socket", False)
    ]
    at = next(level for level in served if level["pairs"] == judged_at)
    one = min(served, key=lambda level: level["pairs"])
    scaling = at["arbiter"]["envelopes_per_s"] / one["arbiter"]["envelopes_per_s"]
    worst = max(level["bare_over_arbiter"] for level in served)
    return {
        "scaling": {
            "aim": AIM_SCALING,
            "pairs": [one["pairs"], judged_at],
            "value": scaling,
            "met": scaling >= AIM_SCALING,
        },
        "envelopes_per_s": {
            "aim": AIM_ENVELOPES_PER_S,
            "pairs": judged_at,
            "value": at["arbiter"]["envelopes_per_s"],
            "met": at["arbiter"]["envelopes_per_s"] >= AIM_ENVELOPES_PER_S,
        },
        "p99_ms": {
            "aim": AIM_P99_MS,
            "pairs": judged_at,
            "value": at["arbiter"]["p99_ms"],
            "met": at["arbiter"]["p99_ms"] < AIM_P99_MS,
        },
        "bare_over_arbiter": {
            "aim": AIM_BARE_OVER_ARBITER,
            "pairs": "every level",
            "value": worst,
            "met": worst <= AIM_BARE_OVER_ARBITER,
        },
    }


def _sockets_note(levels: list[dict[str, Any]], judged_at: int) -> str:
    """What giving each web process its own socket did, in this run."""
    at = {
        level.get("shared_socket", False): level["arbiter"]
        for level in levels
        if level["pairs"] == judged_at and level["web_processes"] == WEB_PROCESSES
    }
    each, shared = at[False], at[True]
    return (
        "Why a socket each: on one shared socket the processes race to accept, and Twisted "
        "accepts a whole burst of connections in whichever process wakes first, so the pairs' "
        "keep-alive connections pile up on one or two processes, which serve their synchronous "
        "views one at a time, while the others idle (10 connections on 4 processes: all on one "
        "in 7 of 15 trials). With SO_REUSEPORT the kernel spreads them by their addresses. In "
        f"this run at {_pair_word(judged_at)}: a socket each "
        f"{rate(each['envelopes_per_s'])}, p99 {_ms(each['p99_ms'])} ms; one shared socket "
        f"{rate(shared['envelopes_per_s'])}, p99 {_ms(shared['p99_ms'])} ms."
    )


def run(options: Options) -> SectionResult:
    size = QUICK if options.quick else FULL
    name = f"oanp_bench_quick_{os.getpid()}" if options.quick else "oanp_bench"
    database = bench_database(name)
    port = free_port()
    env = server_environment(database, port)
    run_tag = f"r{int(time.time()) % 1_000_000:06d}"
    judged_at = AIM_PAIRS if AIM_PAIRS in size.levels else max(size.levels)
    # Every level on the production setup; the judged one on a lone Daphne as well, and on the
    # Procfile's processes sharing one socket, as they did before each had its own.
    production = Setup(WEB_PROCESSES, shared_socket=False)
    runs = [(production, pairs) for pairs in size.levels] + [
        (Setup(1, shared_socket=False), judged_at),
        (Setup(WEB_PROCESSES, shared_socket=True), judged_at),
    ]
    levels = []
    with fresh_database(database) as version:
        issued = prepare(env, 3 + sum(pairs for _, pairs in runs))
        statements = run_json(env, "bench.jobs", "envelope-queries")
        rest = issued
        for setup in dict.fromkeys(setup for setup, _ in runs):
            setup_env = {**env, "OANP_WEB_REUSEPORT": "0" if setup.shared_socket else "1"}
            with daphne(setup_env, port, setup.processes) as server:
                # Untimed: loads the code paths, fills the connection pools.
                warmup, rest = rest[:1], rest[1:]
                measure_level(
                    env, server, database, warmup, size.warmup_sessions, f"{run_tag}-w{setup.tag}"
                )
                for pairs in (pairs for s, pairs in runs if s == setup):
                    chosen, rest = rest[:pairs], rest[pairs:]
                    level = measure_level(
                        env,
                        server,
                        database,
                        chosen,
                        size.sessions_per_pair(pairs),
                        f"{run_tag}-p{setup.tag}c{pairs}",
                    )
                    level["shared_socket"] = setup.shared_socket
                    levels.append(level)
                    print(
                        f"bench: service: {setup.words()}, {_pair_word(pairs)}: "
                        f"{level['arbiter']['envelopes_per_s']:.0f} envelopes/s, "
                        f"bare {level['bare']['requests_per_s']:.0f} req/s",
                        file=sys.stderr,
                        flush=True,
                    )
    figures = {
        "server": {
            "asgi": "daphne oanp_site.asgi:application (settings bench.site), "
            "started by python -m oanp_site.serve",
            "processes": WEB_PROCESSES,
            "postgresql": version,
            "db_pool_max_size": 20,
            "redis": REDIS_URL,
            "rate_limit_per_minute": RATE_LIMIT_PER_MINUTE,
        },
        "client": {"processes": 1, "library": f"asyncio + httpx {httpx.__version__}"},
        "levels": levels,
        "aims": aims_of(levels, judged_at),
        "statements_per_envelope": statements,
    }
    rows = [row for level in levels for row in rows_for(level, judged_at)]
    scaling = figures["aims"]["scaling"]
    low, high = scaling["pairs"]
    rows.append(
        Row(
            f"scaling: envelopes/s at {_pair_word(high)} over {_pair_word(low)}",
            times(scaling["value"]),
            f"{production.words()}, a socket each; the same levels' web CPU per request above",
            judged(f"≥ {AIM_SCALING:g}×", scaling["met"]),
        )
    )
    rows.append(
        Row(
            "SQL statements per envelope, mean",
            f"{statements['mean']:.1f}",
            "each POST of a session after its open, authentication and BEGIN/COMMIT "
            f"included: {', '.join(map(str, statements['statements_per_envelope']))}",
        )
    )
    notes = [
        "Each pair is a buyer and a merchant agent with their own API keys, negotiating whole "
        "SFO→JFK sessions with the reference strategies (ceiling 420, floor 280), one envelope "
        "in flight at a time, each next move read from the 201 answer (no log fetches). "
        "Latency is the client's round trip of one POST.",
        "The bare endpoint is a plain Django view in the same web processes, behind the same "
        "middleware: parse the JSON body, one INSERT, a small JSON answer. It is loaded with "
        "the same bodies the pairs sent, by as many workers as there were pairs.",
        f"The web is the Procfile's: {WEB_PROCESSES} Daphne processes (its default) accepting "
        "on one port, each on a socket of its own (SO_REUSEPORT); the judged level is also run "
        "on one Daphne process alone, and on the same processes sharing one socket, as they "
        "did before, side by side. "
        "The web processes, one client process (asyncio + httpx) and PostgreSQL share the "
        f"machine's {os.cpu_count()} cores. CPU is in cores used over the run, all web "
        "processes together: a web figure near the number of web processes means they are the "
        "limit; a whole-machine figure near the core count means the machine is; whatever the "
        "machine figure holds beyond the web, its PostgreSQL backends and the client was other "
        "work on the machine (Redis, PostgreSQL's own processes, anything else running). Web "
        "CPU per request is the figure least moved by such neighbours.",
        _sockets_note(levels, judged_at),
        "What an envelope costs the web beyond its transaction: one round trip to Redis for the "
        "address's check and the key's rate limit together, when the process knows the key "
        "live (a script: GET, then INCR and EXPIRE), one batched wake-up for the groups that "
        "have no listener, no query after the commit when neither party has a callback (the "
        "locked read brings them) and at most one a second per merchant for whether it is "
        "hosted, and a kept thread rather than a new one for each POST. Inside it, the ORM "
        "cost the web more CPU to build and compile its statements than PostgreSQL spent "
        "running them: the session's locked read runs SQL compiled once per database "
        "(arbiter_app.prepared; 1.0 ms of CPU per read before, 0.25 ms after), and the step "
        "writes its row and entries with statements built from the model's fields, not with "
        "save and bulk_create (0.55 ms less per envelope).",
        "The arbiter's throttle runs as in production with its limit raised, so that a busy "
        "pair is not refused; each level uses agent pairs of its own.",
        f"The aims on envelopes/s and p99 are judged at {_pair_word(judged_at)} on the "
        "production setup; the throughput ratio at every level of it.",
    ]
    return SectionResult("service", TITLE, figures, rows, notes)


SECTION = Section("service", TITLE, run)
