"""The demo's buyer agents: they negotiate with the hosted merchant agents over HTTP, like any
external client, so the dashboard has live sessions to show.

A hosted merchant answers through the Celery worker, not in the reply to the buyer's POST, so
a buyer reads the session's log until the merchant's move (or the arbiter's) arrives. Only the
arbiter API is used here: the buyers hold nothing but their API keys and their own limits.

So that the dashboard shows all it can, the background buyers do more than haggle: most
reveal their constraints after the end (the session page's analytics), some settle by reveal
(its settlement panel), some negotiate a flight's terms besides its fare (profile terms/v0.1:
the issue table, and with reveals the Pareto frontier), and a few break a rule on purpose (a
violation the arbiter catches).
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

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from oanp.agents.ids import new_ulid
from oanp.agents.parties import Agreed, BuyerAgent
from oanp.agents.strategies import strategy_named
from oanp.agents.tradeoffs import IssueLimits, TermsVault
from oanp.agents.vaults import BuyerVault
from oanp.net.client import ArbiterClient, ProblemError
from oanp.wire.canonical import JsonObject
from oanp.wire.commitments import encode_salt
from oanp.wire.envelope import MessageType
from oanp.wire.money import price_to_json
from oanp.wire.settlement import NEVER_SETTLE, SettlePolicy
from oanp.wire.signing import SigningKey
from oanp.wire.transcript import terms_text

#: Seconds between two reads of a log while waiting for the other side.
POLL_SECONDS = 0.3
#: A settling buyer reveals its ceiling in round 2, after one round of haggling has set
#: standing prices that the midpoint must respect.
SETTLE = SettlePolicy("round", from_round=2)


@dataclass(frozen=True)
class Route:
    """Something a merchant sells and its public list price, all a buyer knows of it."""

    merchant_agent_id: str
    route: str
    list_price: Decimal
    #: The currencies its merchant lists (demo.seed), the first its list price's.
    currencies: tuple[str, ...] = ("USD",)


#: What a fare leaves open, as a buyer declares it in a terms session: checked bags (the buyer
#: wants more) and the fare's class, from the buyer's best to the merchant's best.
FLIGHT_ISSUES: list[JsonObject] = [
    {
        "name": "checked_bags",
        "kind": "number",
        "buyer_prefers": "high",
        "min": 0,
        "max": 3,
        "decimals": 0,
    },
    {"name": "fare_class", "kind": "choice", "options": ["flexible", "standard", "basic"]},
]
#: The merchant that weighs :data:`FLIGHT_ISSUES` (demo.seed gives it the terms to).
TERMS_MERCHANT = "merchant-sfo"
#: The weights a terms buyer draws from for each issue, the fare weighing 1: so buyers differ
#: in what they give up first.
TERMS_WEIGHTS = (Decimal("0.25"), Decimal("0.5"), Decimal(1), Decimal(2))

ROUTES = (
    Route("merchant-sfo", "SFO-JFK", Decimal(400)),
    Route("merchant-sfo", "SFO-LAX", Decimal(190)),
    Route("merchant-sfo", "SFO-SEA", Decimal(240)),
    Route("merchant-rail", "NYC-BOS", Decimal(110), ("USD", "EUR")),
    Route("merchant-rail", "NYC-WAS", Decimal(140), ("USD", "EUR")),
)
#: The currency a few buyers ask in, which no demo merchant offers: the arbiter refuses
#: those opens (``currency_not_offered``), for the demo to show it.
UNOFFERED_CURRENCY = "JPY"


class Stopped(Exception):
    """The demo is stopping: a negotiation is abandoned where it stands."""


class Stalled(Exception):
    """Nothing new arrived in a session for longer than the buyer's patience."""


@dataclass(frozen=True)
class Plan:
    """What the buyer of one background session does besides haggling."""

    #: Falls silent after its first offer, for the worker's timer to close the session.
    falls_silent: bool
    #: Opens the session for settlement and reveals its ceiling in round 2.
    settles: bool
    #: Lowers its price in round 2: a renege, for the arbiter to catch (I4).
    reneges: bool
    #: Reveals its constraints after the end, for the session page's analytics.
    reveals: bool
    #: Negotiates :data:`FLIGHT_ISSUES` besides the fare, with :data:`TERMS_MERCHANT`.
    terms: bool = False
    #: Asks in :data:`UNOFFERED_CURRENCY`, which the arbiter refuses at the open.
    unoffered: bool = False


@dataclass(frozen=True)
class Cadence:
    """How often each kind of session comes, by the session's number in the run, so a run's
    mix is the same every time: one in ``renege`` breaks a rule, else one in ``time_out``
    falls silent, else one in ``settle`` settles by reveal, else one in ``terms`` (counted from
    the first) negotiates terms; all but one in ``conceal`` reveal after the end; one in
    ``unoffered`` asks in a currency no merchant offers (and is refused at the open)."""

    renege: int = 15
    time_out: int = 6
    settle: int = 3
    conceal: int = 5
    terms: int = 4
    unoffered: int = 20

    def plan(self, number: int) -> Plan:
        reneges = number % self.renege == 0
        falls_silent = not reneges and number % self.time_out == 0
        settles = not (reneges or falls_silent) and number % self.settle == 0
        return Plan(
            falls_silent=falls_silent,
            settles=settles,
            reneges=reneges,
            reveals=number % self.conceal != 0,
            # Settlement by reveal settles the price alone (docs/protocol.md §16), so a
            # settling buyer keeps to the price.
            terms=not (reneges or falls_silent or settles) and (number - 1) % self.terms == 0,
            unoffered=number % self.unoffered == 0,
        )


class TakeBack:
    """Turns a buyer's move after its first offer into an offer below that one: a renege,
    sent as the agent's own envelope with the price changed, since the agent's guard refuses
    to build one."""

    def __init__(self) -> None:
        self.first: Decimal | None = None

    def __call__(self, envelope: dict[str, Any]) -> dict[str, Any]:
        if envelope["type"] not in (MessageType.OFFER_PROPOSE, MessageType.OFFER_ACCEPT):
            return envelope
        if self.first is None:
            self.first = Decimal(str(envelope["payload"]["price"]))
            return envelope
        lower = (self.first * Decimal("0.9")).quantize(Decimal(1))
        payload = {**envelope["payload"], "price": price_to_json(lower)}
        return {**envelope, "type": MessageType.OFFER_PROPOSE.value, "payload": payload}


def demo_signer() -> SigningKey:
    """A demo buyer's signing key: Ed25519, made for this run and never stored."""
    return SigningKey.from_cryptography(Ed25519PrivateKey.generate())


def unchanged(envelope: dict[str, Any]) -> dict[str, Any]:
    return envelope


def buyer_agent(
    agent_id: str, vault: BuyerVault, strategy: str, settle: SettlePolicy = NEVER_SETTLE
) -> BuyerAgent:
    return BuyerAgent(
        agent_id=agent_id,
        vault=vault,
        strategy=strategy_named(strategy, "buyer"),
        salt=encode_salt(secrets.token_bytes(32)),
        new_message_id=new_ulid,
        settle=settle,
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
    outgoing: Callable[[dict[str, Any]], dict[str, Any]] = unchanged,
    patience: float = 30.0,
) -> list[dict[str, Any]]:
    """Submit ``opening``, then the buyer's answer to each new entry of the log, until the
    arbiter agrees or closes the session; the whole log.

    ``moves`` caps the buyer's submissions (then it falls silent, for a timer to close the
    session); ``think`` gives the seconds to wait before each move after the opening;
    ``outgoing`` may change each envelope before it is sent (see :class:`TakeBack`).
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
            client.submit(outgoing(envelope))
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


def flight_terms(pick: random.Random) -> TermsVault:
    """A terms buyer's weights and limits on :data:`FLIGHT_ISSUES`: two bags at best, and the
    flexible fare; drawn weights and worst values, within what the demo merchant can give."""
    return TermsVault(
        Decimal(1),
        (
            IssueLimits(
                "checked_bags", pick.choice(TERMS_WEIGHTS), Decimal(2), Decimal(pick.randint(0, 1))
            ),
            IssueLimits(
                "fare_class",
                pick.choice(TERMS_WEIGHTS),
                "flexible",
                pick.choice(("standard", "basic")),
            ),
        ),
    )


def describe_outcome(buyer: BuyerAgent, log: list[dict[str, Any]]) -> str:
    verdicts = [e["envelope"]["payload"] for e in log if e["envelope"]["type"] == "round.verdict"]
    rounds = len(verdicts)
    outcome = buyer.outcome
    if isinstance(outcome, Agreed):
        currency = log[0]["envelope"]["payload"]["currency"]
        agreement = log[-1]["envelope"]["payload"]["agreement"]
        how = "settled by reveal" if "settlement" in agreement else "agreed"
        terms = terms_text(agreement.get("final_terms"))
        agreed = f"{how} at {outcome.price:.2f} {currency}{', ' + terms if terms else ''}"
        return f"{agreed} after {rounds} round(s)"
    violated = [verdict for verdict in verdicts if verdict["status"] == "violated"]
    if violated:
        return f"violation caught: {violated[0]['rationale']} in round {violated[0]['round']}"
    reason = getattr(outcome, "reason", "?")
    if reason == "no_zone":
        return f"no zone: the revealed ceiling is under the floor, after {rounds} round(s)"
    return f"closed ({reason}) after {rounds} round(s)"


class BackgroundBuyers:
    """Buyers that keep opening sessions with the hosted merchants: a new one every few
    seconds, at most ``concurrency`` at a time, until :meth:`close` (or ``sessions`` of them).

    Their ceilings are drawn around each route's list price, so some meet the merchant's
    floor and some do not; what else each buyer does follows ``cadence`` (:class:`Cadence`).
    A buyer that falls silent gets a short deadline, for the worker's timer to close.
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
        cadence: Cadence = Cadence(),
        sessions: int | None = None,
    ) -> None:
        self.url = url
        self.keys = keys
        #: Each buyer signs its envelopes (docs/protocol.md §17) with a key made for this run.
        self.signers = {buyer_id: demo_signer() for buyer_id in keys}
        self.strategies = strategies
        self.write = write
        self.concurrency = concurrency
        self.every = every
        self.cadence = cadence
        self.sessions = sessions
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
        self.join(timeout)

    def join(self, timeout: float) -> None:
        """Wait for the sessions to end: all of them, when ``sessions`` caps their number."""
        give_up = time.monotonic() + timeout
        if self._main.ident is not None:
            self._main.join(timeout)
        # Read once the main thread is done (or given up on): it is the one adding threads.
        for thread in self._threads:
            thread.join(max(0.0, give_up - time.monotonic()))

    def _run(self) -> None:
        while not self.stop.is_set() and self._count != self.sessions:
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
        plan = self.cadence.plan(number)
        buyer_id = pick.choice(sorted(self.keys))
        route = pick.choice(
            [r for r in ROUTES if r.merchant_agent_id == TERMS_MERCHANT] if plan.terms else ROUTES
        )
        # The list price is in the merchant's first currency; the demo's others are near par.
        currency = UNOFFERED_CURRENCY if plan.unoffered else pick.choice(route.currencies)
        ceiling = (route.list_price * Decimal(pick.uniform(0.5, 1.0))).quantize(Decimal(1))
        budget = (ceiling * Decimal(pick.uniform(0.8, 1.0))).quantize(Decimal(1))
        strategy = self.strategies[buyer_id]
        terms = flight_terms(pick) if plan.terms else None
        vault = BuyerVault(true_ceiling=ceiling, budget_cap=budget, terms=terms)
        buyer = buyer_agent(buyer_id, vault, strategy, SETTLE if plan.settles else NEVER_SETTLE)
        now = datetime.now(UTC)
        opening = buyer.open(
            session_id=new_ulid(),
            merchant_agent_id=route.merchant_agent_id,
            item={"route": route.route, "date": (now + timedelta(days=30)).date().isoformat()},
            currency=currency,
            max_rounds=pick.choice((4, 5, 6, 8)),
            now=now,
            deadline=now + timedelta(seconds=12) if plan.falls_silent else None,
            issues=FLIGHT_ISSUES if plan.terms else None,
        )
        what = (
            f"{opening['session_id']} {buyer_id} ({strategy}) with {route.merchant_agent_id}, "
            f"{route.route} in {currency}{', with terms' if plan.terms else ''}"
        )
        try:
            with ArbiterClient(
                self.url, self.keys[buyer_id], retries=2, signing_key=self.signers[buyer_id]
            ) as client:
                client.register_signing_key()  # 200 once registered: one request a session
                try:
                    log = negotiate(
                        client,
                        buyer,
                        opening,
                        stop=self.stop,
                        moves=2 if plan.falls_silent else None,
                        think=lambda: pick.uniform(0.3, 1.5),
                        outgoing=TakeBack() if plan.reneges else unchanged,
                        patience=60.0,
                    )
                except Stopped:
                    self._withdraw(client, buyer)
                    return
                except ProblemError as refused:
                    if refused.code != "currency_not_offered":
                        raise
                    self.write(f"  background: {what}: refused at the open: {refused.detail}")
                    return
                notes = [describe_outcome(buyer, log)]
                if plan.falls_silent:
                    notes.append("the buyer silent from round 1")
                if plan.reveals:
                    client.reveal(opening["session_id"], **buyer.reveal())
                    notes.append("the buyer revealed its limits after the end")
            self.write(f"  background: {what}: {'; '.join(notes)}")
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
