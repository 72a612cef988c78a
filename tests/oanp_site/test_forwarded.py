"""The client's address behind ``OANP_PROXY_HEADERS`` proxies: the N-th ``X-Forwarded-For`` entry
from the right, never what a client wrote to the left of it, for the metrics allow-list and the
budget of failed authentications alike."""

from __future__ import annotations

import os
import random
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from oanp_site.forwarded import ForwardedFor, client_address, proxy_hops
from tests.conftest import ROOT, LiveServer, serve, suite_database_url
from tests.support.processes import free_port, spawn, terminate, wait_answering

# Spellings ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "hops"),
    [
        (None, 0),
        ("", 0),
        ("0", 0),
        ("off", 0),
        (" false ", 0),
        ("no", 0),
        ("1", 1),
        (" TRUE ", 1),
        ("yes", 1),
        ("on", 1),
        ("2", 2),
        ("10", 10),
    ],
)
def test_the_setting_is_a_number_of_proxies_and_true_means_one(
    setting: str | None, hops: int
) -> None:
    assert proxy_hops(setting) == hops


@pytest.mark.parametrize("setting", ["-1", "1.5", "maybe", "two"])
def test_a_setting_that_is_no_number_of_proxies_stops_the_start(setting: str) -> None:
    with pytest.raises(ValueError, match="OANP_PROXY_HEADERS"):
        proxy_hops(setting)


# Which entry ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "hops", "client"),
    [
        # Off: the header is the client's to forge, and is ignored.
        (["127.0.0.1"], 0, "192.0.2.9"),
        # One proxy: the address it appended, whatever the client wrote before it.
        (["127.0.0.1, 8.8.8.8"], 1, "8.8.8.8"),
        (["8.8.8.8"], 1, "8.8.8.8"),
        (["127.0.0.1", "8.8.8.8"], 1, "8.8.8.8"),  # two header lines are one list
        # Two proxies: the second from the right is what the outer one saw.
        (["127.0.0.1, 8.8.8.8, 10.0.0.7"], 2, "8.8.8.8"),
        (["8.8.8.8, 10.0.0.7"], 2, "8.8.8.8"),
        # Fewer entries than proxies: the outer proxy was skipped; the left-most is what the
        # first proxy the request met saw.
        (["8.8.8.8"], 2, "8.8.8.8"),
        # No header, or no address where the proxy's entry should be: the nearest proxy.
        ([], 1, "192.0.2.9"),
        ([" , "], 1, "192.0.2.9"),
        (["8.8.8.8, unknown"], 1, "192.0.2.9"),
        # Ports and brackets some proxies add.
        (["127.0.0.1, 8.8.8.8:4711"], 1, "8.8.8.8"),
        (["127.0.0.1, [2001:db8::1]:4711"], 1, "2001:db8::1"),
        (["127.0.0.1, 2001:DB8::1"], 1, "2001:db8::1"),
    ],
)
def test_the_client_is_the_nth_entry_from_the_right(
    headers: list[str], hops: int, client: str
) -> None:
    assert client_address(headers, "192.0.2.9", hops) == client


async def _scope_seen(app: ForwardedFor, scope: dict[str, Any]) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    async def inner(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.update(scope)

    app.app = inner
    await app(scope, None, None)
    return seen


@pytest.mark.asyncio
async def test_the_middleware_rewrites_the_client_and_scheme_of_requests_and_sockets() -> None:
    headers = [
        (b"x-forwarded-for", b"127.0.0.1, 8.8.8.8"),
        (b"x-forwarded-proto", b"https"),
    ]
    http = {"type": "http", "client": ("10.0.0.7", 5555), "scheme": "http", "headers": headers}
    seen = await _scope_seen(ForwardedFor(None, hops=1), http)
    assert seen["client"] == ("8.8.8.8", 0)
    assert seen["scheme"] == "https"
    assert http["client"] == ("10.0.0.7", 5555)  # the server's own scope is left alone
    socket = {**http, "type": "websocket", "scheme": "ws"}
    seen = await _scope_seen(ForwardedFor(None, hops=1), socket)
    assert (seen["client"], seen["scheme"]) == (("8.8.8.8", 0), "wss")
    # Off: nothing changes.
    assert await _scope_seen(ForwardedFor(None, hops=0), http) == http
    lifespan = {"type": "lifespan"}
    assert await _scope_seen(ForwardedFor(None, hops=1), lifespan) == lifespan


# Against a live server --------------------------------------------------------------------------

#: The live servers read the test database, which is set up only for tests marked so.
LIVE = pytest.mark.django_db(transaction=True)
BUDGET = 5
MADE_UP = {"Authorization": "Bearer oanp_0123456789ab_" + "x" * 32}
SUMMARY = "/oanp/v0.1/sessions/sess-nowhere"


def _env(hops: str) -> dict[str, str]:
    return {
        "DATABASE_URL": suite_database_url(),
        "OANP_PROXY_HEADERS": hops,
        "OANP_AUTH_FAILURES_PER_MINUTE": str(BUDGET),
    }


@pytest.fixture(scope="module")
def behind_one(django_db_setup: None) -> Iterator[LiveServer]:
    """The Procfile's web behind one proxy, the setting spelled as before it was a number: the
    way production started Daphne with its own --proxy-headers."""
    port = free_port()
    env = {
        **os.environ,
        **_env("true"),
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "WEB_CONCURRENCY": "1",
        "OANP_PUBLIC_URL": f"http://127.0.0.1:{port}",
        "PYTHONUNBUFFERED": "1",
    }
    log_path = ROOT / "var" / f"web-{port}.log"
    web = spawn([sys.executable, "-m", "oanp_site.serve"], env, log_path)
    try:
        wait_answering(web, port, log_path)
        yield LiveServer(f"http://127.0.0.1:{port}", web)
    finally:
        terminate(web)


@pytest.fixture(scope="module")
def behind_two(django_db_setup: None) -> Iterator[LiveServer]:
    """Daphne behind two proxies."""
    with serve(_env("2")) as server:
        yield server


def metrics_status(server: LiveServer, forwarded_for: str) -> int:
    response = httpx.get(
        f"{server.url}/metrics", headers={"X-Forwarded-For": forwarded_for}, timeout=10
    )
    if response.status_code == 403:
        assert response.json()["code"] == "metrics_forbidden"
    return response.status_code


def fresh_address() -> str:
    """An address no earlier run failed from this minute (the counts live in Redis)."""
    return f"198.18.{random.randrange(256)}.{random.randrange(1, 255)}"


def fail_until_refused(server: LiveServer, forwarded_for: Any) -> tuple[list[int], str]:
    """Made-up keys, each with ``forwarded_for(n)``, until the address is refused (at most twice
    the budget), all within one clock minute, so that the count is the test's alone."""
    for _ in range(3):
        minute = int(time.time() // 60)
        address = fresh_address()
        statuses = []
        with server.client() as client:
            for n in range(2 * BUDGET):
                response = client.get(
                    SUMMARY, headers={**MADE_UP, "X-Forwarded-For": forwarded_for(n, address)}
                )
                statuses.append(response.status_code)
                if response.status_code == 429:
                    assert response.json()["code"] == "rate_limited"
                    break
        if int(time.time() // 60) == minute:
            return statuses, address
    pytest.fail("three clock minutes ended during the requests")


@LIVE
def test_one_proxy_a_forged_loopback_entry_does_not_open_metrics(behind_one: LiveServer) -> None:
    assert metrics_status(behind_one, "127.0.0.1, 8.8.8.8") == 403
    assert metrics_status(behind_one, "127.0.0.1") == 200  # the proxy saw loopback
    assert metrics_status(behind_one, "8.8.8.8, 127.0.0.1") == 200


@LIVE
def test_one_proxy_rotating_the_left_most_entry_does_not_reset_the_budget(
    behind_one: LiveServer,
) -> None:
    statuses, address = fail_until_refused(behind_one, lambda n, address: f"10.9.{n}.1, {address}")
    assert statuses == [401] * BUDGET + [429]
    # The request log names the address the budget was counted against.
    log = ROOT / "var" / f"web-{behind_one.url.rsplit(':', 1)[1]}.log"
    counted = [line for line in log.read_text().splitlines() if f"client={address} " in line]
    assert len(counted) == BUDGET + 1, counted
    # Another client behind the same proxy keeps its own budget.
    with behind_one.client() as client:
        other = client.get(SUMMARY, headers={**MADE_UP, "X-Forwarded-For": f"{address}, 8.8.4.4"})
        assert other.status_code == 401


@LIVE
def test_two_proxies_the_second_entry_from_the_right_is_the_client(
    behind_two: LiveServer,
) -> None:
    assert metrics_status(behind_two, "127.0.0.1, 8.8.8.8, 10.0.0.7") == 403
    assert metrics_status(behind_two, "8.8.8.8, 127.0.0.1, 10.0.0.7") == 200
    # The outer proxy was skipped: the one entry is what the inner proxy saw.
    assert metrics_status(behind_two, "8.8.8.8") == 403
    statuses, _ = fail_until_refused(
        behind_two, lambda n, address: f"10.9.{n}.1, {address}, 10.0.{n}.7"
    )
    assert statuses == [401] * BUDGET + [429]
