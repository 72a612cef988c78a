"""No body makes the submit endpoint fail: whatever arrives, the answer is a documented status,
every 4xx is problem+json with a stable code, and a refusal changes nothing."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arbiter_app.models import Entry, Session
from oanp.wire.envelope import MessageType
from tests.support.factories.agents import Agent, ClientNegotiation, make_agent, post

pytestmark = pytest.mark.django_db

DOCUMENTED = {200, 201, 400, 403, 404, 409, 413, 422, 429}
FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(autouse=True)
def _no_throttle(settings: Any) -> Iterator[None]:
    settings.OANP_RATE_LIMIT_PER_MINUTE = 1_000_000
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def negotiation(client: Any, buyer: Agent, merchant: Agent) -> ClientNegotiation:
    """A session mid-way: round 1 complete, the buyer's round-2 propose is next."""
    run = ClientNegotiation(client, buyer, merchant)
    run.open()
    run.run_until("offer.propose", 340)
    return run


def records() -> tuple[Any, ...]:
    sessions = tuple(
        Session.objects.order_by("session_id").values_list("session_id", "head_hash", "state")
    )
    return sessions, Entry.objects.count()


def answered(client: Any, agent: Agent, body: bytes | str) -> None:
    """Post ``body`` in a savepoint rolled back after, so every example sees the same records."""
    with transaction.atomic():
        before = records()
        response = post(client, agent, body)
        status = response.status_code
        assert status in DOCUMENTED, (status, response.content)
        if status >= 400:
            assert response["Content-Type"] == "application/problem+json", response.content
            problem = json.loads(response.content)
            assert problem["status"] == status
            assert isinstance(problem["code"], str)
            assert problem["code"]
            assert records() == before, problem
        else:
            answer = json.loads(response.content)
            assert set(answer) == {"entry", "arbiter", "session"}
            assert status == 201 or records() == before
        transaction.set_rollback(True)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.decimals(allow_nan=False, allow_infinity=False).map(float)
    | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=25,
)


def as_json(value: Any) -> str:
    return json.dumps(value)  # NaN and Infinity included: the parser must refuse them


@FUZZ
@given(body=st.binary(max_size=4096))
def test_arbitrary_bytes(client: Any, buyer: Agent, body: bytes) -> None:
    answered(client, buyer, body)


@FUZZ
@given(value=json_values)
def test_arbitrary_json(client: Any, buyer: Agent, value: Any) -> None:
    answered(client, buyer, as_json(value))


def _templates(run: ClientNegotiation) -> list[dict[str, Any]]:
    """Valid envelopes of every party type, as the session stands and for a new session."""
    propose = copy.deepcopy(run.peek()[1])
    merchant = {"role": "merchant", "agent_id": run.merchant_key.agent_id}
    merchant_commit = run.merchant.commitment
    counter = {
        **copy.deepcopy(propose),
        "message_id": "fuzz-counter",
        "type": "offer.counter",
        "sender": merchant,
    }
    counter["payload"].update(price=360, constraints_commit=merchant_commit)
    accept = {**copy.deepcopy(propose), "type": "offer.accept"}
    accept["payload"]["price"] = 370
    withdraw = {
        **copy.deepcopy(propose),
        "type": "session.close",
        "payload": {
            "reason": "withdrawn",
            "constraints_commit": propose["payload"]["constraints_commit"],
        },
    }
    opening = json.loads(Entry.objects.get(seq=1).envelope)
    fresh_open = {**copy.deepcopy(opening), "session_id": "sess-fuzz", "message_id": "fuzz-open"}
    ack = json.loads(Entry.objects.get(seq=2).envelope)
    return [propose, counter, accept, withdraw, opening, fresh_open, ack]


FIELDS = ["oanp_version", "message_id", "session_id", "timestamp", "sender", "type", "payload"]
PAYLOAD_FIELDS = [
    "round",
    "price",
    "constraints_commit",
    "merchant_agent_id",
    "item",
    "currency",
    "max_rounds",
    "profile",
    "response_window_s",
    "deadline",
    "reason",
]
NUMBERS = st.sampled_from(
    [
        "340",
        "340.00",
        "339.999",
        "-1",
        "0",
        "1e3",
        "3.4E2",
        "1000000000000",
        "0.001",
        "99999999999.99",
        "1" * 400,
        "340.5",
        "1.0e-400",
        "true",
        '"340"',
        "null",
    ]
)


#: Values near the valid ones, so that mutations reach past the parser into the machine.
PLAUSIBLE: dict[str, st.SearchStrategy[Any]] = {
    "message_id": st.sampled_from(["msg-0001", "msg-0003", "fuzz-1", "fuzz-2", "arb-1", ""]),
    "session_id": st.sampled_from(["sess-sfo-jfk", "sess-fuzz", "sess-nowhere"]),
    "round": st.integers(min_value=-1, max_value=21),
    "max_rounds": st.integers(min_value=0, max_value=21),
    "response_window_s": st.sampled_from([9, 10, 3600, 3601]),
    "currency": st.sampled_from(["USD", "JPY", "KWD", "usd", "XXX"]),
    "profile": st.sampled_from(["default/v0.1", "strict/v0.1", "nope/v9"]),
    "merchant_agent_id": st.sampled_from(["merchant-sfo", "buyer-001", "merchant-ghost"]),
    "deadline": st.sampled_from(["2000-01-01T00:00:00Z", "2999-01-01T00:00:00Z", "soon"]),
    "timestamp": st.sampled_from(["2026-04-28T14:00:00Z", "2026-04-28T14:00:00+02:00", "x"]),
    "reason": st.sampled_from(["withdrawn", "agreement", "stalled"]),
    "constraints_commit": st.sampled_from(
        ["sha256:" + "0" * 64, "0x" + "f" * 16, "sha256:" + "A" * 64, "0x12"]
    ),
}


@st.composite
def mutations(draw: st.DrawFn, template: dict[str, Any]) -> str:
    envelope = copy.deepcopy(template)
    payload = envelope["payload"]
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        where = draw(
            st.sampled_from(["top", "payload", "plausible", "sender", "type", "extra", "price"])
        )
        if where == "top":
            name = draw(st.sampled_from(FIELDS))
            if draw(st.booleans()):
                envelope.pop(name, None)
            else:
                envelope[name] = draw(json_values)
        elif where == "payload":
            name = draw(st.sampled_from(PAYLOAD_FIELDS))
            if draw(st.booleans()):
                payload.pop(name, None)
            else:
                payload[name] = draw(json_values)
        elif where == "plausible":
            name = draw(st.sampled_from(sorted(PLAUSIBLE)))
            target = envelope if name in FIELDS else payload
            target[name] = draw(PLAUSIBLE[name])
        elif where == "sender":
            envelope["sender"] = {
                "role": draw(st.sampled_from(["buyer", "merchant", "arbiter", "", "BUYER"])),
                "agent_id": draw(
                    st.sampled_from(["buyer-001", "merchant-sfo", "buyer-003", "x y"])
                ),
            }
        elif where == "type":
            envelope["type"] = draw(st.sampled_from([t.value for t in MessageType]))
        elif where == "extra":
            envelope[draw(st.text(min_size=1, max_size=8))] = draw(json_values)
        else:
            payload["price"] = "@@PRICE@@"
    text = json.dumps(envelope)
    return text.replace('"@@PRICE@@"', draw(NUMBERS))


def _key_for(text: str, keys: list[Agent]) -> Agent:
    """The key of the envelope's sender when there is one; else the first key's."""
    try:
        sender = json.loads(text)["sender"]
        return next(k for k in keys if (k.role, k.agent_id) == (sender["role"], sender["agent_id"]))
    except (ValueError, TypeError, KeyError, StopIteration):
        return keys[0]


def test_envelopes_close_to_valid_ones(client: Any, negotiation: ClientNegotiation) -> None:
    templates = _templates(negotiation)
    stranger = make_agent("buyer-003", "buyer")  # registered, but no party of the session
    keys = [negotiation.buyer_key, negotiation.merchant_key, stranger]

    @settings(FUZZ, max_examples=500)
    @given(data=st.data())
    def close_to_valid(data: st.DataObject) -> None:
        template = data.draw(st.sampled_from(templates))
        text = data.draw(mutations(template))
        answered(client, _key_for(text, keys), text)

    close_to_valid()


def test_the_templates_themselves_are_accepted(client: Any, negotiation: ClientNegotiation) -> None:
    # The fuzzed envelopes start from valid ones: unmutated, each is applied or replayed, but
    # for the counter, which is the merchant's move only once the buyer has proposed.
    keys = [negotiation.buyer_key, negotiation.merchant_key]
    statuses = []
    for template in _templates(negotiation):
        with transaction.atomic():
            text = json.dumps(template)
            statuses.append(post(client, _key_for(text, keys), text).status_code)
            transaction.set_rollback(True)
    assert statuses == [201, 409, 201, 201, 200, 201, 200]
