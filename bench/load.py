"""The service section's client: ``python -m bench.load``, one process apart from the server.

It reads a job (JSON, one line) on stdin, gets ready (imports, agents, one connection per
worker), prints ``ready``, waits for ``go``, runs, and prints its report (JSON, one line).
Each worker is one concurrent agent pair (or, for the bare peer, one replayer) on asyncio
with ``httpx.AsyncClient``, one request in flight at a time.

- ``arbiter``: each pair negotiates whole SFO→JFK sessions with the reference agents. Every
  ``POST /oanp/v0.1/envelopes`` is answered 201 with ``{"entry", "arbiter", "session"}``:
  the entry it made and the arbiter's entries it caused, the new tail of the log, which both
  agents read in order to decide what to send next. No log is fetched.
- ``bare``: each worker posts, one after the other, the very bodies one pair sent.
- ``get``: each worker GETs one path ``requests`` times, one after the other (each starting
  ``interval_s`` after the one before, when that is given), each answer expected with
  ``status`` (the health section's probes and scrapes).

The report holds every request's latency, the wall time from the first request to the last
answer, and this process's CPU time over the same span, so a reader can tell whether the
client kept up.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from tests.support.factories.sessions import sfo_jfk_agents

ENVELOPES = "/oanp/v0.1/envelopes"
SFO_JFK_ITEM = {"route": "SFO-JFK", "date": "2026-04-28"}


class Refused(RuntimeError):
    """The server did not answer as a correct client expects; the run is void."""


def _now() -> datetime:
    return datetime.now(UTC)


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class Tally:
    latencies_s: list[float] = field(default_factory=list)
    states: Counter[str] = field(default_factory=Counter)
    bodies: list[list[str]] = field(default_factory=list)


async def _post(
    client: httpx.AsyncClient, path: str, body: str, headers: dict[str, str], tally: Tally
) -> httpx.Response:
    start = time.perf_counter()
    response = await client.post(path, content=body, headers=headers)
    tally.latencies_s.append(time.perf_counter() - start)
    if response.status_code != 201:
        raise Refused(f"POST {path} answered {response.status_code}: {response.text[:500]}")
    return response


async def negotiate(
    client: httpx.AsyncClient, pair: dict[str, str], session_id: str, tally: Tally, sent: list[str]
) -> None:
    """One whole session between the pair's agents, driven by the arbiter's 201 answers."""
    buyer, merchant = sfo_jfk_agents(
        f"{session_id}-", buyer_id=pair["buyer_id"], merchant_id=pair["merchant_id"]
    )
    buyer_headers = {
        "Authorization": f"Bearer {pair['buyer_key']}",
        "Content-Type": "application/json",
    }
    merchant_headers = {
        "Authorization": f"Bearer {pair['merchant_key']}",
        "Content-Type": "application/json",
    }
    opening = buyer.open(
        session_id=session_id,
        merchant_agent_id=pair["merchant_id"],
        item=SFO_JFK_ITEM,
        currency="USD",
        max_rounds=5,
        now=_now(),
    )
    outbox: deque[tuple[dict[str, str], dict[str, Any]]] = deque([(buyer_headers, opening)])
    state = "never answered"
    while outbox:
        headers, envelope = outbox.popleft()
        body = json.dumps(envelope, separators=(",", ":"))
        sent.append(body)
        answer = (await _post(client, ENVELOPES, body, headers, tally)).json()
        now = _now()
        for entry in (answer["entry"], *answer["arbiter"]):
            outbox.extend((buyer_headers, e) for e in buyer.receive(entry["envelope"], now))
            outbox.extend((merchant_headers, e) for e in merchant.receive(entry["envelope"], now))
        state = answer["session"]["state"]
    tally.states[state] += 1


async def _pair_worker(
    client: httpx.AsyncClient, pair: dict[str, str], job: dict[str, Any], tally: Tally
) -> None:
    sent: list[str] = []
    tally.bodies.append(sent)
    for number in range(job["sessions_per_pair"]):
        session_id = f"{job['tag']}-{pair['name']}-{number:04d}"
        await negotiate(client, pair, session_id, tally, sent)


async def _bare_worker(
    client: httpx.AsyncClient, bodies: list[str], path: str, tally: Tally
) -> None:
    headers = {"Content-Type": "application/json"}
    for body in bodies:
        await _post(client, path, body, headers, tally)


async def _get_worker(client: httpx.AsyncClient, job: dict[str, Any], tally: Tally) -> None:
    path, status, interval = job["path"], job["status"], job.get("interval_s", 0.0)
    first = time.perf_counter()
    for number in range(job["requests"]):
        await asyncio.sleep(first + number * interval - time.perf_counter())
        start = time.perf_counter()
        response = await client.get(path)
        tally.latencies_s.append(time.perf_counter() - start)
        if response.status_code != status:
            raise Refused(f"GET {path} answered {response.status_code}: {response.text[:500]}")


def _workers(job: dict[str, Any]) -> int:
    if job["kind"] == "arbiter":
        return len(job["pairs"])
    if job["kind"] == "get":
        return int(job["workers"])
    return len(job["bodies"])


async def _connect(client: httpx.AsyncClient, workers: int) -> None:
    """Open one keep-alive connection per worker before the clock starts."""
    await asyncio.gather(*(client.get("/.well-known/jwks.json") for _ in range(workers)))


async def run(job: dict[str, Any], ready: Any, go: Any) -> dict[str, Any]:
    workers = _workers(job)
    limits = httpx.Limits(max_connections=workers, max_keepalive_connections=workers)
    tally = Tally()
    async with httpx.AsyncClient(base_url=job["url"], limits=limits, timeout=60) as client:
        await _connect(client, workers)
        ready()
        await go()
        cpu_start, start = _cpu_s(), time.monotonic()
        if job["kind"] == "arbiter":
            tasks = [_pair_worker(client, pair, job, tally) for pair in job["pairs"]]
        elif job["kind"] == "get":
            tasks = [_get_worker(client, job, tally) for _ in range(workers)]
        else:
            tasks = [_bare_worker(client, bodies, job["path"], tally) for bodies in job["bodies"]]
        await asyncio.gather(*tasks)
        end, cpu_end = time.monotonic(), _cpu_s()
    return {
        "kind": job["kind"],
        "workers": workers,
        "start": start,
        "end": end,
        "wall_s": end - start,
        "cpu_s": cpu_end - cpu_start,
        "requests": len(tally.latencies_s),
        "latencies_s": tally.latencies_s,
        "states": dict(tally.states),
        "bodies": tally.bodies if job["kind"] == "arbiter" else [],
    }


def main() -> int:
    job = json.loads(sys.stdin.readline())

    def ready() -> None:
        print("ready", flush=True)

    async def go() -> None:
        line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        if line.strip() != "go":
            raise SystemExit("bench.load: expected 'go'")

    report = asyncio.run(run(job, ready, go))
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
