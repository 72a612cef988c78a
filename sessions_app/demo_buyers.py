"""The demo's buyer agents: they negotiate with the hosted merchant agents over HTTP, like any
external client, so the dashboard has live sessions to show.

A hosted merchant answers through the Celery worker, not in the reply to the buyer's POST, so
a buyer reads the session's log until the merchant's move (or the arbiter's) arrives. Only the
arbiter API is used here: the buyers hold nothing but their API keys and their own limits.
"""

from __future__ import annotations

import random
import secrets
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from oanp.agents import Agreed, BuyerAgent, BuyerVault
from oanp.commitments import encode_salt
from oanp.ids import new_ulid
from oanp.net.client import ArbiterClient
from oanp.strategies import strategy_named

#: Seconds between two reads of a log while waiting for the other side.
POLL_SECONDS = 0.3


@dataclass(frozen=True)
class Route:
    """Something a merchant sells and its public list price, all a buyer knows of it."""

    merchant_agent_id: str
    route: str
    list_price: Decimal


ROUTES = (
    Route("merchant-sfo", "SFO-JFK", Decimal(400)),
    Route("merchant-sfo", "SFO-LAX", Decimal(190)),
    Route("merchant-sfo", "SFO-SEA", Decimal(240)),
    Route("merchant-rail", "NYC-BOS", Decimal(110)),
    Route("merchant-rail", "NYC-WAS", Decimal(140)),
)


class Stopped(Exception):
    """The demo is stopping: a negotiation is abandoned where it stands."""


class Stalled(Exception):
    """Nothing new arrived in a session for longer than the buyer's patience."""


def buyer_agent(agent_id: str, vault: BuyerVault, strategy: str) -> BuyerAgent:
    return BuyerAgent(
        agent_id=agent_id,
        vault=vault,
        strategy=strategy_named(strategy, "buyer"),
        salt=encode_salt(secrets.token_bytes(32)),
        new_message_id=new_ulid,
    )


def negotiate(
    client: ArbiterClient,
    buyer: BuyerAgent,
    opening: dict[str, Any],
    *,
    stop: threading.Event,
    moves: int | None = None,
    think: Callable[[], float] = lambda: 0.0,
    on_entry: Callable[[dict[str, Any]], None] = lambda entry: None,
    patience: float = 30.0,
) -> list[dict[str, Any]]:
    """Submit ``opening``, then the buyer's answer to each new entry of the log, until the
    arbiter agrees or closes the session; the whole log.

    ``moves`` caps the buyer's submissions (then it falls silent, for a timer to close the
    session); ``think`` gives the seconds to wait before each move after the opening.
    """
    session_id = opening["session_id"]
    outbox = [opening]
    sent = seen = 0
    log: list[dict[str, Any]] = []
    last_news = time.monotonic()
    while buyer.outcome is None:
        for envelope in outbox:
            if sent and stop.wait(think()):
                raise Stopped
            client.submit(envelope)
            sent += 1
        outbox = []
        log = client.log(session_id)
        for entry in log[seen:]:
            on_entry(entry)
            answers = buyer.receive(entry["envelope"], datetime.now(UTC))
            if moves is None or sent < moves:
                outbox += answers
        if len(log) > seen:
            seen, last_news = len(log), time.monotonic()
        if buyer.outcome is None and not outbox:
            if stop.wait(POLL_SECONDS):
                raise Stopped
            if time.monotonic() - last_news > patience:
                raise Stalled(f"nothing new in session {session_id} for {patience:.0f} s")
    return log


def describe_outcome(buyer: BuyerAgent, log: list[dict[str, Any]]) -> str:
    rounds = sum(entry["envelope"]["type"] == "round.verdict" for entry in log)
    outcome = buyer.outcome
    if isinstance(outcome, Agreed):
        currency = log[0]["envelope"]["payload"]["currency"]
        return f"agreed at {outcome.price:.2f} {currency} after {rounds} round(s)"
    return f"closed ({getattr(outcome, 'reason', '?')}) after {rounds} round(s)"


class BackgroundBuyers:
    """Buyers that keep opening sessions with the hosted merchants: a new one every few
    seconds, at most ``concurrency`` at a time, until :meth:`close`.

    Their ceilings are drawn around each route's list price, so some meet the merchant's
    floor and some do not; one session in ``timeout_every`` gets a short deadline and a buyer
    that falls silent after its first offer, for the worker's timer to close.
    """

    def __init__(
        self,
        url: str,
        keys: dict[str, str],
        strategies: dict[str, str],
        write: Callable[[str], None],
        *,
        concurrency: int = 3,
        every: tuple[float, float] = (2.0, 5.0),
        timeout_every: int = 6,
    ) -> None:
        self.url = url
        self.keys = keys
        self.strategies = strategies
        self.write = write
        self.concurrency = concurrency
        self.every = every
        self.timeout_every = timeout_every
        self.stop = threading.Event()
        self._random = random.Random()  # noqa: S311 - demo variety, not secrets
        self._slots = threading.BoundedSemaphore(concurrency)
        self._threads: list[threading.Thread] = []
        self._count = 0
        self._main = threading.Thread(target=self._run, name="demo-buyers", daemon=True)

    def start(self) -> None:
        self._main.start()

    def close(self, timeout: float = 10.0) -> None:
        """Stop opening sessions and abandon the running ones; wait for their threads."""
        self.stop.set()
        give_up = time.monotonic() + timeout
        for thread in [self._main, *self._threads]:
            if thread.ident is not None:
                thread.join(max(0.0, give_up - time.monotonic()))

    def _run(self) -> None:
        while not self.stop.is_set():
            if not self._slots.acquire(timeout=0.5):
                continue
            self._count += 1
            thread = threading.Thread(
                target=self._session, args=(self._count,), name=f"demo-buyer-{self._count}"
            )
            thread.daemon = True
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
            thread.start()
            self.stop.wait(self._random.uniform(*self.every))

    def _session(self, number: int) -> None:
        pick = self._random
        buyer_id = pick.choice(sorted(self.keys))
        route = pick.choice(ROUTES)
        ceiling = (route.list_price * Decimal(pick.uniform(0.5, 1.0))).quantize(Decimal(1))
        budget = (ceiling * Decimal(pick.uniform(0.8, 1.0))).quantize(Decimal(1))
        strategy = self.strategies[buyer_id]
        buyer = buyer_agent(buyer_id, BuyerVault(true_ceiling=ceiling, budget_cap=budget), strategy)
        left_to_time_out = number % self.timeout_every == 0
        now = datetime.now(UTC)
        opening = buyer.open(
            session_id=new_ulid(),
            merchant_agent_id=route.merchant_agent_id,
            item={"route": route.route, "date": (now + timedelta(days=30)).date().isoformat()},
            currency="USD",
            max_rounds=pick.choice((4, 5, 6, 8)),
            now=now,
            deadline=now + timedelta(seconds=12) if left_to_time_out else None,
        )
        what = f"{buyer_id} ({strategy}) with {route.merchant_agent_id}, {route.route}"
        try:
            with ArbiterClient(self.url, self.keys[buyer_id], retries=2) as client:
                try:
                    log = negotiate(
                        client,
                        buyer,
                        opening,
                        stop=self.stop,
                        moves=2 if left_to_time_out else None,
                        think=lambda: pick.uniform(0.3, 1.5),
                        patience=60.0,
                    )
                except Stopped:
                    self._withdraw(client, buyer)
                    return
            quiet = ", the buyer silent from round 1" if left_to_time_out else ""
            self.write(f"  background: {what}: {describe_outcome(buyer, log)}{quiet}")
        except Exception as failure:  # one session's trouble must not stop the others
            if not self.stop.is_set():
                self.write(f"  background: {what}: gave up: {failure}")
        finally:
            self._slots.release()

    @staticmethod
    def _withdraw(client: ArbiterClient, buyer: BuyerAgent) -> None:
        """Leave a session the demo stops in, rather than leave it open until its timers."""
        if buyer.finished or buyer.commitment is None:
            return
        client.retries = 0
        with suppress(Exception):  # the arbiter may have closed it meanwhile, or be going
            client.submit(buyer.withdraw(datetime.now(UTC)))
