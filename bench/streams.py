"""``python -m bench.streams [--streams N] [--sessions S] [--quick]``: what open event streams
cost the rest of the API.

One Daphne process (the unit every web process is) on a fresh PostgreSQL database of the
bench's own (:func:`bench.service.bench_database`) and Redis database 11, with ``N / 2`` agent
pairs that first negotiate ``S`` whole sessions each (:mod:`bench.load`), so every agent has a
history (about nine entries a session). Then, one request at a time, a
simple authenticated GET (``GET /oanp/v0.1/sessions/{id}``, a session summary) is timed:

1. with no stream open (the baseline);
2. just after N agents each open their inbox with no ``Last-Event-ID`` (*fresh*), from a
   process of their own (``python -m bench.streams hold``), so the client timing the GETs
   is not the one reading the streams;
3. once those N streams have been open and idle a while (*idle*); then, with no request at
   all, what Daphne spends on the idle streams alone.

It prints one JSON report: each phase's p50 and p99, its p50 over the baseline's, the bytes
the N streams received in it, and Daphne's CPU seconds per second of it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

import httpx

from bench.service import (
    ROOT,
    Server,
    bench_database,
    daphne,
    fresh_database,
    load,
    percentile_ms,
    prepare,
    process_cpu_s,
    server_environment,
)
from tests.support.processes import free_port

REDIS_URL = "redis://127.0.0.1:6379/11"
INBOX = "/oanp/v0.1/inbox"
#: Seconds the idle streams are watched with no request coming.
QUIET_S = 10.0


@dataclass(frozen=True)
class Size:
    streams: int
    sessions_per_pair: int
    requests: int
    #: Seconds the streams stay open before the idle phase is timed: past a few key re-checks
    #: (every 5 s by default) and the first pages a fresh inbox reads.
    settle_s: float


FULL = Size(streams=300, sessions_per_pair=4, requests=300, settle_s=20.0)
QUICK = Size(streams=20, sessions_per_pair=1, requests=50, settle_s=6.0)


# The streams' holder: a process of its own -------------------------------------------------


async def _hold(url: str, keys: list[str]) -> None:
    """Open one inbox per key; on each line of stdin print how many are open, how many were
    refused (by status) and the bytes received so far; stop when stdin closes."""
    received = [0]
    opened: list[int] = []
    refused: dict[str, int] = {}
    limits = httpx.Limits(max_connections=len(keys) + 1, max_keepalive_connections=0)
    timeout = httpx.Timeout(60, read=None)

    async def read(client: httpx.AsyncClient, key: str) -> None:
        headers = {"Authorization": f"Bearer {key}"}
        async with client.stream("GET", INBOX, headers=headers) as response:
            if response.status_code != 200:
                refused[str(response.status_code)] = refused.get(str(response.status_code), 0) + 1
                return
            opened.append(1)
            async for chunk in response.aiter_bytes():
                received[0] += len(chunk)

    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout) as client:
        readers = [asyncio.create_task(read(client, key)) for key in keys]
        loop = asyncio.get_running_loop()
        while await loop.run_in_executor(None, sys.stdin.readline):
            report = {"open": len(opened), "refused": refused, "bytes": received[0]}
            print(json.dumps(report), flush=True)
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)


class Holder:
    """The holder process, asked for its figures over a pipe."""

    def __init__(self, url: str, keys: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.streams", "hold", url],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(keys) + "\n")
        self.process.stdin.flush()

    def report(self) -> dict[str, Any]:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write("report\n")
        self.process.stdin.flush()
        answer: dict[str, Any] = json.loads(self.process.stdout.readline())
        return answer

    def wait_open(self, streams: int, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            report = self.report()
            if report["open"] + sum(report["refused"].values()) >= streams:
                return report
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {report['open']} of {streams} streams opened")
            time.sleep(0.2)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(30)


# Timing the API ----------------------------------------------------------------------------


def timed_gets(client: httpx.Client, path: str, headers: dict[str, str], n: int) -> list[float]:
    latencies = []
    for _ in range(n):
        started = time.perf_counter()
        response = client.get(path, headers=headers)
        latencies.append(time.perf_counter() - started)
        if response.status_code != 200:
            raise RuntimeError(f"GET {path} answered {response.status_code}: {response.text}")
    return latencies


def phase(
    client: httpx.Client,
    server: Server,
    holder: Holder | None,
    target: tuple[str, dict[str, str]],
    requests: int,
) -> dict[str, Any]:
    before = holder.report()["bytes"] if holder else 0
    cpu_before, started = process_cpu_s(server.process.pid), time.monotonic()
    latencies = timed_gets(client, *target, requests)
    wall = time.monotonic() - started
    cpu = process_cpu_s(server.process.pid) - cpu_before
    after = holder.report()["bytes"] if holder else 0
    return {
        "p50_ms": round(percentile_ms(latencies, 50), 2),
        "p99_ms": round(percentile_ms(latencies, 99), 2),
        "seconds": round(wall, 2),
        "stream_bytes": after - before,
        "server_cpu_per_s": round(cpu / wall, 3),
    }


def quiet(server: Server, holder: Holder, seconds: float) -> dict[str, Any]:
    """What the open streams alone cost while no request comes: Daphne's CPU seconds per
    second, and the bytes they received."""
    before, cpu_before = holder.report()["bytes"], process_cpu_s(server.process.pid)
    time.sleep(seconds)
    cpu = process_cpu_s(server.process.pid) - cpu_before
    return {
        "seconds": seconds,
        "server_cpu_per_s": round(cpu / seconds, 3),
        "stream_bytes": holder.report()["bytes"] - before,
    }


def run(size: Size) -> dict[str, Any]:
    database = bench_database("oanp_bench_streams")
    port = free_port()
    # One Daphne process alone: it gets a whole pool of 20 (the connection budget's share of
    # a multi-process deployment would be smaller), so the seeding's pairs never wait for one.
    env = {**server_environment(database, port), "REDIS_URL": REDIS_URL, "OANP_DB_POOL_SIZE": "20"}
    with fresh_database(database):
        pairs = prepare(env, size.streams // 2)
        with daphne(env, port) as server:
            job = {
                "kind": "arbiter",
                "url": server.url,
                "pairs": pairs,
                "sessions_per_pair": size.sessions_per_pair,
                "tag": "history",
            }
            history = load(env, server, None, job)
            first = pairs[0]
            target = (
                f"/oanp/v0.1/sessions/history-{first['name']}-0000",
                {"Authorization": f"Bearer {first['buyer_key']}"},
            )
            keys = [key for pair in pairs for key in (pair["buyer_key"], pair["merchant_key"])]
            with httpx.Client(base_url=server.url, timeout=60) as client:
                timed_gets(client, *target, 30)  # warm up: imports, pool, caches
                report: dict[str, Any] = {
                    "streams": len(keys),
                    "envelopes_posted": len(history["latencies_s"]),
                    "baseline": phase(client, server, None, target, size.requests),
                }
                holder = Holder(server.url, keys, env)
                try:
                    report["opened"] = holder.wait_open(len(keys), 60)
                    report["fresh"] = phase(client, server, holder, target, size.requests)
                    time.sleep(size.settle_s)
                    report["idle"] = phase(client, server, holder, target, size.requests)
                    report["idle_without_requests"] = quiet(server, holder, QUIET_S)
                finally:
                    holder.close()
    base = report["baseline"]["p50_ms"]
    for name in ("fresh", "idle"):
        report[name]["p50_over_baseline"] = round(report[name]["p50_ms"] / base, 2)
    return report


def main(argv: list[str]) -> int:
    if argv[:1] == ["hold"]:
        keys = json.loads(sys.stdin.readline())
        asyncio.run(_hold(argv[1], keys))
        return 0
    parser = argparse.ArgumentParser(prog="python -m bench.streams", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="20 streams, a few seconds")
    parser.add_argument("--streams", type=int, help="streams to open (even; one per agent)")
    parser.add_argument("--sessions", type=int, help="sessions each pair negotiates first")
    options = parser.parse_args(argv)
    size = QUICK if options.quick else FULL
    size = Size(
        streams=options.streams or size.streams,
        sessions_per_pair=options.sessions or size.sessions_per_pair,
        requests=size.requests,
        settle_s=size.settle_s,
    )
    print(json.dumps(run(size), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
