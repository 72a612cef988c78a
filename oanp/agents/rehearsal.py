"""A whole session in-process: two agents and the arbiter's machine, no transport between.

This is what ``oanp demo`` runs and what tests and benchmarks pit strategies with. Both agents
see the one shared stream of entries (I2), in log order, exactly as a transport would deliver it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from oanp.agents.parties import BuyerAgent, MerchantAgent
from oanp.agents.strategies import ReferenceBuyer, ReferenceMerchant
from oanp.agents.vaults import BuyerVault, MerchantVault
from oanp.wire.canonical import JsonObject
from oanp.wire.commitments import encode_salt
from oanp.wire.envelope import envelope_from_json
from oanp.wire.log import Entry
from oanp.wire.machine import Negotiation
from oanp.wire.settlement import NEVER_SETTLE, SettlePolicy
from oanp.wire.state import Arbiter

#: Enough for 20 rounds of moves and verdicts; a loop past it means two agents talk past
#: each other, which should fail loudly rather than spin.
MAX_ENVELOPES = 200


@dataclass(frozen=True, slots=True)
class Rehearsal:
    negotiation: Negotiation
    entries: list[Entry]
    #: When the arbiter's timer ended the session because nobody moved, if it did.
    expired_at: datetime | None = None


def rehearse(
    *,
    buyer: BuyerAgent,
    merchant: MerchantAgent,
    arbiter: Arbiter,
    opening: Mapping[str, Any],
    clock: Callable[[], datetime],
    on_entry: Callable[[Entry], None] | None = None,
) -> Rehearsal:
    """Run the session ``opening`` (the buyer's ``session.open``) to its end.

    Each entry the arbiter logs is shown to both agents; whatever they answer is fed back in
    the order they answered. Refusals propagate: an in-process agent has no excuse for one.
    """
    negotiation, first = Negotiation.open(
        envelope_from_json(dict(opening)), received_at=clock(), arbiter=arbiter
    )
    entries: list[Entry] = []
    outbox: deque[JsonObject] = deque()

    def deliver(new: list[Entry]) -> None:
        for entry in new:
            entries.append(entry)
            if on_entry:
                on_entry(entry)
            now = clock()
            outbox.extend(buyer.receive(entry.envelope, now))
            outbox.extend(merchant.receive(entry.envelope, now))

    deliver(first)
    fed = 0
    expired_at = None
    while not negotiation.state.terminal:
        if not outbox:
            # Nobody has a move (a buyer that lets its final answer lapse): the arbiter's
            # timer ends the session, as it would on a server.
            due = negotiation.next_deadline()
            if due is None:
                break
            expired_at = max(due, clock())
            deliver(negotiation.expire(expired_at))
            continue
        fed += 1
        if fed > MAX_ENVELOPES:
            raise RuntimeError(f"no end after {MAX_ENVELOPES} envelopes")
        envelope = envelope_from_json(outbox.popleft())
        deliver(negotiation.feed(envelope, received_at=clock()))
    return Rehearsal(negotiation, entries, expired_at)


def sfo_jfk_agents(
    *,
    buyer_id: str,
    merchant_id: str,
    new_message_id: Callable[[], str],
    buyer_salt: bytes = b"\x01" * 32,
    merchant_salt: bytes = b"\x02" * 32,
    buyer_settles: SettlePolicy = NEVER_SETTLE,
) -> tuple[BuyerAgent, MerchantAgent]:
    """The agents of the published SFO→JFK session (docs/protocol.md §5): a reference buyer
    with ceiling 420 and a reference merchant with floor 280, each kept in its vault.

    The salts default to fixed bytes so that tests and benchmarks are repeatable; anything
    facing real counterparties passes fresh random ones.
    """
    buyer = BuyerAgent(
        agent_id=buyer_id,
        vault=BuyerVault(true_ceiling=Decimal(420), budget_cap=Decimal(400), urgency="medium"),
        strategy=ReferenceBuyer(),
        salt=encode_salt(buyer_salt),
        new_message_id=new_message_id,
        settle=buyer_settles,
    )
    merchant = MerchantAgent(
        agent_id=merchant_id,
        vault=MerchantVault(floor_price=Decimal(280), ideal_price=Decimal(400)),
        strategy=ReferenceMerchant(),
        salt=encode_salt(merchant_salt),
        new_message_id=new_message_id,
    )
    return buyer, merchant
