"""Fixtures of the arbiter's tests: agents with API keys, an HTTP client, a live server.

The tests run against the database ``DATABASE_URL`` names (PostgreSQL under ``make test``).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.db import connection

from tests.arbiter_app.factories import Agent, ClientNegotiation, make_agent

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def buyer(db: None) -> Agent:
    return make_agent("buyer-001", "buyer")


@pytest.fixture
def merchant(db: None) -> Agent:
    return make_agent("merchant-sfo", "merchant")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class LiveServer:
    url: str
    process: subprocess.Popen[bytes]

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=10, **kwargs)


def _database_url() -> str:
    settings = connection.settings_dict
    if connection.vendor != "postgresql":
        pytest.fail("the live-server tests need DATABASE_URL to name a PostgreSQL server")
    user = settings.get("USER") or ""
    password = f":{settings['PASSWORD']}" if settings.get("PASSWORD") else ""
    at = f"{user}{password}@" if user else ""
    host = settings.get("HOST") or "127.0.0.1"
    port = settings.get("PORT") or "5432"
    return f"postgres://{at}{host}:{port}/{settings['NAME']}"


@pytest.fixture(scope="session")
def live_arbiter(django_db_setup: None, django_db_blocker: Any) -> Iterator[LiveServer]:
    """Daphne serving the project's ASGI application on the test database, as in production."""
    with django_db_blocker.unblock():
        database_url = _database_url()
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "OANP_PUBLIC_URL": f"http://127.0.0.1:{port}",
        "PYTHONUNBUFFERED": "1",
    }
    log = (ROOT / "var" / f"daphne-{port}.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "oanp_site.asgi:application",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(f"{url}/oanp/v0.1/openapi.json", timeout=2)
            break
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"daphne did not start; see {log.name}")
            time.sleep(0.1)
    yield LiveServer(url, process)
    process.terminate()
    process.wait(10)
    log.close()


@pytest.fixture
def logged(client: Any, buyer: Agent, merchant: Agent) -> ClientNegotiation:
    """A finished SFO→JFK session: nine entries on the record."""
    run = ClientNegotiation(client, buyer, merchant)
    run.open()
    run.finish()
    return run
