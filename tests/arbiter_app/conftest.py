"""Fixtures of the arbiter's tests: agents with API keys and a finished session.

The live server and the Celery worker are in tests/conftest.py.
"""

from __future__ import annotations

from typing import Any

import pytest

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
