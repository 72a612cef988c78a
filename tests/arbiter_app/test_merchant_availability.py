"""A merchant agent its owner paused or archived takes no new session (docs/protocol.md
§14.5, check 12c): the open is refused 422 with nothing logged, sessions already running go
on, and the directory no longer lists it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache

from arbiter_app import services
from arbiter_app.models import Entry, MerchantAvailability, Session
from tests.support.api import COMMITS, problem
from tests.support.factories.agents import Agent, list_merchant, make_agent, post, read_log
from tests.support.factories.sessions import ITEM, envelope_json

pytestmark = pytest.mark.django_db

MERCHANT = "merchant-m"


@pytest.fixture(autouse=True)
def _fresh_throttle() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


def open_session(client: Any, buyer: Agent, session_id: str) -> Any:
    payload = {
        "merchant_agent_id": MERCHANT,
        "item": ITEM,
        "currency": "USD",
        "constraints_commit": COMMITS["buyer"],
    }
    body = envelope_json(
        "session.open", payload, role="buyer", agent=buyer.agent_id, session_id=session_id
    )
    return post(client, buyer, body)


def ack(client: Any, merchant: Agent, session_id: str) -> Any:
    body = envelope_json(
        "session.ack",
        {"constraints_commit": COMMITS["merchant"]},
        role="merchant",
        agent=merchant.agent_id,
        session_id=session_id,
    )
    return post(client, merchant, body)


def directory(client: Any, agent: Agent) -> list[str]:
    response = client.get("/oanp/v0.1/merchants", headers=agent.headers)
    assert response.status_code == 200, response.content
    return [entry["agent_id"] for entry in response.json()]


@pytest.mark.parametrize(
    ("state", "code", "detail"),
    [
        (
            "paused",
            "merchant_paused",
            "merchant agent 'merchant-m' is paused by its owner; try later",
        ),
        ("archived", "merchant_archived", "merchant agent 'merchant-m' is archived by its owner"),
    ],
)
def test_an_open_naming_a_stopped_merchant_is_refused_and_logs_nothing(
    client: Any, state: str, code: str, detail: str
) -> None:
    buyer = make_agent("buyer-b", "buyer")
    make_agent(MERCHANT, "merchant")
    services.set_availability(merchant_agent_id=MERCHANT, state=state)
    assert problem(open_session(client, buyer, "sess-1"), 422, code)["detail"] == detail
    assert not Session.objects.exists()
    assert Entry.objects.count() == 0
    # Resumed, it takes sessions again, the refused id included.
    services.set_availability(merchant_agent_id=MERCHANT, state="active")
    assert open_session(client, buyer, "sess-1").status_code == 201


def test_a_session_running_when_its_merchant_is_paused_goes_on_and_stays_readable(
    client: Any,
) -> None:
    buyer = make_agent("buyer-b", "buyer")
    merchant = make_agent(MERCHANT, "merchant")
    assert open_session(client, buyer, "sess-running").status_code == 201
    services.set_availability(merchant_agent_id=MERCHANT, state="paused")
    assert ack(client, merchant, "sess-running").status_code == 201
    problem(open_session(client, buyer, "sess-new"), 422, "merchant_paused")
    services.set_availability(merchant_agent_id=MERCHANT, state="archived")
    types = [entry["envelope"]["type"] for entry in read_log(client, buyer, "sess-running")]
    assert types == ["session.open", "session.ack"]
    assert [e["envelope"]["type"] for e in read_log(client, merchant, "sess-running")] == types


def test_the_directory_lists_only_merchants_that_take_sessions(client: Any) -> None:
    buyer = make_agent("buyer-b", "buyer")
    for agent_id in ("merchant-a", "merchant-p", "merchant-z"):
        make_agent(agent_id, "merchant")
        list_merchant(agent_id)
    services.set_availability(merchant_agent_id="merchant-p", state="paused")
    services.set_availability(merchant_agent_id="merchant-z", state="archived")
    assert directory(client, buyer) == ["merchant-a"]
    services.set_availability(merchant_agent_id="merchant-p", state="active")
    assert directory(client, buyer) == ["merchant-a", "merchant-p"]


@pytest.mark.parametrize(
    ("agent_id", "state"), [("merchant m", "paused"), (MERCHANT, "asleep"), (MERCHANT, "")]
)
def test_a_bad_agent_id_or_state_is_refused_and_changes_nothing(agent_id: str, state: str) -> None:
    with pytest.raises(ValueError, match="is not"):
        services.set_availability(merchant_agent_id=agent_id, state=state)
    assert not MerchantAvailability.objects.exists()
