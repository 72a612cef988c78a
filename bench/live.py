"""live: from an accepted envelope to the WebSocket frame in a subscribed dashboard page.

Everything runs as deployed, on this machine: a fresh PostgreSQL database of the section's own,
Redis database 13 for the channel layer (channels-redis), one Daphne process serving the
project's ASGI application, an operator member signed in (its session cookie made by Django's
own login machinery). The client, in this process, does what the dashboard's live session
page does: it connects to ``/ws/sessions/<id>/`` with the operator's cookie and listens, while
an agent pair negotiates the session over HTTP.

For every party envelope after the opening (the page subscribes to a session that exists),
three clock readings: the POST sent, its 201 answer, and the arrival of the frame announcing
the entries that envelope caused (``head_seq`` at least the answer's last entry). The frame is
announced when the entries commit, before the answer is written, so it may arrive before the
answer: latency from the answer is then negative, and the share of such frames is reported.
The peer is the same POST's own latency.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from collections import deque
from datetime import UTC, datetime
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect

from bench.load import ENVELOPES, SFO_JFK_ITEM
from bench.report import Options, Row, Section, SectionResult
from bench.service import (
    REDIS_URL,
    bench_database,
    daphne,
    fresh_database,
    percentile_ms,
    prepare,
    server_environment,
)
from bench.timers import job
from tests.support.factories.sessions import sfo_jfk_agents
from tests.support.processes import free_port

TITLE = "from an accepted envelope to the WebSocket frame in a subscribed dashboard page"
FRAME_TIMEOUT_S = 10.0


class Sizes:
    def __init__(self, sessions: int, warmup: int) -> None:
        self.sessions = sessions
        self.warmup = warmup


FULL = Sizes(sessions=40, warmup=3)
QUICK = Sizes(sessions=2, warmup=1)


class Frames:
    """Every frame of one socket, with its arrival time, and a way to wait for one."""

    def __init__(self) -> None:
        self.arrivals: list[tuple[float, int]] = []
        self.changed = asyncio.Event()

    async def read(self, socket: ClientConnection) -> None:
        async for message in socket:
            arrived = time.perf_counter()
            self.arrivals.append((arrived, int(json.loads(message)["head_seq"])))
            self.changed.set()

    async def first_at_least(self, head_seq: int, after: int) -> tuple[float, int]:
        """The first frame from index ``after`` on announcing ``head_seq`` or later."""
        deadline = time.monotonic() + FRAME_TIMEOUT_S
        while True:
            for index in range(after, len(self.arrivals)):
                if self.arrivals[index][1] >= head_seq:
                    return self.arrivals[index][0], index + 1
            self.changed.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"no frame announced head_seq {head_seq}")
            try:
                await asyncio.wait_for(self.changed.wait(), left)
            except TimeoutError:
                continue


async def session(
    client: httpx.AsyncClient,
    ws_url: str,
    cookie: str,
    origin: str,
    pair: dict[str, str],
    session_id: str,
    samples: list[dict[str, float]],
) -> str:
    buyer, merchant = sfo_jfk_agents(
        f"{session_id}-", buyer_id=pair["buyer_id"], merchant_id=pair["merchant_id"]
    )
    headers = {
        "buyer": {"Authorization": f"Bearer {pair['buyer_key']}"},
        "merchant": {"Authorization": f"Bearer {pair['merchant_key']}"},
    }
    opening = buyer.open(
        session_id=session_id,
        merchant_agent_id=pair["merchant_id"],
        item=SFO_JFK_ITEM,
        currency="USD",
        max_rounds=5,
        now=datetime.now(UTC),
    )
    outbox: deque[tuple[str, dict[str, Any]]] = deque([("buyer", opening)])
    frames = Frames()
    socket: ClientConnection | None = None
    reader: asyncio.Task[None] | None = None
    seen = 0
    state = "never answered"
    try:
        while outbox:
            role, envelope = outbox.popleft()
            body = json.dumps(envelope, separators=(",", ":"))
            sent = time.perf_counter()
            response = await client.post(
                ENVELOPES,
                content=body,
                headers={**headers[role], "Content-Type": "application/json"},
            )
            answered = time.perf_counter()
            if response.status_code != 201:
                raise RuntimeError(f"POST answered {response.status_code}: {response.text[:300]}")
            answer = response.json()
            entries = [answer["entry"], *answer["arbiter"]]
            if socket is None:
                # The page opens once the session exists, as an operator would find it.
                socket = await connect(
                    f"{ws_url}/ws/sessions/{session_id}/",
                    additional_headers={"Cookie": cookie},
                    origin=origin,  # type: ignore[arg-type]
                )
                reader = asyncio.create_task(frames.read(socket))
            else:
                arrived, seen = await frames.first_at_least(entries[-1]["seq"], seen)
                samples.append(
                    {
                        "post_s": answered - sent,
                        "frame_after_send_s": arrived - sent,
                        "frame_after_answer_s": arrived - answered,
                    }
                )
            now = datetime.now(UTC)
            for entry in entries:
                outbox.extend(("buyer", e) for e in buyer.receive(entry["envelope"], now))
                outbox.extend(("merchant", e) for e in merchant.receive(entry["envelope"], now))
            state = answer["session"]["state"]
    finally:
        if socket is not None:
            await socket.close()
        if reader is not None:
            reader.cancel()
    return state


async def drive(
    url: str, cookie: str, pair: dict[str, str], size: Sizes, tag: str
) -> tuple[list[dict[str, float]], dict[str, int]]:
    ws_url = url.replace("http://", "ws://", 1)
    states: dict[str, int] = {}
    samples: list[dict[str, float]] = []
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        await client.get("/.well-known/jwks.json")
        for number in range(size.warmup + size.sessions):
            kept: list[dict[str, float]] = [] if number < size.warmup else samples
            state = await session(client, ws_url, cookie, url, pair, f"{tag}-{number:04d}", kept)
            if number >= size.warmup:
                states[state] = states.get(state, 0) + 1
    return samples, states


def _ms(value: float) -> str:
    return f"{value:,.1f} ms"


def _spread(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": percentile_ms(values, 50),
        "p99_ms": percentile_ms(values, 99),
        "mean_ms": statistics.fmean(values) * 1000,
        "min_ms": min(values) * 1000,
        "max_ms": max(values) * 1000,
    }


def run(options: Options) -> SectionResult:
    size = QUICK if options.quick else FULL
    name = f"oanp_bench_live_quick_{os.getpid()}" if options.quick else "oanp_bench_live"
    database = bench_database(name)
    port = free_port()
    env = server_environment(database, port)
    tag = f"live{int(time.time()) % 1_000_000:06d}"
    with fresh_database(database) as version:
        (pair,) = prepare(env, 1)
        login = job(env, "operator")
        cookie = f"{login['cookie']}={login['value']}"
        with daphne(env, port) as server:
            samples, states = asyncio.run(drive(server.url, cookie, pair, size, tag))
    after_answer = [s["frame_after_answer_s"] for s in samples]
    after_send = [s["frame_after_send_s"] for s in samples]
    posts = [s["post_s"] for s in samples]
    before = sum(1 for value in after_answer if value < 0)
    figures: dict[str, Any] = {
        "server": {
            "asgi": "daphne oanp_site.asgi:application (settings bench.site)",
            "channel_layer": f"channels_redis on {REDIS_URL}",
            "postgresql": version,
        },
        "sessions": size.sessions,
        "states": states,
        "envelopes": len(samples),
        "frame_after_answer": _spread(after_answer),
        "frame_after_send": _spread(after_send),
        "post": _spread(posts),
        "frames_before_answer": before,
    }
    rows = [
        Row(
            "frame after the 201 answer, p50 / p99",
            f"{_ms(figures['frame_after_answer']['p50_ms'])} / "
            f"{_ms(figures['frame_after_answer']['p99_ms'])}",
            f"the POST itself: {_ms(figures['post']['p50_ms'])} / "
            f"{_ms(figures['post']['p99_ms'])}; {before} of {len(samples)} frames came "
            "before the answer",
        ),
        Row(
            "frame after the POST was sent, p50 / p99",
            f"{_ms(figures['frame_after_send']['p50_ms'])} / "
            f"{_ms(figures['frame_after_send']['p99_ms'])}",
            f"the POST's round trip: {_ms(figures['post']['p50_ms'])} / "
            f"{_ms(figures['post']['p99_ms'])}",
        ),
    ]
    notes = [
        f"{len(samples)} party envelopes of {size.sessions} whole SFO→JFK sessions "
        f"({', '.join(f'{n} {s}' for s, n in sorted(states.items()))}), one at a time, "
        "each timed from its POST; the opening of each session is not, since the page "
        f"subscribes to a session that exists. {size.warmup} sessions before them are not "
        "timed.",
        "The subscriber is a WebSocket client (the websockets package) on /ws/sessions/<id>/ "
        "with a signed-in operator's session cookie, as the live session page connects; the "
        "frame is the consumer's wake-up ({session_id, head_seq}) sent through channels-redis "
        "after the commit. The page then reads the new entries over HTTP, which is not timed.",
        f"Daphne, PostgreSQL, Redis and this client share the machine's {os.cpu_count()} cores.",
    ]
    return SectionResult("live", TITLE, figures, rows, notes)


SECTION = Section("live", TITLE, run)
