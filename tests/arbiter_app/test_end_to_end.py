"""The SFO→JFK session over HTTP between two reference agents, verified offline after."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from oanp.audit import verify_log
from tests.conftest import LiveServer
from tests.support.factories.agents import HttpNegotiation, make_agent
from tests.support.factories.sessions import sfo_jfk_agents

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def settled(live_arbiter: LiveServer) -> tuple[HttpNegotiation, list[dict[str, Any]]]:
    buyer_key = make_agent("buyer-001", "buyer")
    merchant_key = make_agent("merchant-sfo", "merchant")
    buyer, merchant = sfo_jfk_agents()
    with live_arbiter.client() as client:
        run = HttpNegotiation(client, buyer, merchant, buyer_key, merchant_key)
        log = run.run("sess-sfo-jfk")
    return run, log


def _moves(log: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(e["envelope"]["type"], e["envelope"]["payload"].get("price")) for e in log]


def test_the_published_trace_is_reproduced(settled: Any) -> None:
    _, log = settled
    assert _moves(log) == [
        ("session.open", None),
        ("session.ack", None),
        ("offer.propose", 320),
        ("offer.counter", 370),
        ("round.verdict", None),
        ("offer.propose", 340),
        ("offer.accept", 340),
        ("round.verdict", None),
        ("session.agree", None),
    ]


def test_both_verdicts_are_fair(settled: Any) -> None:
    _, log = settled
    verdicts = [e["envelope"]["payload"] for e in log if e["envelope"]["type"] == "round.verdict"]
    assert [(v["round"], v["status"]) for v in verdicts] == [(1, "fair"), (2, "fair")]


def test_the_summary_shows_the_agreement(settled: Any, live_arbiter: LiveServer) -> None:
    run, _ = settled
    with live_arbiter.client() as client:
        summary = client.get("/oanp/v0.1/sessions/sess-sfo-jfk", headers=run.merchant_key.headers)
    assert summary.json()["state"] == "AGREED"
    assert summary.json()["outcome"] == {
        "result": "agreed",
        "final_price": 340,
        "close_reason": None,
    }


def test_the_agreement_verifies_from_the_jwks_alone(settled: Any, live_arbiter: LiveServer) -> None:
    _, log = settled
    with live_arbiter.client() as client:
        jwks = client.get("/.well-known/jwks.json").json()
    report = verify_log(log, jwks)
    assert report.ok, report.summary()
    assert report.summary().startswith("9/9 entries valid, 1/1 agreements valid")


def test_oanp_verify_accepts_the_fetched_log_and_jwks(
    settled: Any, live_arbiter: LiveServer, tmp_path: Path
) -> None:
    run, _ = settled
    with live_arbiter.client() as client:
        (tmp_path / "log.json").write_bytes(
            client.get(
                "/oanp/v0.1/sessions/sess-sfo-jfk/log", headers=run.buyer_key.headers
            ).content
        )
        (tmp_path / "jwks.json").write_bytes(client.get("/.well-known/jwks.json").content)
    result = subprocess.run(
        [sys.executable, "-m", "oanp.net.cli", "verify", "log.json", "--jwks", "jwks.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1/1 agreements valid" in result.stdout


#: Fields that hold hashes, signatures, keys and clocks: digits there are not prices.
OPAQUE = {
    "signature",
    "kid",
    "entry_hash",
    "prev_hash",
    "session_digest",
    "constraints_commit",
    "received_at",
    "timestamp",
    "agreed_at",
    "opened_at",
    "turn_deadline",
    "jwks_uri",
}
LIMIT = re.compile(r"\b(420|280)\b")


def _leaks(value: Any, key: str = "") -> list[str]:
    if isinstance(value, dict):
        return [leak for k, v in value.items() if k not in OPAQUE for leak in _leaks(v, k)]
    if isinstance(value, list):
        return [leak for v in value for leak in _leaks(v, key)]
    if isinstance(value, int | float) and value in (420, 280):
        return [f"{key}={value}"]
    if isinstance(value, str) and LIMIT.search(value):
        return [f"{key}={value!r}"]
    return []


def test_no_private_limit_crosses_the_wire(settled: Any) -> None:
    run, _ = settled
    leaks = [leak for response in run.responses for leak in _leaks(response.json())]
    assert leaks == []


def test_the_leak_check_would_see_a_limit() -> None:
    assert _leaks({"payload": {"price": 420, "note": "floor 280"}}) == [
        "price=420",
        "note='floor 280'",
    ]


def test_each_party_reads_the_same_log(settled: Any, live_arbiter: LiveServer) -> None:
    run, _ = settled
    with live_arbiter.client() as client:
        as_buyer = client.get("/oanp/v0.1/sessions/sess-sfo-jfk/log", headers=run.buyer_key.headers)
        as_merchant = client.get(
            "/oanp/v0.1/sessions/sess-sfo-jfk/log", headers=run.merchant_key.headers
        )
    assert json.loads(as_buyer.content) == json.loads(as_merchant.content)
