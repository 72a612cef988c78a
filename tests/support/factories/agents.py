"""Agents with API keys, and two reference agents negotiating through the HTTP API."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from arbiter_app import selectors, services
from oanp.agents.parties import BuyerAgent, MerchantAgent
from oanp.audit import SignatureRules, read_party_keys
from oanp.wire import discovery
from oanp.wire.party_signatures import sign_envelope
from oanp.wire.signing import SigningKey
from tests.support.factories.sessions import sfo_jfk_agents

ENVELOPES = "/oanp/v0.1/envelopes"


@dataclass(frozen=True)
class Agent:
    agent_id: str
    role: str
    api_key: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}


def make_agent(agent_id: str, role: str, *, owner: str = "") -> Agent:
    issued = services.issue_credential(agent_id=agent_id, role=role, owner=owner)
    return Agent(agent_id, role, issued.api_key)


def list_merchant(
    agent_id: str,
    *,
    merchant: str = "Skyways",
    description: str = "",
    currencies: Sequence[str] = ("USD",),
    catalog: Sequence[dict[str, Any]] = (),
    listed: bool = True,
) -> None:
    """``agent_id``'s entry in the arbiter's directory, as its owner would save it."""
    listing = discovery.parse_listing(
        listed=listed, description=description, currencies=list(currencies), catalog=list(catalog)
    )
    services.save_listing(merchant_agent_id=agent_id, merchant=merchant, listing=listing)


#: The envelope types of the published SFO→JFK session, in log order.
SFO_JFK_TRACE = [
    "session.open",
    "session.ack",
    "offer.propose",
    "offer.counter",
    "round.verdict",
    "offer.propose",
    "offer.accept",
    "round.verdict",
    "session.agree",
]


def now() -> datetime:
    return datetime.now(UTC)


@dataclass
class HttpNegotiation:
    """Drives one session: posts each agent's envelopes with its own key and shows both
    agents every new entry of the log, in order, as each would read it from the API."""

    client: httpx.Client
    buyer: BuyerAgent
    merchant: MerchantAgent
    buyer_key: Agent
    merchant_key: Agent
    responses: list[httpx.Response] = field(default_factory=list)
    seen: int = 0

    def run(self, session_id: str, **opening: Any) -> list[dict[str, Any]]:
        outbox: deque[tuple[Agent, dict[str, Any]]] = deque()
        first = self.buyer.open(
            session_id=session_id,
            merchant_agent_id=self.merchant.agent_id,
            item=opening.pop("item", {"route": "SFO-JFK", "date": "2026-04-28"}),
            currency="USD",
            max_rounds=opening.pop("max_rounds", 5),
            now=now(),
            **opening,
        )
        outbox.append((self.buyer_key, first))
        log: list[dict[str, Any]] = []
        while outbox:
            key, envelope = outbox.popleft()
            response = self.client.post(
                ENVELOPES, content=json.dumps(envelope), headers=key.headers
            )
            self.responses.append(response)
            assert response.status_code == 201, response.text
            log = self.log(session_id, self.buyer_key)
            for entry in log[self.seen :]:
                outbox.extend(
                    (self.buyer_key, e) for e in self.buyer.receive(entry["envelope"], now())
                )
                outbox.extend(
                    (self.merchant_key, e) for e in self.merchant.receive(entry["envelope"], now())
                )
            self.seen = len(log)
        return log

    def log(self, session_id: str, agent: Agent) -> list[dict[str, Any]]:
        response = self.client.get(f"/oanp/v0.1/sessions/{session_id}/log", headers=agent.headers)
        self.responses.append(response)
        assert response.status_code == 200, response.text
        entries: list[dict[str, Any]] = response.json()["entries"]
        return entries


# In-process ------------------------------------------------------------------------------------

SFO_JFK_ITEM = {"route": "SFO-JFK", "date": "2026-04-28"}


def registered_signatures(log: Sequence[dict[str, Any]]) -> SignatureRules:
    """What a log's party signatures are checked with: the keys its parties registered, as
    the arbiter's database holds them (hosted agents sign with keys of their own)."""
    parties = {
        e["envelope"]["sender"]["agent_id"]
        for e in log
        if e["envelope"]["sender"]["role"] != "arbiter"
    }
    return SignatureRules(read_party_keys(selectors.party_keys_json(parties)))


def post(client: Any, agent: Agent | None, body: bytes | str | Any, path: str = ENVELOPES) -> Any:
    """POST ``body`` (bytes or text as is, anything else as JSON) with ``agent``'s key."""
    if not isinstance(body, bytes | str):
        body = json.dumps(body)
    headers = agent.headers if agent is not None else {}
    return client.post(path, data=body, content_type="application/json", headers=headers)


def read_log(client: Any, agent: Agent, session_id: str) -> list[dict[str, Any]]:
    response = client.get(f"/oanp/v0.1/sessions/{session_id}/log", headers=agent.headers)
    assert response.status_code == 200, response.content
    entries: list[dict[str, Any]] = response.json()["entries"]
    return entries


@dataclass
class ClientNegotiation:
    """The SFO→JFK session driven one envelope at a time through Django's test client, so a
    test can stop anywhere, look at what an agent would send next, and send something else."""

    client: Any
    buyer_key: Agent
    merchant_key: Agent
    session_id: str = "sess-sfo-jfk"
    tag: str = ""
    #: The agents to drive, when not the published example's.
    agents: tuple[BuyerAgent, MerchantAgent] | None = None
    buyer: BuyerAgent = field(init=False)
    merchant: MerchantAgent = field(init=False)
    outbox: deque[tuple[Agent, dict[str, Any]]] = field(default_factory=deque)
    seen: int = 0
    #: The keys agents sign with (§12), by agent id; an agent not named here signs nothing.
    signers: dict[str, SigningKey] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.buyer, self.merchant = self.agents or sfo_jfk_agents(
            self.tag, buyer_id=self.buyer_key.agent_id, merchant_id=self.merchant_key.agent_id
        )

    def open(self, **opening: Any) -> Any:
        envelope = self.buyer.open(
            session_id=self.session_id,
            merchant_agent_id=self.merchant_key.agent_id,
            item=opening.pop("item", SFO_JFK_ITEM),
            currency=opening.pop("currency", "USD"),
            max_rounds=opening.pop("max_rounds", 5),
            now=now(),
            **opening,
        )
        self.outbox.append((self.buyer_key, envelope))
        return self.step()

    def peek(self) -> tuple[Agent, dict[str, Any]]:
        """The next envelope an agent would send, and whose key it goes with."""
        return self.outbox[0]

    def step(self) -> Any:
        """Post the next envelope; show both agents the entries it caused."""
        key, envelope = self.outbox.popleft()
        signer = self.signers.get(key.agent_id)
        if signer is not None:
            envelope = sign_envelope(envelope, signer)
        response = post(self.client, key, envelope)
        assert response.status_code == 201, response.content
        self.catch_up()
        return response

    def catch_up(self) -> None:
        log = self.log()
        for entry in log[self.seen :]:
            self.outbox.extend(
                (self.buyer_key, e) for e in self.buyer.receive(entry["envelope"], now())
            )
            self.outbox.extend(
                (self.merchant_key, e) for e in self.merchant.receive(entry["envelope"], now())
            )
        self.seen = len(log)

    def run_until(self, kind: str, price: Any = None) -> dict[str, Any]:
        """Step until the next envelope is of ``kind`` (and ``price``); return it, unsent."""
        while self.outbox:
            envelope = self.outbox[0][1]
            if envelope["type"] == kind and price in (None, envelope["payload"].get("price")):
                return envelope
            self.step()
        raise AssertionError(f"no {kind} {price} was ever about to be sent")

    def finish(self) -> list[dict[str, Any]]:
        while self.outbox:
            self.step()
        return self.log()

    def log(self) -> list[dict[str, Any]]:
        return read_log(self.client, self.buyer_key, self.session_id)
