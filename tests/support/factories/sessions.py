"""A session between buyer-001 and merchant-sfo: envelopes to feed the machine, and the
published example's agents (ceiling 420, floor 280) for tests and benchmarks that drive them."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from oanp.agents import rehearsal
from oanp.agents.parties import BuyerAgent, MerchantAgent
from oanp.wire.envelope import Envelope, envelope_from_json
from oanp.wire.log import Entry
from oanp.wire.machine import Negotiation
from oanp.wire.settlement import NEVER_SETTLE, SettlePolicy
from oanp.wire.signing import SigningKey, jwks_document
from oanp.wire.state import Arbiter

T0 = datetime(2026, 4, 28, 14, 0, tzinfo=UTC)
BUYER, MERCHANT, SESSION = "buyer-001", "merchant-sfo", "01JDB1P4W3X7Q9M2K8T6R5N0B0"
BUYER_COMMIT = "sha256:" + "b" * 64
MERCHANT_COMMIT = "sha256:" + "c" * 64
ITEM = {"route": "SFO-JFK", "date": "2026-04-28"}
KEY = SigningKey.from_ed25519_seed(bytes(range(32)))
JWKS = jwks_document([KEY.public_jwk()])
ARBITER = Arbiter("arbiter.test", KEY, "https://arbiter.test/.well-known/jwks.json")

_ids = itertools.count(1)


def envelope_json(
    kind: str,
    payload: dict[str, Any],
    *,
    role: str | None = None,
    agent: str | None = None,
    message_id: str | None = None,
    session_id: str = SESSION,
) -> dict[str, Any]:
    """The JSON of an envelope, unparsed (so it may be one the parser refuses)."""
    role = role or ("merchant" if kind in ("session.ack", "offer.counter") else "buyer")
    agent = agent or (MERCHANT if role == "merchant" else BUYER)
    return {
        "oanp_version": "0.1",
        "message_id": message_id or f"m{next(_ids)}",
        "session_id": session_id,
        "timestamp": "2026-04-28T14:00:00Z",
        "sender": {"role": role, "agent_id": agent},
        "type": kind,
        "payload": payload,
    }


def envelope(
    kind: str,
    payload: dict[str, Any],
    *,
    role: str | None = None,
    agent: str | None = None,
    message_id: str | None = None,
    session_id: str = SESSION,
) -> Envelope:
    return envelope_from_json(
        envelope_json(
            kind, payload, role=role, agent=agent, message_id=message_id, session_id=session_id
        )
    )


def opening(**overrides: Any) -> Envelope:
    payload = {
        "merchant_agent_id": MERCHANT,
        "item": ITEM,
        "currency": "USD",
        "max_rounds": 5,
        "constraints_commit": BUYER_COMMIT,
        **overrides,
    }
    return envelope("session.open", payload)


def ack(commit: str = MERCHANT_COMMIT) -> Envelope:
    return envelope("session.ack", {"constraints_commit": commit})


def propose(round_: int, price: Any, commit: str = BUYER_COMMIT) -> Envelope:
    return envelope(
        "offer.propose", {"round": round_, "price": price, "constraints_commit": commit}
    )


def counter(round_: int, price: Any, commit: str = MERCHANT_COMMIT) -> Envelope:
    return envelope(
        "offer.counter", {"round": round_, "price": price, "constraints_commit": commit}
    )


def accept(role: str, round_: int, price: Any, commit: str | None = None) -> Envelope:
    commit = commit or (BUYER_COMMIT if role == "buyer" else MERCHANT_COMMIT)
    return envelope(
        "offer.accept", {"round": round_, "price": price, "constraints_commit": commit}, role=role
    )


def withdraw(role: str, commit: str | None = None) -> Envelope:
    commit = commit or (BUYER_COMMIT if role == "buyer" else MERCHANT_COMMIT)
    return envelope(
        "session.close", {"reason": "withdrawn", "constraints_commit": commit}, role=role
    )


class Session:
    """A live negotiation with a clock that moves one second per envelope."""

    def __init__(self, **open_overrides: Any) -> None:
        self.now = T0
        self.negotiation, self.entries = Negotiation.open(
            opening(**open_overrides), received_at=self.now, arbiter=ARBITER
        )

    def feed(self, env: Envelope) -> list[Entry]:
        self.now += timedelta(seconds=1)
        new = self.negotiation.feed(env, received_at=self.now)
        self.entries.extend(new)
        return new

    def types(self) -> list[str]:
        return [e.type for e in self.entries]

    def log(self) -> list[dict[str, Any]]:
        return [e.as_json() for e in self.entries]


def negotiating(**open_overrides: Any) -> Session:
    """A session the merchant has joined: round 1, the buyer to move."""
    session = Session(**open_overrides)
    session.feed(ack())
    return session


def sfo_jfk_agents(
    tag: str = "",
    *,
    buyer_id: str = "buyer-001",
    merchant_id: str = "merchant-sfo",
    buyer_settles: SettlePolicy = NEVER_SETTLE,
) -> tuple[BuyerAgent, MerchantAgent]:
    """The published example's agents, with message ids ``{tag}msg-0001``, ... ."""
    numbers = itertools.count(1)
    return rehearsal.sfo_jfk_agents(
        buyer_id=buyer_id,
        merchant_id=merchant_id,
        new_message_id=lambda: f"{tag}msg-{next(numbers):04d}",
        buyer_settles=buyer_settles,
    )
