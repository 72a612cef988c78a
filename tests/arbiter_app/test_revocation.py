"""A revoked key stops reading: every stream it opened ends within seconds, announced or not,
and a new request with it gets 401. Operators revoke from the command line too."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from io import StringIO

import httpx
import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from arbiter_app import credential_cache
from arbiter_app.models import AgentCredential
from tests.arbiter_app.test_streams import INBOX, Stepper, events_path, live_client
from tests.conftest import HEARTBEATS, LiveServer, serve, suite_database_url
from tests.support.factories.agents import Agent, make_agent
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

REVOKED_LINE = ": the API key was revoked"


def prefix_of(agent: Agent) -> str:
    return agent.api_key.split("_")[1]


def read_until_closed(response: httpx.Response, limit: float) -> tuple[str, float]:
    """Everything the stream sent until the server ended it, and how long that took; fails if
    the stream is still open after ``limit`` seconds."""
    started = time.monotonic()
    text = ""
    for chunk in response.iter_text():
        text += chunk
        if time.monotonic() - started > limit:
            pytest.fail(f"the stream was still open after {limit} s: {text[-300:]!r}")
    return text, time.monotonic() - started


def server_rechecking_every(seconds: int) -> Iterator[LiveServer]:
    env = {
        "DATABASE_URL": suite_database_url(),
        "OANP_STREAM_RECHECK_SECONDS": str(seconds),
        **HEARTBEATS,
    }
    with serve(env) as server:
        yield server


@pytest.fixture(scope="module")
def announced_server(django_db_setup: None) -> Iterator[LiveServer]:
    """Re-checks keys only every minute: a stream that ends sooner heard the announcement."""
    yield from server_rechecking_every(60)


@pytest.fixture
def slow_recheck_server(django_db_setup: None) -> Iterator[LiveServer]:
    """Re-checks keys every second, so a revocation nobody announced still ends streams."""
    yield from server_rechecking_every(1)


def test_revoking_ends_the_inbox_stream_at_once(announced_server: LiveServer) -> None:
    buyer = make_agent("rv-buyer-1", "buyer")
    other = make_agent("rv-buyer-1", "buyer")  # a second key of the same agent stays live
    with (
        live_client(announced_server) as client,
        client.stream("GET", INBOX, headers=buyer.headers) as response,
    ):
        assert response.status_code == 200
        out = StringIO()
        call_command("revoke_key", agent_id="rv-buyer-1", key_prefix=prefix_of(buyer), stdout=out)
        text, _ = read_until_closed(response, limit=15)  # the re-check would take 60 s
    assert REVOKED_LINE in text
    printed = json.loads(out.getvalue())
    assert printed["agent_id"] == "rv-buyer-1"
    assert [k["prefix"] for k in printed["revoked"]] == [prefix_of(buyer)]
    assert printed["revoked"][0]["revoked_at"]
    with live_client(announced_server) as client:
        # The server trusts a key it found live for up to a second (credential_cache).
        started = time.monotonic()
        wait_for(
            lambda: client.get(INBOX, headers=buyer.headers).status_code == 401,
            timeout=credential_cache.ttl_seconds() + 5,
            message="the revoked key is refused",
        )
        assert time.monotonic() - started < credential_cache.ttl_seconds() + 1
        with client.stream("GET", INBOX, headers=other.headers) as still:
            assert still.status_code == 200


def test_a_lost_announcement_only_delays_the_end(slow_recheck_server: LiveServer) -> None:
    """Revoked behind the service's back (no wake-up is sent) while the stream is delivering:
    the periodic re-check ends it."""
    buyer, merchant = make_agent("rv-buyer-2", "buyer"), make_agent("rv-merchant-2", "merchant")
    with live_client(slow_recheck_server) as client:
        run = Stepper(client, buyer, merchant, "rv-session-2")
        run.open()
        with client.stream("GET", events_path("rv-session-2"), headers=buyer.headers) as response:
            assert response.status_code == 200
            chunks = response.iter_text()
            text = ""
            while "event: session.open" not in text:
                text += next(chunks)
            AgentCredential.objects.filter(prefix=prefix_of(buyer)).update(
                revoked_at=timezone.now()
            )
            rest = "".join(chunks)
    assert REVOKED_LINE in rest
    assert "event:" not in rest  # nothing more was read with the revoked key


def test_revoking_every_key_of_an_agent_ends_all_its_streams(
    announced_server: LiveServer,
) -> None:
    keys = [make_agent("rv-merchant-3", "merchant") for _ in range(3)]
    with live_client(announced_server) as client:
        streams = [client.stream("GET", INBOX, headers=k.headers) for k in keys]
        responses = [s.__enter__() for s in streams]
        try:
            assert all(r.status_code == 200 for r in responses)
            out = StringIO()
            call_command("revoke_key", "--agent-id=rv-merchant-3", "--all", stdout=out)
            assert len(json.loads(out.getvalue())["revoked"]) == 3
            for response in responses:
                text, _ = read_until_closed(response, limit=15)
                assert REVOKED_LINE in text
        finally:
            for s in streams:
                s.__exit__(None, None, None)


def test_the_command_refuses_an_unknown_prefix_and_changes_nothing() -> None:
    agent = make_agent("rv-buyer-4", "buyer")
    with pytest.raises(CommandError, match="no live key with prefix"):
        call_command("revoke_key", agent_id="rv-buyer-4", key_prefix="feedfacecafe")
    with pytest.raises(CommandError, match="no live key with prefix"):
        # A prefix of another agent's key is not this agent's.
        call_command("revoke_key", agent_id="rv-someone-else", key_prefix=prefix_of(agent))
    assert AgentCredential.objects.get(prefix=prefix_of(agent)).revoked_at is None
    out = StringIO()
    call_command("revoke_key", "--agent-id=rv-nobody", "--all", stdout=out)
    assert json.loads(out.getvalue()) == {"agent_id": "rv-nobody", "revoked": []}


def test_the_command_needs_a_prefix_or_all() -> None:
    with pytest.raises(CommandError):
        call_command("revoke_key", agent_id="rv-buyer-5")


@pytest.fixture
def capped_server(django_db_setup: None) -> Iterator[LiveServer]:
    env = {"DATABASE_URL": suite_database_url(), "OANP_STREAMS_PER_KEY": "3", **HEARTBEATS}
    with serve(env) as server:
        yield server


def test_a_key_holds_a_bounded_number_of_streams(capped_server: LiveServer) -> None:
    buyer, other = make_agent("rv-buyer-6", "buyer"), make_agent("rv-buyer-7", "buyer")
    with live_client(capped_server) as client:
        streams = [client.stream("GET", INBOX, headers=buyer.headers) for _ in range(3)]
        responses = [s.__enter__() for s in streams]
        assert [r.status_code for r in responses] == [200, 200, 200]
        refused = client.get(INBOX, headers=buyer.headers)
        assert refused.status_code == 429
        assert refused.json()["code"] == "too_many_streams"
        # Another key is not affected, and a closed stream frees its place.
        with client.stream("GET", INBOX, headers=other.headers) as response:
            assert response.status_code == 200
        streams.pop().__exit__(None, None, None)

        def reopened() -> bool:
            with client.stream("GET", INBOX, headers=buyer.headers) as response:
                return response.status_code == 200

        wait_for(reopened, 5, interval=0.2)
        for s in streams:
            s.__exit__(None, None, None)
