"""The Server-Sent Event streams of docs/protocol.md §14, read over real HTTP from the live server.

Frames are parsed as a browser's EventSource would (WHATWG HTML, "event stream
interpretation"), so a framing mistake on the server shows up here and not only in a browser.
"""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from oanp.agents.parties import BuyerAgent, MerchantAgent, PartyAgent
from oanp.audit import verify_log
from oanp.net.client import ServerEvent, SseDecoder
from tests.conftest import LiveServer
from tests.support.factories.agents import (
    ENVELOPES,
    SFO_JFK_TRACE,
    Agent,
    HttpNegotiation,
    make_agent,
    now,
)
from tests.support.factories.sessions import sfo_jfk_agents

pytestmark = pytest.mark.django_db(transaction=True)

SFO_JFK_ITEM = {"route": "SFO-JFK", "date": "2026-04-28"}
#: Every wait on the server is bounded: a stream silent this long fails the test.
READ_TIMEOUT = 10.0


# An EventSource's parser ---------------------------------------------------------------------


#: A frame as a browser's EventSource dispatches it, parsed by the client library's decoder.
Frame = ServerEvent


# Reading streams from the live server ----------------------------------------------------------


@dataclass
class EventStream:
    response: httpx.Response
    decoder: SseDecoder = field(default_factory=SseDecoder)

    def __iter__(self) -> Iterator[Frame]:
        for chunk in self.response.iter_bytes():
            yield from self.decoder.feed(chunk)

    def take(self, n: int) -> list[Frame]:
        frames = []
        for frame in self:
            frames.append(frame)
            if len(frames) == n:
                return frames
        raise AssertionError(f"the stream ended after {len(frames)} of {n} frames")


@contextmanager
def event_stream(
    client: httpx.Client,
    path: str,
    agent: Agent,
    last_event_id: str | None = None,
    params: dict[str, str] | None = None,
) -> Iterator[EventStream]:
    """An open stream; leaving the block drops the connection, as a crashed client would."""
    headers = dict(agent.headers)
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    with client.stream("GET", path, headers=headers, params=params) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["cache-control"] == "no-cache"
        yield EventStream(response)


def events_path(session_id: str) -> str:
    return f"/oanp/v0.1/sessions/{session_id}/events"


INBOX = "/oanp/v0.1/inbox"


def live_client(live_arbiter: LiveServer) -> httpx.Client:
    # verify=False: plain HTTP, and loading the CA bundle costs ~40 ms per client.
    return httpx.Client(
        base_url=live_arbiter.url, timeout=httpx.Timeout(10, read=READ_TIMEOUT), verify=False
    )


# A negotiation driven one envelope at a time ---------------------------------------------------


@dataclass
class Stepper:
    """The SFO→JFK session over HTTP, one envelope per :meth:`step`, so a test can act between
    any two moves. Both agents learn of entries from ``GET .../log``."""

    client: httpx.Client
    buyer_key: Agent
    merchant_key: Agent
    session_id: str
    buyer: BuyerAgent = field(init=False)
    merchant: MerchantAgent = field(init=False)
    outbox: deque[tuple[Agent, dict[str, Any]]] = field(default_factory=deque)
    seen: int = 0

    def __post_init__(self) -> None:
        self.buyer, self.merchant = sfo_jfk_agents(
            f"{self.session_id}-",
            buyer_id=self.buyer_key.agent_id,
            merchant_id=self.merchant_key.agent_id,
        )

    def open(self, item: dict[str, Any] | None = None) -> None:
        envelope = self.buyer.open(
            session_id=self.session_id,
            merchant_agent_id=self.merchant.agent_id,
            item=item or SFO_JFK_ITEM,
            currency="USD",
            now=now(),
        )
        self.outbox.append((self.buyer_key, envelope))
        self.step()

    def step(self) -> None:
        key, envelope = self.outbox.popleft()
        response = self.client.post(ENVELOPES, content=json.dumps(envelope), headers=key.headers)
        assert response.status_code == 201, response.text
        log = self.log()
        for entry in log[self.seen :]:
            for agent, agent_key in (
                (self.buyer, self.buyer_key),
                (self.merchant, self.merchant_key),
            ):
                self.outbox.extend((agent_key, e) for e in agent.receive(entry["envelope"], now()))
        self.seen = len(log)

    def until(self, entries: int) -> None:
        while self.seen < entries:
            self.step()

    def finish(self) -> list[dict[str, Any]]:
        while self.outbox:
            self.step()
        return self.log()

    def log(self, agent: Agent | None = None) -> list[dict[str, Any]]:
        response = self.client.get(
            f"/oanp/v0.1/sessions/{self.session_id}/log", headers=(agent or self.buyer_key).headers
        )
        assert response.status_code == 200, response.text
        entries: list[dict[str, Any]] = response.json()["entries"]
        return entries


def assert_frames_are_the_log(frames: list[Frame], log: list[dict[str, Any]]) -> None:
    """Each entry once, in seq order, ``id`` its seq, ``event`` its type, ``data`` the entry."""
    assert [f.id for f in frames] == [str(e["seq"]) for e in log]
    assert [f.event for f in frames] == [e["envelope"]["type"] for e in log]
    assert [f.json() for f in frames] == log


@pytest.fixture
def keys(live_arbiter: LiveServer) -> tuple[Agent, Agent]:
    return make_agent("buyer-001", "buyer"), make_agent("merchant-sfo", "merchant")


# One session's stream ---------------------------------------------------------------------------


def test_a_stream_resumed_after_each_drop_delivers_every_entry_once(
    live_arbiter: LiveServer, keys: tuple[Agent, Agent]
) -> None:
    with live_client(live_arbiter) as client:
        run = Stepper(client, *keys, session_id="sess-resume")
        run.open()
        run.until(4)  # open, ack, propose, counter
        with event_stream(client, events_path(run.session_id), run.buyer_key) as stream:
            frames = stream.take(3)
        assert [f.event for f in frames] == SFO_JFK_TRACE[:3]

        run.until(6)
        # Resumed from the header; one frame, then the client drops again mid-session.
        with event_stream(
            client, events_path(run.session_id), run.buyer_key, last_event_id=frames[-1].id
        ) as stream:
            frames += stream.take(2)
        assert [f.id for f in frames] == ["1", "2", "3", "4", "5"]

        log = run.finish()
        assert [e["envelope"]["type"] for e in log] == SFO_JFK_TRACE
        # Resumed from the query parameter (EventSource cannot set headers on a first connect);
        # the stream ends by itself after session.agree.
        with event_stream(
            client,
            events_path(run.session_id),
            run.buyer_key,
            params={"last_event_id": frames[-1].id},
        ) as stream:
            frames += list(stream)
    assert_frames_are_the_log(frames, log)


def test_a_finished_session_streams_whole_and_ends(
    live_arbiter: LiveServer, keys: tuple[Agent, Agent]
) -> None:
    buyer, merchant = sfo_jfk_agents()
    with live_client(live_arbiter) as client:
        log = HttpNegotiation(client, buyer, merchant, *keys).run("sess-whole")
        with event_stream(client, events_path("sess-whole"), keys[0]) as stream:
            frames = list(stream)
        assert_frames_are_the_log(frames, log)
        # Resuming at or past the last entry of a finished session: nothing, and the end.
        for last in ("9", "10", "999999999"):
            with event_stream(client, events_path("sess-whole"), keys[0], last) as stream:
                assert list(stream) == []
        with event_stream(client, events_path("sess-whole"), keys[0], "0") as stream:
            assert [f.id for f in stream] == [str(n) for n in range(1, 10)]


def test_both_parties_read_the_identical_stream(
    live_arbiter: LiveServer, keys: tuple[Agent, Agent]
) -> None:
    """I2: one shared stream, no per-party content."""
    buyer_key, merchant_key = keys
    buyer, merchant = sfo_jfk_agents()
    with live_client(live_arbiter) as client:
        log = HttpNegotiation(client, buyer, merchant, buyer_key, merchant_key).run("sess-i2")
        streams = {}
        for key in keys:
            with client.stream("GET", events_path("sess-i2"), headers=key.headers) as response:
                assert response.status_code == 200
                streams[key.role] = response.read()
    assert streams["buyer"] == streams["merchant"]
    frames = SseDecoder().feed(streams["buyer"])
    assert_frames_are_the_log(frames, log)


def test_entries_whose_text_holds_unicode_line_separators_stay_one_frame(
    live_arbiter: LiveServer, keys: tuple[Agent, Agent]
) -> None:
    """JCS leaves U+2028 and U+0085 unescaped; an event stream does not break lines there,
    and the server escapes the CR and LF that would."""
    item = {**SFO_JFK_ITEM, "note": "window\u2028seat\x85aisle\r\nexit\rrow\n"}
    with live_client(live_arbiter) as client:
        run = Stepper(client, *keys, session_id="sess-separators")
        run.open(item)
        log = run.finish()
        with event_stream(client, events_path(run.session_id), keys[1]) as stream:
            frames = list(stream)
    assert_frames_are_the_log(frames, log)
    assert frames[0].json()["envelope"]["payload"]["item"] == item


# The inbox -------------------------------------------------------------------------------------


def _session_of(frame: Frame) -> str:
    session_id: str = frame.json()["envelope"]["session_id"]
    return session_id


def test_the_merchant_inbox_carries_its_sessions_and_resumes_from_its_cursor(
    live_arbiter: LiveServer, keys: tuple[Agent, Agent]
) -> None:
    buyer_key, merchant_key = keys
    other_buyer = make_agent("buyer-002", "buyer")
    other_merchant = make_agent("merchant-lax", "merchant")
    with live_client(live_arbiter) as client:
        # A session of two other agents, before and during ours: never in our inbox.
        elsewhere = Stepper(client, other_buyer, other_merchant, session_id="sess-elsewhere")
        elsewhere.open()
        run = Stepper(client, buyer_key, merchant_key, session_id="sess-inbox")
        run.open()
        elsewhere.step()
        run.until(4)
        # c0: from the start, the agent's history first.
        with event_stream(client, INBOX, merchant_key, last_event_id="c0") as stream:
            frames = stream.take(3)
        elsewhere.finish()
        log = run.finish()
        with event_stream(client, INBOX, merchant_key, last_event_id=frames[-1].id) as stream:
            for frame in stream:
                frames.append(frame)
                if frame.event == "session.agree":
                    break
    assert {_session_of(f) for f in frames} == {"sess-inbox"}
    opening = frames[0].json()["envelope"]
    assert opening["type"] == "session.open"
    assert opening["payload"]["merchant_agent_id"] == "merchant-sfo"
    assert [f.json() for f in frames] == log
    assert [f.event for f in frames] == [e["envelope"]["type"] for e in log]
    cursors = [f.id for f in frames]
    assert all(re.fullmatch(r"c[0-9]+", c) for c in cursors)
    assert sorted(set(cursors), key=lambda c: int(c[1:])) == cursors  # rising, no repeat


def test_an_inbox_shows_nothing_of_sessions_its_agent_is_not_party_to(
    live_arbiter: LiveServer, keys: tuple[Agent, Agent]
) -> None:
    outsider = make_agent("merchant-lax", "merchant")
    outsider_buyer = make_agent("buyer-002", "buyer")
    buyer, merchant = sfo_jfk_agents()
    with live_client(live_arbiter) as client:
        HttpNegotiation(client, buyer, merchant, *keys).run("sess-private")
        # The outsider's own session starts after the private one ended; the inbox reads in
        # commit order, so by the time the marker arrives everything before it was scanned.
        marker = Stepper(client, outsider_buyer, outsider, session_id="sess-marker")
        marker.open()
        with event_stream(client, INBOX, outsider, last_event_id="c0") as stream:
            first = stream.take(1)
        with event_stream(client, INBOX, outsider_buyer, last_event_id="c0") as stream:
            first_of_buyer = stream.take(1)
    assert [(_session_of(f), f.event) for f in first + first_of_buyer] == [
        ("sess-marker", "session.open"),
        ("sess-marker", "session.open"),
    ]


def test_an_inbox_without_a_cursor_starts_at_the_live_head(
    live_arbiter: LiveServer, keys: tuple[Agent, Agent]
) -> None:
    """No Last-Event-ID: what commits after the stream opened, none of the agent's history;
    c0 (the cursor before every entry) asks for the history, and a frame's id resumes."""
    with live_client(live_arbiter) as client:
        earlier = Stepper(client, *keys, session_id="sess-before-head")
        earlier.open()
        log = earlier.finish()
        with event_stream(client, INBOX, keys[1]) as stream:
            later = Stepper(client, *keys, session_id="sess-after-head")
            later.open()
            later.step()  # the merchant's ack
            frames = stream.take(2)
        assert [(_session_of(f), f.event) for f in frames] == [
            ("sess-after-head", "session.open"),
            ("sess-after-head", "session.ack"),
        ]
        with event_stream(client, INBOX, keys[1], last_event_id="c0") as stream:
            history = stream.take(len(log) + 2)
        assert [f.json() for f in history[: len(log)]] == log
        assert [f.id for f in history[len(log) :]] == [f.id for f in frames]


# Refusals --------------------------------------------------------------------------------------


def _problem(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert (body["status"], body["code"]) == (status, code)
    return body


def test_streams_refuse_outsiders_strangers_and_bad_cursors(
    live_arbiter: LiveServer, keys: tuple[Agent, Agent]
) -> None:
    outsider = make_agent("merchant-lax", "merchant")
    with live_client(live_arbiter) as client:
        run = Stepper(client, *keys, session_id="sess-closed-door")
        run.open()
        path = events_path(run.session_id)
        # Not a party, or no such session: the same 404, so sessions cannot be probed for.
        hidden = _problem(client.get(path, headers=outsider.headers), 404, "unknown_session")
        missing = client.get(events_path("sess-nowhere"), headers=keys[0].headers)
        assert hidden["title"] == _problem(missing, 404, "unknown_session")["title"]
        for target in (path, INBOX):
            for headers in (
                {},
                {"Authorization": "Bearer oanp_000000000000_not-a-key"},
                {"Authorization": keys[0].headers["Authorization"] + "x"},
                {"Authorization": "Basic " + keys[0].api_key},
            ):
                response = client.get(target, headers=headers)
                _problem(response, 401, "unauthorized")
                assert response.headers["www-authenticate"].startswith("Bearer")
        # Headers are ASCII; a query parameter can carry any digit Python's isdigit() knows.
        for bad in ("abc", "-1", "1.0", "1e3", "c3", "0x10", "\u0663", "\u00b2", "\u2460"):
            if bad.isascii():
                refused = client.get(path, headers={**keys[0].headers, "Last-Event-ID": bad})
                _problem(refused, 400, "bad_cursor")
            refused = client.get(path, headers=keys[0].headers, params={"last_event_id": bad})
            _problem(refused, 400, "bad_cursor")
        for bad in ("3", "c", "cx", "c-1", "d3", "c1.5", "c\u0663", "c\u00b2"):
            if bad.isascii():
                refused = client.get(INBOX, headers={**keys[1].headers, "Last-Event-ID": bad})
                _problem(refused, 400, "bad_cursor")
            refused = client.get(INBOX, headers=keys[1].headers, params={"last_event_id": bad})
            _problem(refused, 400, "bad_cursor")


def test_streams_answer_other_methods_with_405(
    live_arbiter: LiveServer, keys: tuple[Agent, Agent]
) -> None:
    with live_client(live_arbiter) as client:
        run = Stepper(client, *keys, session_id="sess-methods")
        run.open()
        for path in (events_path(run.session_id), INBOX):
            for method in ("POST", "PUT", "PATCH", "DELETE", "OPTIONS"):
                response = client.request(method, path, headers=keys[0].headers, content=b"{}")
                _problem(response, 405, "method_not_allowed")
                assert response.headers["allow"] == "GET"
            response = client.head(path, headers=keys[0].headers)
            assert (response.status_code, response.headers["allow"]) == (405, "GET")
            # Strangers still learn nothing but that a key is needed.
            _problem(client.post(path), 401, "unauthorized")


def test_a_stream_ends_after_a_close_too(
    live_arbiter: LiveServer, keys: tuple[Agent, Agent]
) -> None:
    with live_client(live_arbiter) as client:
        run = Stepper(client, *keys, session_id="sess-withdrawn")
        run.open()
        run.until(3)  # open, ack, propose
        run.outbox.clear()
        run.outbox.append((keys[1], run.merchant.withdraw(now())))
        log = run.finish()
        with event_stream(client, events_path(run.session_id), keys[0]) as stream:
            frames = list(stream)
    assert_frames_are_the_log(frames, log)
    assert frames[-1].event == "session.close"
    assert frames[-1].json()["envelope"]["sender"]["role"] == "arbiter"


# Frames while the negotiation runs ----------------------------------------------------------


def _react(client: httpx.Client, agent: PartyAgent[Any], key: Agent, frame: Frame) -> None:
    for envelope in agent.receive(frame.json()["envelope"], now()):
        response = client.post(ENVELOPES, content=json.dumps(envelope), headers=key.headers)
        assert response.status_code == 201, response.text


def test_agents_negotiate_from_the_streams_alone(
    live_arbiter: LiveServer, keys: tuple[Agent, Agent]
) -> None:
    """The buyer reacts only to its session stream and the merchant only to its inbox, each in
    its own thread: the session can finish only if every frame arrives while it runs."""
    buyer_key, merchant_key = keys
    buyer, merchant = sfo_jfk_agents()
    inbox_open = threading.Event()
    with live_client(live_arbiter) as client:
        # Other traffic first, which the merchant's inbox must pass over. (On an empty table a
        # fresh inbox would also hold back for the hole below the first entry id: slower only.)
        Stepper(
            client,
            make_agent("buyer-002", "buyer"),
            make_agent("merchant-lax", "merchant"),
            session_id="sess-other",
        ).open()

    def merchant_side() -> list[Frame]:
        frames: list[Frame] = []
        with live_client(live_arbiter) as client, event_stream(client, INBOX, merchant_key) as s:
            inbox_open.set()
            for frame in s:
                frames.append(frame)
                _react(client, merchant, merchant_key, frame)
                if merchant.finished:
                    return frames
        raise AssertionError("the inbox ended")

    def buyer_side() -> list[Frame]:
        assert inbox_open.wait(READ_TIMEOUT)
        opening = buyer.open(
            session_id="sess-live",
            merchant_agent_id=merchant_key.agent_id,
            item=SFO_JFK_ITEM,
            currency="USD",
            now=now(),
        )
        frames: list[Frame] = []
        with live_client(live_arbiter) as client:
            response = client.post(
                ENVELOPES, content=json.dumps(opening), headers=buyer_key.headers
            )
            assert response.status_code == 201, response.text
            with event_stream(client, events_path("sess-live"), buyer_key) as stream:
                for frame in stream:
                    frames.append(frame)
                    _react(client, buyer, buyer_key, frame)
        return frames  # the stream ended by itself

    with ThreadPoolExecutor(2) as pool:
        merchant_frames = pool.submit(merchant_side)
        buyer_frames = pool.submit(buyer_side)
        seen_by_buyer = buyer_frames.result(timeout=30)
        seen_by_merchant = merchant_frames.result(timeout=30)

    assert buyer.finished
    assert merchant.finished
    assert buyer.outcome == merchant.outcome
    with live_client(live_arbiter) as client:
        log = client.get("/oanp/v0.1/sessions/sess-live/log", headers=buyer_key.headers).json()[
            "entries"
        ]
        jwks = client.get("/.well-known/jwks.json").json()
    assert [e["envelope"]["type"] for e in log] == SFO_JFK_TRACE
    assert verify_log(log, jwks).ok
    assert_frames_are_the_log(seen_by_buyer, log)
    assert [f.json() for f in seen_by_merchant] == log


def test_a_reader_sees_each_move_before_the_next_is_made(
    live_arbiter: LiveServer, keys: tuple[Agent, Agent]
) -> None:
    """Lock-step: the driver makes a move only after the reader saw the frames of the last
    one, so every frame was pushed while the session was still in progress."""
    received: list[Frame] = []
    arrived = threading.Condition()

    def wait_for(count: int) -> None:
        with arrived:
            assert arrived.wait_for(lambda: len(received) >= count, READ_TIMEOUT), (
                f"{len(received)} frames, waiting for {count}"
            )

    def reader(ready: Callable[[], None]) -> None:
        with (
            live_client(live_arbiter) as client,
            event_stream(client, events_path("sess-lockstep"), keys[1]) as stream,
        ):
            ready()
            for frame in stream:
                with arrived:
                    received.append(frame)
                    arrived.notify_all()

    with live_client(live_arbiter) as client:
        run = Stepper(client, *keys, session_id="sess-lockstep")
        run.open()
        connected = threading.Event()
        with ThreadPoolExecutor(1) as pool:
            done = pool.submit(reader, connected.set)
            assert connected.wait(READ_TIMEOUT)
            wait_for(1)
            while run.outbox:
                run.step()
                wait_for(run.seen)
                assert not done.done() or run.seen == len(SFO_JFK_TRACE)
            done.result(timeout=READ_TIMEOUT)  # the stream ended after session.agree
        log = run.log()
    assert_frames_are_the_log(received, log)
