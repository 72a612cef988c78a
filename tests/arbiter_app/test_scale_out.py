"""Scale-out: two complete server groups on one PostgreSQL and one Redis, each with web
processes sharing a port (the Procfile's web) and a Celery worker, beat on one of them only.
Every envelope of several sessions is sent through both groups at once, and sessions with a
deadline are left for whichever worker's timer or sweep comes first. No seq is duplicated or
skipped, each racing pair gets one answer and its replay, every chain verifies read through
either group, and every deadline closes its session exactly once."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from arbiter_app.models import Entry, Session
from oanp.agents.parties import BuyerAgent
from oanp.audit import verify_log
from tests.conftest import UNLIMITED_ADDRESS, Worker
from tests.support.factories.agents import Agent, make_agent
from tests.support.factories.sessions import sfo_jfk_agents
from tests.support.processes import (
    ROOT,
    free_port,
    spawn,
    start_web,
    terminate,
    wait_ready,
    worker_argv,
)
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

ENVELOPES = "/oanp/v0.1/envelopes"
SESSIONS = 6
DEADLINE_SESSIONS = 4


@contextmanager
def web_group(env: dict[str, str], name: str) -> Iterator[str]:
    """``python -m oanp_site.serve`` with two Daphne processes on a port of its own."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = ROOT / "var" / f"scale-{name}-{port}.log"
    web = start_web(port, {**env, **UNLIMITED_ADDRESS, "OANP_PUBLIC_URL": url}, log, 2)
    try:
        yield url
    finally:
        terminate(web, 30)


@contextmanager
def beatless_worker(env: dict[str, str]) -> Iterator[None]:
    """A second worker on the same broker, without beat: one beat per deployment."""
    log = ROOT / "var" / f"scale-worker-{os.getpid()}.log"
    offset = log.stat().st_size if log.exists() else 0
    process = spawn(worker_argv(2), env, log, append=True)
    try:
        wait_ready(process, log, offset=offset, timeout=60)
        yield
    finally:
        terminate(process, 20)


def through_both(
    clients: list[httpx.Client], key: Agent, envelope: dict[str, Any]
) -> list[httpx.Response]:
    """The same bytes to every group at once, as a client retrying through another would."""
    body = json.dumps(envelope)
    with ThreadPoolExecutor(len(clients)) as pool:
        return list(
            pool.map(
                lambda c: c.post(ENVELOPES, content=body, headers=key.headers, timeout=30),
                clients,
            )
        )


def opening(buyer: BuyerAgent, session_id: str, merchant_key: Agent, **timers: Any) -> Any:
    return buyer.open(
        session_id=session_id,
        merchant_agent_id=merchant_key.agent_id,
        item={"route": "SFO-JFK"},
        currency="USD",
        max_rounds=5,
        now=datetime.now(UTC),
        **timers,
    )


def run_session(
    clients: list[httpx.Client], buyer_key: Agent, merchant_key: Agent, session_id: str
) -> None:
    """The published example, every envelope raced through both groups."""
    buyer, merchant = sfo_jfk_agents(
        f"{session_id}-", buyer_id=buyer_key.agent_id, merchant_id=merchant_key.agent_id
    )
    outbox = [(buyer_key, opening(buyer, session_id, merchant_key))]
    seen = 0
    while outbox:
        key, envelope = outbox.pop(0)
        answers = through_both(clients, key, envelope)
        statuses = sorted(a.status_code for a in answers)
        assert statuses == [200, 201], [a.text for a in answers]
        # The replay is the first answer again, byte for byte.
        assert answers[0].json() == answers[1].json()
        log = (
            clients[seen % 2]
            .get(f"/oanp/v0.1/sessions/{session_id}/log", headers=buyer_key.headers)
            .json()["entries"]
        )
        for entry in log[seen:]:
            now = datetime.now(UTC)
            outbox += [(buyer_key, e) for e in buyer.receive(entry["envelope"], now)]
            outbox += [(merchant_key, e) for e in merchant.receive(entry["envelope"], now)]
        seen = len(log)


def test_two_server_groups_share_sessions_without_a_duplicated_or_skipped_seq(
    celery_worker_process: Worker, worker_env: dict[str, str]
) -> None:
    buyer, merchant = make_agent("scale-buyer", "buyer"), make_agent("scale-merchant", "merchant")
    with (
        beatless_worker(worker_env),
        web_group(worker_env, "a") as a,
        web_group(worker_env, "b") as b,
        httpx.Client(base_url=a) as via_a,
        httpx.Client(base_url=b) as via_b,
    ):
        clients = [via_a, via_b]
        # Sessions left to their deadline, opened through either group; each deadline is
        # counted from its own open, since opening them all may take seconds on a busy machine.
        waiting = [f"scale-deadline-{n}" for n in range(DEADLINE_SESSIONS)]
        for n, session_id in enumerate(waiting):
            opener, _ = sfo_jfk_agents(f"{session_id}-", buyer_id=buyer.agent_id)
            deadline = datetime.now(UTC) + timedelta(seconds=3)
            first = opening(opener, session_id, merchant, deadline=deadline)
            answer = clients[n % 2].post(ENVELOPES, json=first, headers=buyer.headers)
            assert answer.status_code == 201, answer.text

        raced = [f"scale-{n}" for n in range(SESSIONS)]
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(lambda s: run_session(clients, buyer, merchant, s), raced))

        def all_closed() -> bool:
            return Session.objects.filter(session_id__in=waiting, phase="CLOSED").count() == len(
                waiting
            )

        wait_for(all_closed, 30)
        for session_id in raced + waiting:
            logs = [
                c.get(f"/oanp/v0.1/sessions/{session_id}/log", headers=buyer.headers).json()[
                    "entries"
                ]
                for c in clients
            ]
            assert logs[0] == logs[1]
            assert [e["seq"] for e in logs[0]] == list(range(1, len(logs[0]) + 1))
            assert verify_log(logs[0], via_a.get("/.well-known/jwks.json").json()).ok, session_id
        for session_id in raced:
            assert Session.objects.get(session_id=session_id).phase == "AGREED"
        for session_id in waiting:
            closes = Entry.objects.filter(
                session__session_id=session_id, type="session.close", sender_role="arbiter"
            )
            assert closes.count() == 1
            assert closes.get().envelope.count('"deadline_expired"') == 1
