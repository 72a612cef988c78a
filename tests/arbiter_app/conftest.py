"""Fixtures of the arbiter's tests: agents with API keys and a finished session.

The live server and the Celery worker are in tests/conftest.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache

from tests.support.factories.agents import Agent, ClientNegotiation, make_agent


@pytest.fixture
def buyer(db: None) -> Agent:
    return make_agent("buyer-001", "buyer")


@pytest.fixture
def merchant(db: None) -> Agent:
    return make_agent("merchant-sfo", "merchant")


@pytest.fixture
def logged(client: Any, buyer: Agent, merchant: Agent) -> ClientNegotiation:
    """A finished SFO→JFK session: nine entries on the record."""
    run = ClientNegotiation(client, buyer, merchant)
    run.open()
    run.finish()
    return run


@pytest.fixture
def fresh_throttle() -> Iterator[None]:
    # The per-key throttle counts in the shared cache; start and end the test at zero.
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def negotiation(client: Any, buyer: Agent, merchant: Agent) -> ClientNegotiation:
    """The SFO→JFK session, opened and acknowledged: the buyer's round-1 propose is next."""
    run = ClientNegotiation(client, buyer, merchant)
    run.open()
    run.run_until("offer.propose", 320)
    return run


@pytest.fixture(scope="module")
def document(django_db_blocker: Any) -> dict[str, Any]:
    from django.test import Client

    # Served without a key: clients read it before they have one.
    with django_db_blocker.unblock():
        response = Client().get("/oanp/v0.1/openapi.json")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith(("application/json", "application/vnd.oai"))
    parsed: dict[str, Any] = json.loads(response.content)
    return parsed
