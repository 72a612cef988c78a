"""A whole session in-process: two agents and the arbiter's machine, no transport between.

This is what ``oanp demo`` runs and what tests and benchmarks pit strategies with. Both agents
see the one shared stream of entries (I2), in log order, exactly as a transport would deliver it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from oanp.agents import BuyerAgent, MerchantAgent
from oanp.canonical import JsonObject
from oanp.envelope import envelope_from_json
from oanp.log import Entry
from oanp.machine import Arbiter, Negotiation

#: Enough for 20 rounds of moves and verdicts; a loop past it means two agents talk past
#: each other, which should fail loudly rather than spin.
MAX_ENVELOPES = 200


@dataclass(frozen=True, slots=True)
class Rehearsal:
    negotiation: Negotiation
    entries: list[Entry]


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
    while outbox and not negotiation.state.terminal:
        fed += 1
        if fed > MAX_ENVELOPES:
            raise RuntimeError(f"no end after {MAX_ENVELOPES} envelopes")
        envelope = envelope_from_json(outbox.popleft())
        deliver(negotiation.feed(envelope, received_at=clock()))
    return Rehearsal(negotiation, entries)
