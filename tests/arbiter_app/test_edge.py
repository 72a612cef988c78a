"""The edge of the agents' endpoints (arbiter_app.api.edge): docs/protocol.md §14.5's checks up
to the key's rate limit, in their order, and the rate limits themselves (§14.7)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.core.cache import cache

from arbiter_app import limits
from tests.support.api import problem, records, variant
from tests.support.factories.agents import ENVELOPES, Agent, ClientNegotiation, post

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_throttle")]

SESSION = "sess-sfo-jfk"


# The rate limits ----------------------------------------------------------------------------------


def test_rate_limited_per_key(
    client: Any, negotiation: ClientNegotiation, settings: Any, merchant: Agent
) -> None:
    settings.OANP_RATE_LIMIT_PER_MINUTE = 2
    key, propose = negotiation.peek()
    summary = f"/oanp/v0.1/sessions/{SESSION}"
    cache.clear()
    assert client.get(summary, headers=key.headers).status_code == 200
    assert client.get(summary, headers=key.headers).status_code == 200
    before = records()
    response = post(client, key, propose)
    problem(response, 429, "rate_limited")
    assert 1 <= int(response["Retry-After"]) <= 60
    assert records() == before
    problem(client.get(summary, headers=key.headers), 429, "rate_limited")
    # Another key has its own allowance.
    assert client.get(summary, headers=merchant.headers).status_code == 200


def test_a_throttled_key_gets_every_other_refusal_first(
    client: Any, negotiation: ClientNegotiation, settings: Any, merchant: Agent
) -> None:
    """Section 7 lists 429 last: a throttled key's bad requests are answered as such, its
    replays as replays, and only a request that would act is refused for the rate."""
    key, propose = negotiation.peek()
    assert negotiation.step().status_code == 201
    _, counter = negotiation.peek()
    settings.OANP_RATE_LIMIT_PER_MINUTE = 0  # every request from now on is over the budget
    before = records()
    problem(post(client, key, b"{not json"), 400, "malformed_json")
    problem(post(client, key, {"oanp_version": "0.1"}), 400, "schema_invalid")
    assert post(client, key, propose).status_code == 200  # a replay: the first answer again
    problem(post(client, key, variant(propose, "other-id", price=321)), 409, "out_of_turn")
    problem(client.get("/oanp/v0.1/sessions/nope", headers=key.headers), 404, "unknown_session")
    problem(post(client, key, counter), 403, "sender_mismatch")  # the buyer's key, not hers
    # Only what would act or answer is refused for the rate, last.
    problem(client.get(f"/oanp/v0.1/sessions/{SESSION}", headers=key.headers), 429, "rate_limited")
    response = post(client, merchant, counter)
    problem(response, 429, "rate_limited")
    assert int(response["Retry-After"]) >= 1
    assert records() == before


def test_an_address_flooding_made_up_keys_is_refused_before_any_lookup(
    client: Any,
    settings: Any,
    buyer: Agent,
    django_assert_num_queries: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One minute for the whole test, and an address no other test fails from: the count is
    # this test's alone.
    monkeypatch.setattr(limits, "current_window", lambda: (0, 30.0))
    address = f"flood-{uuid.uuid4()}"
    settings.OANP_AUTH_FAILURES_PER_MINUTE = 3
    made_up = {"Authorization": "Bearer oanp_0123456789ab_" + "x" * 32}
    summary = f"/oanp/v0.1/sessions/{SESSION}"
    for _ in range(3):
        problem(client.get(summary, headers=made_up, REMOTE_ADDR=address), 401, "unauthorized")
    with django_assert_num_queries(0):
        response = client.get(summary, headers=made_up, REMOTE_ADDR=address)
    problem(response, 429, "rate_limited")
    assert response["Retry-After"] == "30"
    # No key at all counts too; another address is not affected.
    problem(client.get(summary, REMOTE_ADDR=address), 429, "rate_limited")
    other = client.get(summary, headers=buyer.headers, REMOTE_ADDR=f"{address}-other")
    problem(other, 404, "unknown_session")


# The edge's order (arbiter_app.api.edge), step by step. Each row's request fails its own check
# and every later one: the address has used up its failed authentications, the body is too
# large and not JSON, the key is throttled, the sender is another agent, the session unknown.
# The row passes only when the edge makes its check first. The machine's own order, which
# follows, is walked in tests/oanp/wire/test_machine.py.

EDGE_ORDER = [
    "invalid_characters",
    "rate_limited (address)",
    "unauthorized",
    "envelope_too_large",
    "malformed_json",
    "schema_invalid",
    "sender_mismatch",
    "unknown_session",
    "rate_limited (key)",
]

OVERSIZE = b"\xff" * (70 * 1024)


def _edge_row(
    client: Any, *, key: Agent | None, body: Any, flooded: bool = True, **headers: str
) -> Any:
    """POST ``body`` from an address over its failed authentications, or unless ``flooded``
    is off from one that has not failed, with ``key`` (over its rate limit) and ``headers``."""
    if not isinstance(body, bytes):
        body = json.dumps(body)
    address = "flooded" if flooded else f"clean-{uuid.uuid4()}"
    headers = {**(key.headers if key is not None else {}), **headers}
    return client.post(
        ENVELOPES, data=body, content_type="application/json", headers=headers, REMOTE_ADDR=address
    )


def test_the_edge_answers_its_checks_in_the_order_of_section_14_5(
    client: Any,
    settings: Any,
    negotiation: ClientNegotiation,
    merchant: Agent,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key, propose = negotiation.peek()  # the buyer's
    monkeypatch.setattr(limits, "current_window", lambda: (0, 30.0))
    settings.OANP_AUTH_FAILURES_PER_MINUTE = 1
    problem(_edge_row(client, key=None, body=b"{}"), 401, "unauthorized")  # "flooded" is over
    settings.OANP_RATE_LIMIT_PER_MINUTE = 0  # and every key over its own
    elsewhere = {**propose, "session_id": "sess-nowhere"}
    rows = [
        ({"key": None, "body": OVERSIZE, "X-Note": "a\x01b"}, "invalid_characters"),
        ({"key": None, "body": OVERSIZE}, "rate_limited (address)"),
        ({"key": None, "body": OVERSIZE, "flooded": False}, "unauthorized"),
        ({"key": key, "body": OVERSIZE, "flooded": False}, "envelope_too_large"),
        ({"key": merchant, "body": b"{not json", "flooded": False}, "malformed_json"),
        ({"key": merchant, "body": {**elsewhere, "extra": 1}, "flooded": False}, "schema_invalid"),
        ({"key": merchant, "body": elsewhere, "flooded": False}, "sender_mismatch"),
        ({"key": key, "body": elsewhere, "flooded": False}, "unknown_session"),
        ({"key": key, "body": propose, "flooded": False}, "rate_limited (key)"),
    ]
    assert [check for _, check in rows] == EDGE_ORDER
    for request, check in rows:
        before = records()
        answer = _edge_row(client, **request).json()
        assert answer["code"] == check.split(" ")[0], (check, answer)
        assert records() == before


def test_a_request_is_counted_in_one_round_trip_to_redis(monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-key count is INCR and EXPIRE pipelined on the process's client: one round trip,
    where the cache API took three. The counter still lapses after its window."""
    import redis

    trips: list[str] = []
    command, pipeline = redis.Redis.execute_command, redis.client.Pipeline.execute

    def counted_command(self: Any, *args: Any, **options: Any) -> Any:
        trips.append(str(args[0]))
        return command(self, *args, **options)

    def counted_pipeline(self: Any, *args: Any, **options: Any) -> Any:
        trips.append("pipeline")
        return pipeline(self, *args, **options)

    monkeypatch.setattr(redis.Redis, "execute_command", counted_command)
    monkeypatch.setattr(redis.client.Pipeline, "execute", counted_pipeline)
    prefix = f"trips{uuid.uuid4().hex[:8]}"
    assert limits.charge(prefix).over is None
    assert limits.charge(prefix).over is None
    assert trips == ["pipeline", "pipeline"]

    window, _ = limits.current_window()
    stored = cache.make_and_validate_key(f"oanp-rate:key:{prefix}:{window}")
    assert cache.get(f"oanp-rate:key:{prefix}:{window}") == 2  # read back through the cache API
    assert 0 < limits.redis_client().ttl(stored) <= 2 * limits.WINDOW_SECONDS


def test_a_key_known_live_is_checked_and_counted_in_one_round_trip(
    client: Any, settings: Any, buyer: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key this process found live within the second needs no look-up between the address's
    check and its count, which then take one script on Redis. The address is still checked
    first: past its failures, the request is refused and its key not counted."""
    import redis

    monkeypatch.setattr(limits, "current_window", lambda: (0, 30.0))
    settings.OANP_CREDENTIAL_CACHE_SECONDS = 600  # known for the whole test, however slow
    address = f"known-{uuid.uuid4()}"
    summary = f"/oanp/v0.1/sessions/{SESSION}"
    prefix = buyer.api_key.split("_")[1]
    count_name = f"oanp-rate:key:{prefix}:0"
    # Looked up once: the address read, the key found in the database, then counted.
    problem(client.get(summary, headers=buyer.headers, REMOTE_ADDR=address), 404, "unknown_session")
    trips: list[str] = []
    command = redis.Redis.execute_command

    def counted(self: Any, *args: Any, **options: Any) -> Any:
        trips.append(str(args[0]))
        return command(self, *args, **options)

    monkeypatch.setattr(redis.Redis, "execute_command", counted)
    problem(client.get(summary, headers=buyer.headers, REMOTE_ADDR=address), 404, "unknown_session")
    assert [trip for trip in trips if trip != "SCRIPT LOAD"] == ["EVALSHA"]
    assert cache.get(count_name) == 2
    settings.OANP_AUTH_FAILURES_PER_MINUTE = 1
    limits.record_failure(address)
    trips.clear()
    response = client.get(summary, headers=buyer.headers, REMOTE_ADDR=address)
    problem(response, 429, "rate_limited")
    assert response["Retry-After"] == "30"
    assert trips == ["EVALSHA"]
    assert cache.get(count_name) == 2  # refused before its count
    # Another address is not affected, and the key's count goes on.
    problem(
        client.get(summary, headers=buyer.headers, REMOTE_ADDR=f"{address}-other"),
        404,
        "unknown_session",
    )
    assert cache.get(count_name) == 3
