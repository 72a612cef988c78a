"""A party's reveal of its constraints after the session ended, checked against its
commitment and its own prices."""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from arbiter_app.models import (
    AgentCredential,
    AgentRole,
    Entry,
    Session,
)
from oanp.wire.canonical import JsonObject
from oanp.wire.commitments import Side, is_weak, parse_reveal, verify_reveal
from oanp.wire.envelope import MessageType
from oanp.wire.envelope import Role as OanpRole
from oanp.wire.errors import AlreadyRevealed, NothingCommitted, RevealTooEarly
from oanp.wire.snapshot import load_state

_PRICED = (
    MessageType.OFFER_PROPOSE.value,
    MessageType.OFFER_COUNTER.value,
    MessageType.OFFER_ACCEPT.value,
)


def reveal_constraints(
    *,
    session: Session,
    agent: AgentCredential,
    data: bytes,
    admit: Callable[[], None] = lambda: None,
) -> JsonObject:
    """Check a party's reveal against its commitment and its own prices, then keep it.

    A reveal that opens the commitment is kept even when it shows the party broke its own
    limit: that is evidence, reported in ``breaches``. ``admit`` is called once every check
    passed, before the reveal is kept.
    """
    reveal = parse_reveal(data)
    role = agent.role
    party: Side = "buyer" if role == AgentRole.BUYER else "merchant"
    with transaction.atomic():
        locked = Session.objects.select_for_update().get(pk=session.pk)
        state = load_state(json.loads(locked.state))
        if not state.terminal:
            raise RevealTooEarly(f"session is {state.phase.value}")
        reveals = json.loads(locked.reveals)
        if role in reveals:
            raise AlreadyRevealed(f"the {role} has already revealed")
        commitment = state.commitment_of(OanpRole(role))
        if commitment is None:
            raise NothingCommitted(f"the {role} left before it committed anything")
        priced = Entry.objects.filter(session=locked, sender_role=role, type__in=_PRICED)
        prices = [
            (int(body["payload"]["round"]), Decimal(str(body["payload"]["price"])))
            for body in (json.loads(e.envelope) for e in priced.order_by("seq"))
        ]
        breaches = verify_reveal(
            commitment,
            role=party,
            constraints=reveal.constraints,
            salt=reveal.salt,
            item=state.item,
            max_rounds=state.max_rounds,
            prices=prices,
        )
        answer: JsonObject = {
            "session_id": state.session_id,
            "role": role,
            "opens": True,
            "weak_commitment": is_weak(commitment),
            "breaches": [
                b.describe("buyer" if role == AgentRole.BUYER else "merchant") for b in breaches
            ],
        }
        admit()
        reveals[role] = {
            "constraints": reveal.constraints,
            "salt": reveal.salt,
            "revealed_at": timezone.now().isoformat(),
            "breaches": answer["breaches"],
        }
        locked.reveals = json.dumps(reveals)
        locked.save(update_fields=["reveals"])
    return answer
