"""Dependencies that go away are answered, not crashed on: a stopped PostgreSQL gives fast 503s
with Retry-After and changes nothing; the server recovers by itself when it is back.

Each test runs its own PostgreSQL cluster or Redis server (never the machine's shared ones).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest

from oanp.net.client import SseDecoder
from tests.arbiter_app.test_health import (  # noqa: F401 (fixtures)
    PrivateCluster,
    cluster,
    redis_server,
)
from tests.conftest import ROOT, serve, suite_database_url
from tests.support.factories.agents import (
    ENVELOPES,
    SFO_JFK_TRACE,
    HttpNegotiation,
    make_agent,
    now,
)
from tests.support.factories.sessions import sfo_jfk_agents
from tests.support.waiting import wait_for

#: The pool's wait in these tests; a refusal must come within it and a little more.
POOL_TIMEOUT = 2.0


def create_agent(database_url: str, agent_id: str, role: str) -> dict[str, str]:
    printed = subprocess.run(
        [sys.executable, "manage.py", "create_agent", "--role", role, "--agent-id", agent_id],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": database_url},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return {"Authorization": f"Bearer {json.loads(printed)['api_key']}"}


def opening(session_id: str) -> bytes:
    buyer, _ = sfo_jfk_agents(f"{session_id}-")
    envelope = buyer.open(
        session_id=session_id,
        merchant_agent_id="merchant-sfo",
        item={"route": "SFO-JFK", "date": "2026-04-28"},
        currency="USD",
        now=now(),
    )
    return json.dumps(envelope).encode()


def timed(call: Any) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = call()
    return response, time.monotonic() - started


def test_a_stopped_database_answers_503_fast_and_the_server_recovers(
    cluster: PrivateCluster,  # noqa: F811
) -> None:
    buyer = create_agent(cluster.url, "buyer-001", "buyer")
    create_agent(cluster.url, "merchant-sfo", "merchant")
    body = opening("outage-1")
    env = {"DATABASE_URL": cluster.url, "OANP_DB_POOL_TIMEOUT": str(POOL_TIMEOUT)}
    with serve(env) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        assert client.get("/oanp/v0.1/sessions/outage-1", headers=buyer).status_code == 404
        with client.stream("GET", "/oanp/v0.1/inbox", headers=buyer) as inbox:
            assert inbox.status_code == 200
            cluster.stop()
            # An open stream ends, saying why, rather than hang or break mid-frame.
            text = "".join(inbox.iter_text())
        assert ": the arbiter's database is unavailable" in text

        requests = {
            "submit an envelope": lambda: client.post(
                ENVELOPES, content=body, headers={**buyer, "Content-Type": "application/json"}
            ),
            "read a session": lambda: client.get("/oanp/v0.1/sessions/outage-1", headers=buyer),
            "read a log": lambda: client.get("/oanp/v0.1/sessions/outage-1/log", headers=buyer),
            "open a stream": lambda: client.get("/oanp/v0.1/inbox", headers=buyer),
        }
        slowest = 0.0
        for _ in range(3):  # the first meets broken connections, the next ones the pool's wait
            for what, call in requests.items():
                response, seconds = timed(call)
                slowest = max(slowest, seconds)
                assert response.status_code == 503, (what, response.text)
                assert response.headers["content-type"] == "application/problem+json", what
                assert response.json()["code"] == "unavailable", what
                assert int(response.headers["retry-after"]) > 0, what
        assert slowest < POOL_TIMEOUT + 2, f"a refusal took {slowest:.1f} s"

        # A dashboard page: reading the sign-in behind the cookie needs the database.
        page = client.get("/sessions/", headers={"Cookie": f"sessionid={'x' * 32}"})
        assert page.status_code == 503
        assert "Temporarily unavailable" in page.text
        assert "retry-after" in page.headers
        assert client.get("/healthz").status_code == 200  # the process itself is fine

        cluster.start()
        started = time.monotonic()
        wait_for(
            lambda: client.get("/oanp/v0.1/sessions/outage-1", headers=buyer).status_code == 404,
            30,
            interval=0.2,
            message="the server did not recover after the database came back",
        )
        recovery = time.monotonic() - started
        # Nothing refused during the outage was recorded: the envelope is new now.
        submitted = client.post(
            ENVELOPES, content=body, headers={**buyer, "Content-Type": "application/json"}
        )
        assert submitted.status_code == 201, submitted.text
    print(f"slowest 503: {slowest:.2f} s; recovered {recovery:.2f} s after the restart")


@pytest.mark.django_db(transaction=True)
def test_with_redis_away_envelopes_are_accepted_and_streams_deliver(redis_server: Any) -> None:  # noqa: F811
    """Redis is the cache (rate limits), the channel layer (wake-ups) and the broker; while it
    is away the API keeps answering and streams fall back to polling the database."""
    redis = redis_server()
    env = {
        "DATABASE_URL": suite_database_url(),
        "REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/0",
    }
    buyer_key, merchant_key = make_agent("buyer-r1", "buyer"), make_agent("merchant-r1", "merchant")
    with serve(env) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        with client.stream("GET", "/oanp/v0.1/inbox", headers=merchant_key.headers) as inbox:
            assert inbox.status_code == 200
            redis.kill()
            redis.wait(5)
            buyer, merchant = sfo_jfk_agents(
                "redis-away-", buyer_id="buyer-r1", merchant_id="merchant-r1"
            )
            run = HttpNegotiation(client, buyer, merchant, buyer_key, merchant_key)
            log = run.run("redis-away-1")
            assert [e["envelope"]["type"] for e in log] == SFO_JFK_TRACE
            posts = [r for r in run.responses if r.request.method == "POST"]
            # The first send after Redis left pays the publisher's retries; the rest skip it.
            assert max(r.elapsed.total_seconds() for r in posts) < 2.0
            # The merchant's inbox, opened before Redis went away, still receives every entry.
            decoder = SseDecoder()
            received: list[str] = []
            for chunk in inbox.iter_bytes():
                received += [f.event for f in decoder.feed(chunk)]
                if len(received) >= len(SFO_JFK_TRACE):
                    break
            assert received == SFO_JFK_TRACE

        redis_server()
        # Back, with no restart of the server: a new session works as before.
        buyer, merchant = sfo_jfk_agents(
            "redis-back-", buyer_id="buyer-r1", merchant_id="merchant-r1"
        )
        run = HttpNegotiation(client, buyer, merchant, buyer_key, merchant_key)
        assert len(run.run("redis-back-1")) == len(SFO_JFK_TRACE)
    latencies = ", ".join(f"{r.elapsed.total_seconds():.3f}" for r in posts)
    print(f"envelopes with Redis away took {latencies} s")
