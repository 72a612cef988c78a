"""Opens no honest session needs (docs/protocol.md §14.5, checks 12a and 12b): one party in both
seats, directly or through two agents of one owner, and a currency the merchant agent's listing
does not offer. Each is refused 422 with nothing logged, right after ``unknown_merchant``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from django.core.cache import cache

from arbiter_app.models import Entry, Session
from tests.support.api import COMMITS, problem
from tests.support.factories.agents import Agent, list_merchant, make_agent, post
from tests.support.factories.sessions import ITEM, envelope_json

pytestmark = pytest.mark.django_db

SESSION = "sess-open"


@pytest.fixture(autouse=True)
def _fresh_throttle() -> Iterator[None]:
    # The per-key throttle counts in the shared cache; start and end every test at zero.
    cache.clear()
    yield
    cache.clear()


def open_session(client: Any, buyer: Agent, merchant_id: str, currency: str = "USD") -> Any:
    """``buyer``'s open of the SFO→JFK item with ``merchant_id`` in ``currency``: the answer."""
    payload = {
        "merchant_agent_id": merchant_id,
        "item": ITEM,
        "currency": currency,
        "constraints_commit": COMMITS["buyer"],
    }
    body = envelope_json(
        "session.open", payload, role="buyer", agent=buyer.agent_id, session_id=SESSION
    )
    return post(client, buyer, body)


def refused(response: Any, code: str) -> str:
    """The refusal's detail, once it is checked that nothing was logged and no session made."""
    detail: str = problem(response, 422, code)["detail"]
    assert not Session.objects.filter(session_id=SESSION).exists()
    assert Entry.objects.count() == 0
    return detail


def test_an_agent_in_both_seats_is_refused_as_self_dealing(client: Any) -> None:
    buyer = make_agent("agent-x", "buyer")
    # Without a merchant key the id is no merchant at all: check 12 answers first.
    refused(open_session(client, buyer, "agent-x"), "unknown_merchant")
    # An agent id may hold keys of both roles; it may not take both seats of one session.
    make_agent("agent-x", "merchant")
    detail = refused(open_session(client, buyer, "agent-x"), "self_dealing")
    assert (
        detail
        == "buyer 'agent-x' and merchant 'agent-x' are one agent: a session needs two parties"
    )
    answer = client.get(f"/oanp/v0.1/sessions/{SESSION}/log", headers=buyer.headers)
    problem(answer, 404, "unknown_session")


@pytest.mark.parametrize(
    ("buyer_owners", "merchant_owners"),
    [
        pytest.param(["skyfare"], ["skyfare"], id="one-owner"),
        pytest.param(["", "railco", "skyfare"], ["skyfare"], id="one-of-the-buyers-keys"),
        pytest.param(["skyfare"], ["railco", "skyfare"], id="one-of-the-merchants-keys"),
    ],
)
def test_two_agents_of_one_owner_are_refused_as_self_dealing(
    client: Any, buyer_owners: Sequence[str], merchant_owners: Sequence[str]
) -> None:
    buyer = [make_agent("buyer-b", "buyer", owner=owner) for owner in buyer_owners][-1]
    for owner in merchant_owners:
        make_agent("merchant-m", "merchant", owner=owner)
    detail = refused(open_session(client, buyer, "merchant-m"), "self_dealing")
    assert detail == (
        "buyer 'buyer-b' and merchant 'merchant-m' were issued to one owner: "
        "a session needs two parties"
    )
    assert "skyfare" not in detail  # who runs an agent is never on the wire


@pytest.mark.parametrize(
    ("buyer_owner", "merchant_owner"),
    [("skyfare", "railco"), ("", ""), ("skyfare", ""), ("", "skyfare")],
)
def test_agents_of_distinct_owners_or_of_none_may_negotiate(
    client: Any, buyer_owner: str, merchant_owner: str
) -> None:
    buyer = make_agent("buyer-b", "buyer", owner=buyer_owner)
    make_agent("merchant-m", "merchant", owner=merchant_owner)
    assert open_session(client, buyer, "merchant-m").status_code == 201


def test_a_listed_merchant_agent_negotiates_only_in_the_currencies_it_lists(client: Any) -> None:
    buyer = make_agent("buyer-b", "buyer")
    make_agent("merchant-m", "merchant")
    list_merchant("merchant-m", currencies=["USD", "EUR"])
    detail = refused(open_session(client, buyer, "merchant-m", "JPY"), "currency_not_offered")
    assert detail == "merchant agent 'merchant-m' negotiates in USD, EUR; not JPY"
    list_merchant("merchant-m", currencies=["USD"])
    detail = refused(open_session(client, buyer, "merchant-m", "JPY"), "currency_not_offered")
    assert detail == "merchant agent 'merchant-m' negotiates in USD; not JPY"
    assert open_session(client, buyer, "merchant-m", "USD").status_code == 201


def test_an_unlisted_merchant_agent_takes_any_currency(client: Any) -> None:
    buyer = make_agent("buyer-b", "buyer")
    make_agent("merchant-m", "merchant")
    list_merchant("merchant-m", currencies=["USD"])
    refused(open_session(client, buyer, "merchant-m", "JPY"), "currency_not_offered")
    # Unlisted, its listing is a draft that promises nothing.
    list_merchant("merchant-m", currencies=["USD"], listed=False)
    assert open_session(client, buyer, "merchant-m", "JPY").status_code == 201


def test_self_dealing_is_refused_before_an_unoffered_currency(client: Any) -> None:
    buyer = make_agent("agent-x", "buyer")
    make_agent("agent-x", "merchant")
    list_merchant("agent-x", currencies=["USD"])
    refused(open_session(client, buyer, "agent-x", "JPY"), "self_dealing")
