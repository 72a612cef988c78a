"""The worker outlives its broker: Redis killed while the worker holds timer tasks, and started
again 6 s later with nothing of what it held (no persistence, as the Makefile runs it). The worker
stays up, the timers it held close on time (re-armed from the database when it reconnects, with
no beat and no sweep to stand in), and a deadline set afterwards fires.

Each test runs its own Redis server (never the machine's shared one).
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from arbiter_app.models import Entry, Session
from tests.arbiter_app.test_health import redis_server  # noqa: F401 (fixture)
from tests.conftest import ROOT, serve, suite_database_url
from tests.support.factories.agents import make_agent
from tests.support.factories.sessions import sfo_jfk_agents
from tests.support.processes import spawn, terminate, wait_ready, worker_argv
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

HELD = 12


def open_with_deadline(
    client: httpx.Client, headers: dict[str, str], session_id: str, due: datetime
) -> None:
    buyer, _ = sfo_jfk_agents(f"{session_id}-", buyer_id="buyer-blip", merchant_id="merchant-blip")
    envelope = buyer.open(
        session_id=session_id,
        merchant_agent_id="merchant-blip",
        item={"route": "SFO-JFK", "date": "2026-04-28"},
        currency="USD",
        now=datetime.now(UTC),
        deadline=due,
    )
    response = client.post("/oanp/v0.1/envelopes", content=json.dumps(envelope), headers=headers)
    assert response.status_code == 201, response.text


def lateness(session_ids: list[str], due: dict[str, datetime]) -> list[float]:
    closes = Entry.objects.filter(
        session__session_id__in=session_ids, type="session.close", sender_role="arbiter"
    ).values_list("session__session_id", "received_at")
    return [(datetime.fromisoformat(at) - due[sid]).total_seconds() for sid, at in closes]


def open_ids(session_ids: list[str]) -> int:
    return Session.objects.filter(session_id__in=session_ids, ended_at__isnull=True).count()


def test_a_redis_restart_under_held_timers_keeps_the_worker_and_the_timers(
    redis_server: Any,  # noqa: F811
) -> None:
    redis = redis_server()
    env = {
        "DATABASE_URL": suite_database_url(),
        "REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/0",
        # No sweep comes to the rescue within the test: only the worker's own timer tasks close.
        "OANP_TIMER_SWEEP_SECONDS": "3600",
    }
    buyer = make_agent("buyer-blip", "buyer")
    make_agent("merchant-blip", "merchant")
    log_path = ROOT / "var" / f"worker-blip-{time.monotonic_ns()}.log"
    worker = spawn(worker_argv(4), {**os.environ, "PYTHONUNBUFFERED": "1", **env}, log_path)
    try:
        wait_ready(worker, log_path, timeout=60)
        with serve(env) as server, httpx.Client(base_url=server.url, timeout=30) as client:
            base = datetime.now(UTC) + timedelta(seconds=16)
            due = {f"blip-{n}": base + timedelta(seconds=n * 0.1) for n in range(HELD)}
            for session_id, at in due.items():
                open_with_deadline(client, buyer.headers, session_id, at)
            # The worker holds every timer task until its due time.
            wait_for(lambda: log_path.read_bytes().count(b"expire_session[") >= HELD, 20)

            redis.kill()
            redis.wait(5)
            time.sleep(6)
            redis = redis_server()
            wait_for(lambda: log_path.read_bytes().count(b" Connected to ") >= 2, 30)
            assert worker.poll() is None, log_path.read_text()[-3000:]

            wait_for(lambda: open_ids(list(due)) == 0, 60)
            late = lateness(list(due), due)
            assert len(late) == HELD
            # On time: by the re-armed tasks, not by a sweep (there is none in an hour).
            assert max(late) < 5, late

            # A deadline set after the restart fires.
            after = {"blip-after": datetime.now(UTC) + timedelta(seconds=2)}
            open_with_deadline(client, buyer.headers, "blip-after", after["blip-after"])
            wait_for(lambda: open_ids(["blip-after"]) == 0, 30)
            assert max(lateness(["blip-after"], after)) < 5
        assert worker.poll() is None
        assert b"Unrecoverable error" not in log_path.read_bytes()
    finally:
        terminate(worker, 20)
