"""Deterministic finished sessions, logs and audit bundles for the oanp tests.

Everything the CLI's ``demo()`` draws at random is fixed here: the arbiter key comes from a
seed, salts are constant bytes, the clock advances one second per reading, and message and
session ids come from counters. The same call always yields the same bytes, so a test can
compare hashes, signatures and whole files.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, cast

from cryptography.hazmat.primitives.asymmetric import ec

from oanp.agents.parties import BuyerAgent, MerchantAgent
from oanp.agents.rehearsal import rehearse
from oanp.agents.strategies import (
    Boulware,
    Conceder,
    Linear,
    ReferenceBuyer,
    ReferenceMerchant,
    Strategy,
)
from oanp.agents.vaults import BuyerVault, MerchantVault
from oanp.audit import build_bundle
from oanp.wire.canonical import ZERO_HASH, JsonObject, canonical_bytes
from oanp.wire.commitments import encode_salt
from oanp.wire.envelope import envelope_from_json
from oanp.wire.log import entry_hash_of
from oanp.wire.machine import Negotiation
from oanp.wire.party_signatures import PartyKey, sign_envelope
from oanp.wire.signing import AGREEMENT_TYP, SigningKey, jwks_document
from oanp.wire.state import Arbiter

ARBITER_ID = "arbiter.test"
JWKS_URI = "https://arbiter.test/.well-known/jwks.json"
SEED = bytes(range(32))
#: Another arbiter's key: signatures by it must never verify against :func:`jwks`.
OTHER_SEED = bytes(range(100, 132))
#: The private scalar of :func:`es256_key`, big-endian (well below the P-256 group order).
ES256_SCALAR_BYTES = bytes(range(32, 64))
START = datetime(2026, 4, 28, 9, 0, tzinfo=UTC)
BUNDLED_AT = datetime(2026, 4, 28, 18, 0, tzinfo=UTC)


def arbiter_key(seed: bytes = SEED) -> SigningKey:
    return SigningKey.from_ed25519_seed(seed)


def other_key() -> SigningKey:
    return arbiter_key(OTHER_SEED)


def es256_key() -> SigningKey:
    """An ES256 (P-256) arbiter key from a fixed scalar. The key is always the same; its
    signatures are not (ECDSA draws a fresh nonce each time)."""
    scalar = int.from_bytes(ES256_SCALAR_BYTES, "big")
    return SigningKey.from_cryptography(ec.derive_private_key(scalar, ec.SECP256R1()))


def jwks(*keys: SigningKey) -> dict[str, Any]:
    """The public key set of ``keys`` (the test arbiter's key when none are named)."""
    return jwks_document([k.public_jwk() for k in keys or (arbiter_key(),)])


class SteppingClock:
    """A clock that reads ``start``, then one second later at every further reading."""

    def __init__(self, start: datetime = START) -> None:
        self._next = start

    def __call__(self) -> datetime:
        now, self._next = self._next, self._next + timedelta(seconds=1)
        return now


def counter_ids(prefix: str) -> Callable[[], str]:
    """``prefix-0001``, ``prefix-0002``, ...: message ids that never repeat within a session."""
    numbers: Iterator[int] = itertools.count(1)
    return lambda: f"{prefix}-{next(numbers):04d}"


@dataclass(frozen=True)
class Scenario:
    """One negotiation to rehearse: who, with which private limits and tactics."""

    session_id: str
    buyer_vault: BuyerVault
    merchant_vault: MerchantVault
    buyer_strategy: Strategy = field(default_factory=ReferenceBuyer)
    merchant_strategy: Strategy = field(default_factory=ReferenceMerchant)
    item: JsonObject = field(default_factory=lambda: {"route": "SFO-JFK", "date": "2026-04-28"})
    currency: str = "USD"
    max_rounds: int = 5
    start: datetime = START


#: The published SFO→JFK session (docs/protocol.md §5): 320/370, then 340 accepted.
SFO_JFK = Scenario(
    session_id="sess-sfo-jfk",
    buyer_vault=BuyerVault(true_ceiling=Decimal(420), budget_cap=Decimal(400), urgency="medium"),
    merchant_vault=MerchantVault(floor_price=Decimal(280), ideal_price=Decimal(400)),
)
#: No zone of agreement (the buyer's ceiling is under the merchant's floor): max_rounds_reached.
NO_DEAL = Scenario(
    session_id="sess-lax-ord",
    buyer_vault=BuyerVault(true_ceiling=Decimal(250), budget_cap=Decimal(240)),
    merchant_vault=MerchantVault(floor_price=Decimal(300), ideal_price=Decimal(380)),
    buyer_strategy=Boulware(),
    merchant_strategy=Boulware(),
    item={"route": "LAX-ORD", "date": "2026-05-02"},
    max_rounds=3,
    start=START + timedelta(hours=1),
)
#: Time-dependent tactics in four rounds, ending in a deal.
LINEAR_DEAL = Scenario(
    session_id="sess-bos-sea",
    buyer_vault=BuyerVault(true_ceiling=Decimal(500), budget_cap=Decimal(450)),
    merchant_vault=MerchantVault(floor_price=Decimal(350), ideal_price=Decimal(520)),
    buyer_strategy=Linear(),
    merchant_strategy=Conceder(),
    item={"route": "BOS-SEA", "date": "2026-05-09"},
    max_rounds=4,
    start=START + timedelta(hours=2),
)
THREE_SESSIONS = (SFO_JFK, NO_DEAL, LINEAR_DEAL)


def session_log(scenario: Scenario = SFO_JFK, *, key: SigningKey | None = None) -> list[JsonObject]:
    """The finished log of ``scenario`` as JSON entries, wired like ``oanp demo``."""
    key = key or arbiter_key()
    arbiter = Arbiter(ARBITER_ID, key, JWKS_URI)
    clock = SteppingClock(scenario.start)
    buyer = BuyerAgent(
        agent_id="buyer-001",
        vault=scenario.buyer_vault,
        strategy=scenario.buyer_strategy,
        salt=encode_salt(b"\x01" * 32),
        new_message_id=counter_ids("b"),
        # The window closes a declined last counter: the logs keep max_rounds_reached.
        decline="lapse",
    )
    merchant = MerchantAgent(
        agent_id="merchant-sfo",
        vault=scenario.merchant_vault,
        strategy=scenario.merchant_strategy,
        salt=encode_salt(b"\x02" * 32),
        new_message_id=counter_ids("m"),
    )
    opening = buyer.open(
        session_id=scenario.session_id,
        merchant_agent_id="merchant-sfo",
        item=scenario.item,
        currency=scenario.currency,
        max_rounds=scenario.max_rounds,
        now=clock(),
    )
    result = rehearse(buyer=buyer, merchant=merchant, arbiter=arbiter, opening=opening, clock=clock)
    return [entry.as_json() for entry in result.entries]


def bundle_of(
    scenarios: Sequence[Scenario] = THREE_SESSIONS,
    *,
    key: SigningKey | None = None,
    created_at: datetime = BUNDLED_AT,
    previous: Sequence[JsonObject] = (),
) -> JsonObject:
    """An audit bundle of the scenarios' logs, in order, signed by ``key``."""
    key = key or arbiter_key()
    return build_bundle(
        logs=[session_log(s, key=key) for s in scenarios],
        jwks=jwks(key),
        key=key,
        arbiter_id=ARBITER_ID,
        created_at=created_at,
        scope={"test": True},
        previous=previous,
    )


def rechain(log: Sequence[JsonObject]) -> list[JsonObject]:
    """``log`` with seq, prev_hash and entry_hash recomputed in order: after a hand edit, the
    hash chain is intact again and only the invariant checks can tell."""
    out: list[JsonObject] = []
    prev = ZERO_HASH
    for seq, entry in enumerate(log, start=1):
        fixed: JsonObject = {**entry, "seq": seq, "prev_hash": prev}
        fixed["entry_hash"] = prev = entry_hash_of(fixed)
        out.append(fixed)
    return out


def forge(log: Sequence[JsonObject], *, key: SigningKey | None = None) -> list[JsonObject]:
    """What a faulty arbiter would write: ``log`` rechained, and its ``session.agree`` (if any)
    pointed at the new head and signed again with the arbiter's real ``key``."""
    key = key or arbiter_key()
    entries = rechain(log)
    last = entries[-1]["envelope"]
    assert isinstance(last, dict)
    if last["type"] != "session.agree":
        return entries
    head = entries[-2]["entry_hash"]
    payload = dict(cast(JsonObject, last["payload"]))
    agreement = dict(cast(JsonObject, payload["agreement"]))
    agreement.update(session_digest=head, log_length=len(entries) - 1)
    payload.update(
        session_digest=head,
        agreement=agreement,
        signature=key.sign_detached(canonical_bytes(agreement), typ=AGREEMENT_TYP),
    )
    entries[-1] = {**entries[-1], "envelope": {**last, "payload": payload}}
    return rechain(entries)


def caught_renege_log() -> list[JsonObject]:
    """SFO→JFK where the buyer takes back its 320 with 300 in round 2, fed straight to the
    arbiter's machine (an agent refuses to send it): evidence, a violated verdict, a close."""
    moves = _party_moves()[:5]
    cast(JsonObject, moves[4]["payload"])["price"] = 300
    return _machine_log(moves)


def self_dealing_log() -> list[JsonObject]:
    """SFO→JFK with buyer-001 in both seats, fed straight to the arbiter's machine (the
    arbiter's service refuses such an open, 422 ``self_dealing``): chained and signed like any
    deal, but one agent agreed with itself."""
    moves = _party_moves()
    cast(JsonObject, moves[0]["payload"])["merchant_agent_id"] = "buyer-001"
    for move in moves:
        cast(JsonObject, move["sender"])["agent_id"] = "buyer-001"
    return _machine_log(moves)


#: The parties' keys of :func:`signed_log`, registered a day before its session.
BUYER_SIGNER = SigningKey.from_ed25519_seed(bytes(range(200, 232)))
MERCHANT_SIGNER = es256_key()
REGISTERED = START - timedelta(days=1)


def party_keys(**spans: datetime) -> dict[str, list[JsonObject]]:
    """A bundle's ``party_keys`` for :func:`signed_log`'s two parties: registered a day
    before, retired at ``spans``' ``buyer``/``merchant`` moment when given."""
    return {
        agent_id: [PartyKey(agent_id, key.public_jwk(), REGISTERED, spans.get(side)).as_json()]
        for side, agent_id, key in (
            ("buyer", "buyer-001", BUYER_SIGNER),
            ("merchant", "merchant-sfo", MERCHANT_SIGNER),
        )
    }


def signed_log(*, unsigned: Sequence[str] = ()) -> list[JsonObject]:
    """The SFO→JFK log with every party envelope signed by its sender (§17), except those of
    the agents named in ``unsigned``."""
    signers = {"buyer-001": BUYER_SIGNER, "merchant-sfo": MERCHANT_SIGNER}
    moves = []
    for move in _party_moves():
        agent_id = cast(JsonObject, move["sender"])["agent_id"]
        signer = None if agent_id in unsigned else signers[cast(str, agent_id)]
        moves.append(move if signer is None else sign_envelope(move, signer))
    return _machine_log(moves)


def _party_moves() -> list[JsonObject]:
    """The buyer's and the merchant's envelopes of the SFO→JFK log, in order, to edit."""
    return [
        cast(JsonObject, copy.deepcopy(e["envelope"]))
        for e in session_log()
        if _role(e["envelope"]) != "arbiter"
    ]


def _machine_log(moves: Sequence[JsonObject]) -> list[JsonObject]:
    """The log the arbiter's machine writes for ``moves``, one second apart."""
    clock = SteppingClock()
    arbiter = Arbiter(ARBITER_ID, arbiter_key(), JWKS_URI)
    negotiation, entries = Negotiation.open(
        envelope_from_json(moves[0]), received_at=clock(), arbiter=arbiter
    )
    for move in moves[1:]:
        entries += negotiation.feed(envelope_from_json(move), received_at=clock())
    return [entry.as_json() for entry in entries]


def _role(envelope: object) -> object:
    assert isinstance(envelope, dict)
    sender = envelope["sender"]
    assert isinstance(sender, dict)
    return sender["role"]
