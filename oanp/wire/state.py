"""The session's state (docs/protocol.md §5): its phases, the one table of which party move is
legal where (:data:`TRANSITIONS`, keyed by ``(phase, whose turn, sender role, type)``), and
the frozen :class:`SessionState` every step of :class:`oanp.wire.machine.Negotiation` replaces.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from operator import attrgetter
from typing import Any, Protocol

from oanp.wire.canonical import JsonObject
from oanp.wire.envelope import (
    MessageType,
    Role,
)
from oanp.wire.log import Head
from oanp.wire.profiles import (
    PROFILES,
    Profile,
    Reason,
)
from oanp.wire.terms import Issue, Values

MAX_DEADLINE_AHEAD = timedelta(hours=24)
#: The close reasons of a session's timers, as against a party's or an operator's.
TIMER_REASONS = frozenset({Reason.RESPONSE_TIMEOUT, Reason.DEADLINE_EXPIRED})


class Phase(StrEnum):
    OPENING = "OPENING"
    NEGOTIATING = "NEGOTIATING"
    #: One party revealed its limit to settle (docs/protocol.md §5, settlement); the other
    #: may reveal its own or withdraw.
    SETTLING = "SETTLING"
    EVALUATING = "EVALUATING"
    AGREED = "AGREED"
    CLOSED = "CLOSED"

    @property
    def is_terminal(self) -> bool:
        """Whether no envelope can move a session on from here."""
        return self in TERMINAL


TERMINAL = frozenset({Phase.AGREED, Phase.CLOSED})


class Move(StrEnum):
    ACK = "ack"
    PROPOSE = "propose"
    COUNTER = "counter"
    BUYER_ACCEPT = "buyer_accept"
    MERCHANT_ACCEPT = "merchant_accept"
    WITHDRAW = "withdraw"
    REVEAL = "reveal"


B, M = Role.BUYER, Role.MERCHANT
T = MessageType

#: (phase, whose turn, sender role, type) → the move it is. Anything else is refused.
TRANSITIONS: Mapping[tuple[Phase, Role, Role, MessageType], Move] = {
    (Phase.OPENING, M, M, T.SESSION_ACK): Move.ACK,
    (Phase.NEGOTIATING, B, B, T.OFFER_PROPOSE): Move.PROPOSE,
    (Phase.NEGOTIATING, B, B, T.OFFER_ACCEPT): Move.BUYER_ACCEPT,
    (Phase.NEGOTIATING, M, M, T.OFFER_COUNTER): Move.COUNTER,
    (Phase.NEGOTIATING, M, M, T.OFFER_ACCEPT): Move.MERCHANT_ACCEPT,
    # Settlement: the party in turn reveals first, then the other, whose turn it then is.
    **{
        (phase, who, who, T.SETTLE_REVEAL): Move.REVEAL
        for phase in (Phase.NEGOTIATING, Phase.SETTLING)
        for who in (B, M)
    },
    # Either party may withdraw whenever the session is live, whoever's turn it is.
    **{
        (phase, turn, who, T.SESSION_CLOSE): Move.WITHDRAW
        for phase in (Phase.OPENING, Phase.NEGOTIATING, Phase.SETTLING)
        for turn in (B, M)
        for who in (B, M)
    },
}

#: The moves of the final answer's turn: the buyer accepts the last counter or withdraws;
#: the merchant may still withdraw.
FINAL_ANSWER_MOVES = frozenset({Move.BUYER_ACCEPT, Move.WITHDRAW})

#: Where each move may leave the session. A priced move that breaches I3/I4 is still logged,
#: then judged ``violated``, so every priced move may also end in CLOSED.
MOVE_EXITS: Mapping[Move, frozenset[Phase]] = {
    Move.ACK: frozenset({Phase.NEGOTIATING}),
    Move.PROPOSE: frozenset({Phase.NEGOTIATING, Phase.CLOSED}),
    Move.COUNTER: frozenset({Phase.NEGOTIATING, Phase.CLOSED}),
    Move.BUYER_ACCEPT: frozenset({Phase.AGREED, Phase.CLOSED}),
    Move.MERCHANT_ACCEPT: frozenset({Phase.AGREED, Phase.CLOSED}),
    Move.WITHDRAW: frozenset({Phase.CLOSED}),
    Move.REVEAL: frozenset({Phase.SETTLING, Phase.AGREED, Phase.CLOSED}),
}


class AgreementSigner(Protocol):
    """What the machine needs of a signing key (see :class:`oanp.wire.signing.SigningKey`)."""

    @property
    def alg(self) -> str: ...

    @property
    def kid(self) -> str: ...

    def sign_detached(self, payload: bytes, *, typ: str) -> str: ...


@dataclass(frozen=True, slots=True)
class Arbiter:
    """Who the arbiter is and the key it signs agreements with."""

    arbiter_id: str
    signer: AgreementSigner
    jwks_uri: str
    profiles: Mapping[str, Profile] = field(default_factory=lambda: PROFILES)


@dataclass(frozen=True, slots=True)
class SessionState:
    """Everything the arbiter knows of one session; never anything private."""

    session_id: str
    phase: Phase
    round: int
    turn: Role | None
    buyer_agent_id: str
    merchant_agent_id: str
    item: JsonObject
    currency: str
    max_rounds: int
    profile: str
    response_window_s: int
    deadline: datetime | None
    buyer_commit: str
    merchant_commit: str | None
    opened_at: datetime
    #: The buyer's price in the current round (its standing price while the merchant moves).
    buyer_price: Decimal | None = None
    #: The buyer's price of the round before, for I4.
    previous_buyer_price: Decimal | None = None
    #: The merchant's last counter: its standing price.
    merchant_price: Decimal | None = None
    last_spread: Decimal | None = None
    stuck_rounds: int = 0
    turn_deadline: datetime | None = None
    head: Head = field(default_factory=Head)
    message_ids: frozenset[str] = frozenset()
    final_price: Decimal | None = None
    close_reason: Reason | None = None
    #: The merchant countered in the last round: the buyer's final answer is due
    #: (docs/protocol.md §5), and the round's verdict waits for it.
    final_answer: bool = False
    #: ``"reveal"`` when the session was opened for settlement by reveal and acked.
    settlement: str | None = None
    #: The limits revealed to settle: the buyer's true_ceiling, the merchant's floor_price.
    revealed_ceiling: Decimal | None = None
    revealed_floor: Decimal | None = None
    #: Profile terms/v0.1: the declared issues, and each side's values beside its prices.
    issues: tuple[Issue, ...] = ()
    buyer_terms: Values | None = None
    previous_buyer_terms: Values | None = None
    merchant_terms: Values | None = None
    last_issues_open: int | None = None

    @property
    def terminal(self) -> bool:
        return self.phase.is_terminal

    @property
    def closed_by_timer(self) -> bool:
        """Whether a timer ended the session: a window, the deadline, or the final answer's
        window, which closes as ``max_rounds_reached``."""
        return self.close_reason in TIMER_REASONS or (
            self.final_answer and self.close_reason is Reason.MAX_ROUNDS_REACHED
        )

    def party_role(self, agent_id: str, role: Role) -> bool:
        return (role is B and agent_id == self.buyer_agent_id) or (
            role is M and agent_id == self.merchant_agent_id
        )

    def agent_of(self, role: Role) -> str:
        return self.buyer_agent_id if role is B else self.merchant_agent_id

    def commitment_of(self, role: Role) -> str | None:
        return self.buyer_commit if role is B else self.merchant_commit

    @property
    def buyer_standing(self) -> Decimal | None:
        """The buyer's latest price: this round's, or before it proposes, the last round's."""
        return self.buyer_price if self.buyer_price is not None else self.previous_buyer_price

    @property
    def buyer_standing_terms(self) -> Values | None:
        return self.buyer_terms if self.buyer_price is not None else self.previous_buyer_terms


STATE_FIELDS = tuple(f.name for f in fields(SessionState))
_state_values = attrgetter(*STATE_FIELDS)
_FIELD_INDEX = {name: index for index, name in enumerate(STATE_FIELDS)}


def evolve(state: SessionState, changes: dict[str, Any]) -> SessionState:
    """``dataclasses.replace`` without its scan of the fields on every call (all are init),
    passing them by position: half the time of by keyword, on the path of every move. A name
    that is no field raises ``KeyError``."""
    values = list(_state_values(state))
    for name, value in changes.items():
        values[_FIELD_INDEX[name]] = value
    return SessionState(*values)
