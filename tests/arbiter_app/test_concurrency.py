"""Many clients at once against the live server: the session row lock and the log's unique
keys must turn every race into one winner and documented refusals, never a 500, a skipped or
doubled seq, or a broken hash chain."""

from __future__ import annotations

import copy
import json
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from oanp.agents.parties import BuyerAgent, MerchantAgent
from oanp.audit import verify_log
from oanp.wire.log import chain_breaks
from tests.arbiter_app.test_streams import INBOX, Frame, event_stream, live_client
from tests.conftest import LiveServer
from tests.support.factories.agents import ENVELOPES, Agent, HttpNegotiation, make_agent, now
from tests.support.factories.sessions import sfo_jfk_agents

pytestmark = pytest.mark.django_db(transaction=True)

#: Clients in each race: more than the server's database pool (20), so some wait for it too.
RACERS = 24
SFO_JFK_ITEM = {"route": "SFO-JFK", "date": "2026-04-28"}

Post = tuple[Agent, dict[str, Any]]


def race(live_arbiter: LiveServer, posts: Sequence[Post]) -> list[httpx.Response]:
    """POST every envelope from its own thread and connection, all released at once."""
    start = threading.Barrier(len(posts), timeout=20)

    def post(key: Agent, envelope: dict[str, Any]) -> httpx.Response:
        body = json.dumps(envelope)
        # verify=False: plain HTTP, and loading the CA bundle costs ~40 ms of GIL per client.
        with live_arbiter.client(verify=False) as client:
            client.get("/.well-known/jwks.json").raise_for_status()  # connected before the start
            start.wait()
            return client.post(ENVELOPES, content=body, headers=key.headers)

    with ThreadPoolExecutor(len(posts)) as pool:
        futures = [pool.submit(post, key, envelope) for key, envelope in posts]
        return [future.result(timeout=60) for future in futures]


def outcomes(responses: Sequence[httpx.Response]) -> Counter[tuple[int, str]]:
    """``(status, problem code)`` of each answer; ``""`` for a success."""
    counted: Counter[tuple[int, str]] = Counter()
    for response in responses:
        assert response.status_code < 500, response.text
        code = response.json()["code"] if response.status_code >= 400 else ""
        counted[response.status_code, code] += 1
    return counted


def read_log(client: httpx.Client, key: Agent, session_id: str) -> list[dict[str, Any]]:
    response = client.get(f"/oanp/v0.1/sessions/{session_id}/log", headers=key.headers)
    assert response.status_code == 200, response.text
    entries: list[dict[str, Any]] = response.json()["entries"]
    return entries


def assert_log_is_whole(log: list[dict[str, Any]]) -> None:
    assert [e["seq"] for e in log] == list(range(1, len(log) + 1))
    assert chain_breaks(log) == []
    message_ids = [e["envelope"]["message_id"] for e in log]
    assert len(set(message_ids)) == len(message_ids)


class Session:
    """One SFO→JFK session driven by its two reference agents from the log."""

    def __init__(self, client: httpx.Client, keys: tuple[Agent, Agent], session_id: str) -> None:
        self.client, self.keys, self.session_id = client, keys, session_id
        self.buyer, self.merchant = sfo_jfk_agents(
            f"{session_id}-", buyer_id=keys[0].agent_id, merchant_id=keys[1].agent_id
        )
        self.seen = 0

    def opening(self) -> dict[str, Any]:
        envelope: dict[str, Any] = self.buyer.open(
            session_id=self.session_id,
            merchant_agent_id=self.merchant.agent_id,
            item=SFO_JFK_ITEM,
            currency="USD",
            now=now(),
        )
        return envelope

    def post(self, post: Post) -> httpx.Response:
        key, envelope = post
        return self.client.post(ENVELOPES, content=json.dumps(envelope), headers=key.headers)

    def catch_up(self) -> list[Post]:
        """Show both agents the entries they have not seen; what they would send next."""
        log = self.log()
        moves: list[Post] = []
        for entry in log[self.seen :]:
            agent: BuyerAgent | MerchantAgent
            for agent, key in zip((self.buyer, self.merchant), self.keys, strict=True):
                moves += [(key, e) for e in agent.receive(entry["envelope"], now())]
        self.seen = len(log)
        return moves

    def finish(self, moves: list[Post]) -> list[dict[str, Any]]:
        while moves:
            response = self.post(moves.pop(0))
            assert response.status_code == 201, response.text
            moves += self.catch_up()
        return self.log()

    def log(self) -> list[dict[str, Any]]:
        return read_log(self.client, self.keys[0], self.session_id)


@pytest.fixture
def keys(live_arbiter: LiveServer) -> tuple[Agent, Agent]:
    return make_agent("buyer-001", "buyer"), make_agent("merchant-sfo", "merchant")


@pytest.fixture
def at_buyers_turn(
    live_arbiter: LiveServer, keys: tuple[Agent, Agent]
) -> Iterator[tuple[Session, Post]]:
    """A session after open and ack, and the buyer's round-1 propose, not yet sent."""
    with live_arbiter.client() as client:
        session = Session(client, keys, "sess-race")
        assert session.post((keys[0], session.opening())).status_code == 201
        (ack,) = session.catch_up()
        assert session.post(ack).status_code == 201
        (propose,) = session.catch_up()
        assert propose[1]["type"] == "offer.propose"
        yield session, propose


def _variant(post: Post, message_id: str, price: int, **payload: Any) -> Post:
    key, envelope = post
    changed = copy.deepcopy(envelope)
    changed["message_id"] = message_id
    changed["payload"].update(price=price, **payload)
    return key, changed


def test_of_many_proposals_for_one_turn_exactly_one_lands(
    live_arbiter: LiveServer, at_buyers_turn: tuple[Session, Post], keys: tuple[Agent, Agent]
) -> None:
    session, propose = at_buyers_turn
    proposals = [_variant(propose, f"propose-{i:02d}", 300 + i) for i in range(RACERS)]
    responses = race(live_arbiter, proposals)
    assert outcomes(responses) == {(201, ""): 1, (409, "out_of_turn"): RACERS - 1}
    (winner,) = [r.json() for r in responses if r.status_code == 201]

    log = session.log()
    assert_log_is_whole(log)
    assert [e["envelope"]["type"] for e in log] == ["session.open", "session.ack", "offer.propose"]
    assert log[2] == winner["entry"]

    # The merchant's turn, raced the same way; the winner completes round 1.
    (counter,) = session.catch_up()
    counters = [_variant(counter, f"counter-{i:02d}", 380 - i) for i in range(RACERS)]
    responses = race(live_arbiter, counters)
    assert outcomes(responses) == {(201, ""): 1, (409, "out_of_turn"): RACERS - 1}
    (winner,) = [r.json() for r in responses if r.status_code == 201]
    assert [e["envelope"]["type"] for e in winner["arbiter"]] == ["round.verdict"]

    # Both agents take the winners from the log as their own moves and settle from there.
    log = session.finish(session.catch_up())
    assert_log_is_whole(log)
    assert log[-1]["envelope"]["type"] == "session.agree"
    with live_arbiter.client() as client:
        jwks = client.get("/.well-known/jwks.json").json()
    report = verify_log(log, jwks)
    assert report.ok, report.summary()


def test_both_parties_racing_at_once_leave_a_whole_log(
    live_arbiter: LiveServer, at_buyers_turn: tuple[Session, Post]
) -> None:
    """Proposals and counters for round 1 together: one propose lands; a counter lands only
    if it came after it; every other answer is a documented refusal."""
    session, propose = at_buyers_turn
    merchant_key = session.keys[1]
    counter = dict(
        copy.deepcopy(propose[1]),
        type="offer.counter",
        sender={"role": "merchant", "agent_id": merchant_key.agent_id},
    )
    counter["payload"]["constraints_commit"] = session.merchant.commitment
    half = RACERS // 2
    posts = [_variant(propose, f"propose-{i:02d}", 300 + i) for i in range(half)] + [
        _variant((merchant_key, counter), f"counter-{i:02d}", 380 - i) for i in range(half)
    ]
    responses = race(live_arbiter, posts)
    counted = outcomes(responses)
    assert set(counted) <= {(201, ""), (409, "out_of_turn"), (422, "wrong_round")}
    landed = [r.json()["entry"] for r in responses if r.status_code == 201]

    log = session.log()
    assert_log_is_whole(log)
    moves = [e for e in log[2:] if e["envelope"]["sender"]["role"] != "arbiter"]
    assert sorted(landed, key=lambda e: e["seq"]) == moves
    assert [e["envelope"]["type"] for e in moves] in (
        ["offer.propose"],
        ["offer.propose", "offer.counter"],
    )
    if len(moves) == 2:
        assert log[-1]["envelope"]["type"] == "round.verdict"


def test_of_many_opens_of_one_new_session_id_exactly_one_lands(
    live_arbiter: LiveServer, keys: tuple[Agent, Agent]
) -> None:
    """The loser's insert waits on the winner's unique session_id, then finds its session."""
    other_buyer = make_agent("buyer-002", "buyer")
    posts: list[Post] = []
    with live_arbiter.client() as client:
        for i in range(RACERS):
            key = keys[0] if i % 4 else other_buyer
            session = Session(client, (key, keys[1]), "sess-contested")
            session.buyer, session.merchant = sfo_jfk_agents(
                f"open-{i:02d}-", buyer_id=key.agent_id, merchant_id=keys[1].agent_id
            )
            posts.append((key, session.opening()))
        responses = race(live_arbiter, posts)
        assert outcomes(responses) == {(201, ""): 1, (409, "session_exists"): RACERS - 1}
        (winner,) = [r.json() for r in responses if r.status_code == 201]
        owner = next(
            k
            for k in (keys[0], other_buyer)
            if k.agent_id == winner["session"]["buyer"]["agent_id"]
        )
        log = read_log(client, owner, "sess-contested")
    assert log == [winner["entry"]]
    assert_log_is_whole(log)


def test_a_racing_replay_of_an_open_lands_once_and_repeats_its_answer(
    live_arbiter: LiveServer, keys: tuple[Agent, Agent]
) -> None:
    with live_arbiter.client() as client:
        session = Session(client, keys, "sess-replayed-open")
        opening = (keys[0], session.opening())
        responses = race(live_arbiter, [opening] * RACERS)
        assert outcomes(responses) == {(201, ""): 1, (200, ""): RACERS - 1}
        assert len({r.text for r in responses}) == 1
        log = session.log()
    assert log == [responses[0].json()["entry"]]


def test_a_racing_replay_of_a_move_lands_once_and_repeats_its_answer(
    live_arbiter: LiveServer, at_buyers_turn: tuple[Session, Post]
) -> None:
    session, propose = at_buyers_turn
    responses = race(live_arbiter, [propose] * RACERS)
    assert outcomes(responses) == {(201, ""): 1, (200, ""): RACERS - 1}
    assert len({r.text for r in responses}) == 1
    log = session.log()
    assert_log_is_whole(log)
    assert log[-1] == responses[0].json()["entry"]
    assert len(log) == 3


PARALLEL_SESSIONS = 10


def test_independent_sessions_in_parallel_all_settle_and_verify(
    live_arbiter: LiveServer,
) -> None:
    pairs = [
        (make_agent(f"buyer-{n:02d}", "buyer"), make_agent(f"merchant-{n:02d}", "merchant"))
        for n in range(PARALLEL_SESSIONS)
    ]
    start = threading.Barrier(PARALLEL_SESSIONS, timeout=20)

    def negotiate(n: int) -> list[dict[str, Any]]:
        buyer_key, merchant_key = pairs[n]
        buyer, merchant = sfo_jfk_agents(
            f"p{n}-", buyer_id=buyer_key.agent_id, merchant_id=merchant_key.agent_id
        )
        with live_arbiter.client(verify=False) as client:
            run = HttpNegotiation(client, buyer, merchant, buyer_key, merchant_key)
            start.wait()
            return run.run(f"sess-parallel-{n:02d}")

    with ThreadPoolExecutor(PARALLEL_SESSIONS) as pool:
        logs = [
            f.result(timeout=60)
            for f in [pool.submit(negotiate, n) for n in range(PARALLEL_SESSIONS)]
        ]

    with live_arbiter.client() as client:
        jwks = client.get("/.well-known/jwks.json").json()
        states = [
            client.get(
                f"/oanp/v0.1/sessions/sess-parallel-{n:02d}", headers=pairs[n][1].headers
            ).json()["state"]
            for n in range(PARALLEL_SESSIONS)
        ]
    assert states == ["AGREED"] * PARALLEL_SESSIONS
    for n, log in enumerate(logs):
        assert_log_is_whole(log)
        agree = log[-1]["envelope"]
        assert agree["session_id"] == f"sess-parallel-{n:02d}"
        assert (agree["type"], agree["payload"]["final_price"]) == ("session.agree", 340)
        report = verify_log(log, jwks)
        assert report.ok, report.summary()
    # One signing key served them all, though the first signatures raced to create it.
    assert len(jwks["keys"]) == 1


def test_an_inbox_misses_nothing_while_its_sessions_commit_in_parallel(
    live_arbiter: LiveServer,
) -> None:
    """Entry ids are taken at insert and seen at commit, so parallel sessions make ids show up
    out of order; the inbox's hold-back at each hole must still deliver every entry once."""
    hub = make_agent("merchant-hub", "merchant")
    buyers = [make_agent(f"buyer-{n:02d}", "buyer") for n in range(PARALLEL_SESSIONS)]
    with live_arbiter.client() as client:  # traffic before: the head is a real id
        before = Session(client, (buyers[0], hub), "sess-before")
        assert before.post((buyers[0], before.opening())).status_code == 201
    listening = threading.Event()
    start = threading.Barrier(PARALLEL_SESSIONS, timeout=20)

    def listen() -> list[Frame]:
        frames = []
        with live_client(live_arbiter) as client, event_stream(client, INBOX, hub) as stream:
            listening.set()
            for frame in stream:
                frames.append(frame)
                if sum(f.event == "session.agree" for f in frames) == PARALLEL_SESSIONS:
                    return frames
        raise AssertionError("the inbox ended")

    def negotiate(n: int) -> list[dict[str, Any]]:
        buyer, merchant = sfo_jfk_agents(
            f"h{n}-", buyer_id=buyers[n].agent_id, merchant_id=hub.agent_id
        )
        with live_arbiter.client(verify=False) as client:
            run = HttpNegotiation(client, buyer, merchant, buyers[n], hub)
            start.wait()
            return run.run(f"sess-hub-{n:02d}")

    with ThreadPoolExecutor(PARALLEL_SESSIONS + 1) as pool:
        inbox = pool.submit(listen)
        assert listening.wait(10)
        runs = [pool.submit(negotiate, n) for n in range(PARALLEL_SESSIONS)]
        logs = [run.result(timeout=60) for run in runs]
        frames = inbox.result(timeout=30)

    cursors = [f.id for f in frames]
    assert len(set(cursors)) == len(cursors)
    assert cursors == sorted(cursors, key=lambda c: int(c[1:]))
    by_session: dict[str, list[dict[str, Any]]] = {}
    for frame in frames:
        by_session.setdefault(frame.json()["envelope"]["session_id"], []).append(frame.json())
    # Opened without Last-Event-ID, the inbox starts at the live head, after sess-before.
    assert "sess-before" not in by_session
    assert by_session == {f"sess-hub-{n:02d}": log for n, log in enumerate(logs)}
