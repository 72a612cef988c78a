"""Idle event streams cost nothing per stream: one watch per process reads for all of them,
one query per poll for new entries and one per re-check period for every stream's key.

The streams run in this process, opened through the inbox view; the watch is driven by hand
(its own loop left asleep) on a clock the test sets, and the selectors it and the streams call
are counted."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.http import HttpResponse, StreamingHttpResponse
from django.test import AsyncRequestFactory
from django.utils import timezone

from arbiter_app import refusals, selectors
from arbiter_app.api import stream_watch, streams
from arbiter_app.api.stream_watch import WATCH
from arbiter_app.models import AgentCredential
from tests.support.factories.agents import Agent, make_agent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]

STREAMS = 12
#: The reads of the database an event stream or its watch makes.
COUNTED = ("inbox_page", "entries_after", "scan_entries", "live_credentials", "credential_is_live")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch, settings: Any) -> Clock:
    """The watch's clock, moved by the test; the watch's own loop sleeps for the whole test,
    so every round of it is a :meth:`Watch.tick` the test makes."""
    settings.OANP_STREAM_RECHECK_SECONDS = 5
    monkeypatch.setattr(stream_watch, "POLL_SECONDS", 3600.0)
    clock = Clock()
    monkeypatch.setattr(WATCH, "clock", clock)
    return clock


@pytest.fixture(autouse=True)
def pool_closed_after() -> Iterator[None]:
    yield
    # The streams read in worker threads, whose pooled connections would outlive the test and
    # keep the test database from being dropped.
    connection.close_pool()


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each read was made, counted as it returns."""
    counted: Counter[str] = Counter()
    for name in COUNTED:
        read = getattr(selectors, name)

        def counting(
            *args: Any, _read: Callable[..., Any] = read, _name: str = name, **kw: Any
        ) -> Any:
            result = _read(*args, **kw)
            counted[_name] += 1
            return result

        monkeypatch.setattr(selectors, name, counting)
    return counted


async def settled(condition: Callable[[], bool], what: str) -> None:
    """Let the streams run until ``condition`` holds (at most 10 s)."""
    deadline = asyncio.get_running_loop().time() + 10
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"not within 10 s: {what}")
        await asyncio.sleep(0.01)


async def open_inbox(agent: Agent, **headers: str) -> HttpResponse | StreamingHttpResponse:
    request = AsyncRequestFactory().get(
        "/oanp/v0.1/inbox", headers={"Authorization": f"Bearer {agent.api_key}", **headers}
    )
    return await streams.inbox_events(request)


async def opened(agents: list[Agent]) -> list[AsyncIterator[bytes]]:
    frames = []
    for agent in agents:
        response = await open_inbox(agent)
        assert isinstance(response, StreamingHttpResponse), response.content
        chunks = aiter(response.streaming_content)
        assert await anext(chunks) == streams.OPENING  # type: ignore[call-overload]
        frames.append(chunks)  # type: ignore[arg-type]
    return frames


async def test_idle_streams_make_no_query_of_their_own(clock: Clock, calls: Counter[str]) -> None:
    agents = [await sync_to_async(make_agent)(f"idle-{n}", "buyer") for n in range(STREAMS)]
    inboxes = await opened(agents)
    next_chunk = [asyncio.ensure_future(anext(inbox)) for inbox in inboxes]  # type: ignore[call-overload]
    # Each stream checks its key as it starts to listen, reads once, then waits.
    await settled(lambda: calls["inbox_page"] == STREAMS, "every stream's first read")
    assert calls["credential_is_live"] == STREAMS
    before = Counter(calls)

    periods = 4
    for _ in range(periods):
        clock.now += 5
        await WATCH.tick()
    await asyncio.sleep(0)  # a stream the watch woke would start its read now

    made = Counter(calls)
    made.subtract(before)
    # One scan of the entries and one check of every key per period, for all the streams.
    assert +made == Counter({"scan_entries": periods, "live_credentials": periods})
    assert not any(chunk.done() for chunk in next_chunk)

    # A key revoked behind the service's back: its stream ends at the next re-check, with no
    # query of its own; the others stay open and still read nothing.
    await sync_to_async(
        lambda: AgentCredential.objects.filter(
            pk__in=[s.credential_id for s in _slots(agents[0])]
        ).update(revoked_at=timezone.now())
    )()
    clock.now += 5
    await WATCH.tick()
    assert await asyncio.wait_for(next_chunk[0], 5) == streams.REVOKED
    assert await anext(inboxes[0], None) is None  # type: ignore[call-overload]
    assert not any(chunk.done() for chunk in next_chunk[1:])
    assert calls["inbox_page"] == STREAMS
    assert calls["credential_is_live"] == STREAMS

    for chunk in next_chunk:
        chunk.cancel()
    # As when their clients leave: each stream's task is cancelled, and the stream frees its place.
    await asyncio.gather(*next_chunk, return_exceptions=True)
    assert len(WATCH.slots) == 0


def _slots(agent: Agent) -> list[stream_watch.Slot]:
    prefix = agent.api_key.split("_")[1]
    key = AgentCredential.objects.get(prefix=prefix)
    return [slot for slot in WATCH.slots if slot.credential_id == key.pk]


async def test_a_full_process_answers_503_streams_full(clock: Clock, settings: Any) -> None:
    settings.OANP_STREAMS_PER_PROCESS = 2
    agents = [await sync_to_async(make_agent)(f"full-{n}", "merchant") for n in range(3)]
    inboxes = await opened(agents[:2])
    refused = await open_inbox(agents[2])
    assert refused.status_code == 503
    assert refused["Content-Type"] == "application/problem+json"
    assert refused["Retry-After"] == str(refusals.RETRY_AFTER_SECONDS)
    assert b'"code": "streams_full"' in refused.content
    # A stream that ends frees its place.
    await inboxes.pop().aclose()  # type: ignore[attr-defined]
    again = await open_inbox(agents[2])
    assert isinstance(again, StreamingHttpResponse)
    inboxes.append(aiter(again.streaming_content))  # type: ignore[arg-type]
    for inbox in inboxes:
        await inbox.aclose()  # type: ignore[attr-defined]
