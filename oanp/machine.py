"""The arbiter's session state machine (docs/protocol.md §5), sans-IO.

A :class:`Negotiation` is fed parsed envelopes with the arbiter's clock reading and answers
with the log entries they cause: the party's own entry, then the arbiter's (``round.verdict``,
``session.agree``, ``session.close``). It reads no clock and draws no randomness; the signing
key is handed in. A refused envelope raises a :class:`~oanp.errors.ProtocolError` and leaves the
state exactly as it was, because every step computes a new frozen :class:`SessionState` and
only a step that completes replaces the old one.

Which party move is legal where is one table, :data:`TRANSITIONS`, keyed by
``(phase, whose turn, sender role, type)``. A completed round passes through ``EVALUATING``,
which the same step leaves for agreement, close or the next round.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from operator import attrgetter
from typing import Any, Protocol

from oanp.canonical import JsonObject, canonical_bytes
from oanp.commitments import LIMIT_KEYS, is_weak, limit_breaches, limit_of, opens
from oanp.commitments import Role as CommitRole
from oanp.envelope import (
    ARBITER_ID_PREFIX,
    INVARIANTS,
    OANP_VERSION,
    Ack,
    Envelope,
    MessageType,
    Offer,
    Open,
    Role,
    SettleReveal,
    Withdraw,
    check_sender,
    format_timestamp,
)
from oanp.errors import (
    BadTerms,
    DeadlineOutOfRange,
    FieldError,
    MessageIdSeen,
    NotAParty,
    NotSettleable,
    OutOfTurn,
    PriceNotStanding,
    PricePrecision,
    SchemaInvalid,
    SessionExists,
    SessionTerminal,
    SettlementNotEnabled,
    TermsNotStanding,
    TimerExpired,
    UnknownSession,
    WeakCommitment,
    WrongRound,
)
from oanp.log import Entry, Head, make_entry
from oanp.money import fits_currency, minor_units, price_to_json
from oanp.profiles import (
    PROFILES,
    Judgement,
    Profile,
    Reason,
    VerdictStatus,
    breach_invariant,
)
from oanp.settlement import SETTLEMENT_RULE, settlement_price
from oanp.signing import AGREEMENT_TYP
from oanp.terms import Issue, Values, is_pure_retraction, issues_open, read_terms, terms_json

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
    """What the machine needs of a signing key (see :class:`oanp.signing.ArbiterKey`)."""

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

    def commitment_of(self, role: Role) -> str | None:
        return self.buyer_commit if role is B else self.merchant_commit

    @property
    def buyer_standing(self) -> Decimal | None:
        """The buyer's latest price: this round's, or before it proposes, the last round's."""
        return self.buyer_price if self.buyer_price is not None else self.previous_buyer_price

    @property
    def buyer_standing_terms(self) -> Values | None:
        return self.buyer_terms if self.buyer_price is not None else self.previous_buyer_terms


_STATE_FIELDS = tuple(f.name for f in fields(SessionState))
_state_values = attrgetter(*_STATE_FIELDS)


def _evolve(state: SessionState, changes: dict[str, Any]) -> SessionState:
    """``dataclasses.replace`` without its scan of the fields on every call (all are init)."""
    values = dict(zip(_STATE_FIELDS, _state_values(state), strict=True))
    values.update(changes)
    return SessionState(**values)


class Negotiation:
    """One session as the arbiter runs it. Create with :meth:`open`, then :meth:`feed`."""

    def __init__(self, state: SessionState, arbiter: Arbiter) -> None:
        self.state = state
        self.arbiter = arbiter

    # Opening ---------------------------------------------------------------------------------

    @classmethod
    def open(
        cls, envelope: Envelope, *, received_at: datetime, arbiter: Arbiter
    ) -> tuple[Negotiation, list[Entry]]:
        """Start a session from a buyer's ``session.open``; returns it and its first entry.

        For a session that does not exist yet, docs/protocol.md §14's order is: 404 for any type
        but an open (only an open may name a new session), then 422 for a sender role that may
        not open, then what the open itself must satisfy.
        """
        if envelope.type is not T.SESSION_OPEN:
            raise UnknownSession(f"no session {envelope.session_id!r}")
        check_sender(envelope)
        payload = envelope.payload
        assert isinstance(payload, Open)
        if payload.profile not in arbiter.profiles:
            raise SchemaInvalid(
                "unknown profile",
                errors=[
                    FieldError(
                        "$.payload.profile", "must be one of " + ", ".join(sorted(arbiter.profiles))
                    )
                ],
            )
        if arbiter.profiles[payload.profile].with_terms != bool(payload.issues):
            needs = "does not take" if payload.issues else "needs"
            raise SchemaInvalid(
                f"profile {payload.profile} {needs} declared issues",
                errors=[FieldError("$.payload.issues", f"the profile {needs} declared issues")],
            )
        if payload.settlement is not None and is_weak(payload.constraints_commit):
            raise WeakCommitment(WEAK_FOR_SETTLEMENT.format(role="buyer"))
        if payload.deadline is not None and not (
            received_at < payload.deadline <= received_at + MAX_DEADLINE_AHEAD
        ):
            raise DeadlineOutOfRange(
                f"deadline {format_timestamp(payload.deadline)} is not within 24 hours after "
                f"{format_timestamp(received_at)}"
            )
        state = SessionState(
            session_id=envelope.session_id,
            phase=Phase.OPENING,
            round=0,
            turn=M,
            buyer_agent_id=envelope.agent_id,
            merchant_agent_id=payload.merchant_agent_id,
            item=payload.item,
            currency=payload.currency,
            max_rounds=payload.max_rounds,
            profile=payload.profile,
            response_window_s=payload.response_window_s,
            deadline=payload.deadline,
            buyer_commit=payload.constraints_commit,
            merchant_commit=None,
            opened_at=received_at,
            settlement=payload.settlement,
            issues=payload.issues,
        )
        step = _Step(state, arbiter, received_at)
        step.log(envelope, turn_deadline=step.window_end())
        return cls(step.state, arbiter), step.entries

    # Party moves -----------------------------------------------------------------------------

    def feed(self, envelope: Envelope, *, received_at: datetime) -> list[Entry]:
        """Apply one party envelope; return the entries it caused (its own first).

        Raises a :class:`~oanp.errors.ProtocolError` and changes nothing when it is refused.
        This is the one place that orders the checks of docs/protocol.md §14 for an existing
        session (401, 413, 400 and the key's own agent are the transport's, before it): 403 not
        a party, 422 a type the sender's role may not send, the idempotency check
        (:class:`~oanp.errors.MessageIdSeen`, which the log's store resolves), 409 a reused
        ``session_id``, a terminal session or out of turn, then each move's own 422s.
        """
        state = self.state
        if envelope.session_id != state.session_id:
            raise UnknownSession(f"envelope is for session {envelope.session_id!r}")
        opening = envelope.type is T.SESSION_OPEN
        if opening and envelope.agent_id != state.buyer_agent_id:
            # An open names no session's parties yet: to anyone but this session's own buyer,
            # whose retry must still be recognised below, the id is simply taken.
            raise SessionExists(f"session {state.session_id!r} exists")
        if not opening and not state.party_role(envelope.agent_id, envelope.role):
            raise NotAParty(f"{envelope.agent_id!r} is not this session's {envelope.role.value}")
        check_sender(envelope)
        if envelope.message_id in state.message_ids:
            raise MessageIdSeen(f"message_id {envelope.message_id!r} was already used")
        if opening:
            raise SessionExists(f"session {state.session_id!r} exists")
        if state.terminal:
            if state.closed_by_timer:
                # Whether a timer or this envelope came first is the arbiter's scheduling: a
                # move after its timer closed the session gets the same answer either way.
                raise TimerExpired(
                    f"the session's timer closed it ({state.close_reason}) before this envelope"
                )
            raise SessionTerminal(f"session is {state.phase.value}")
        due = self.next_deadline()
        if due is not None and received_at >= due:
            raise TimerExpired(f"the session's timer fell due at {format_timestamp(due)}")
        assert state.turn is not None
        move = TRANSITIONS.get((state.phase, state.turn, envelope.role, envelope.type))
        if move is None or (state.final_answer and move not in FINAL_ANSWER_MOVES):
            final = ", the buyer's final answer" if state.final_answer else ""
            raise OutOfTurn(
                f"{envelope.type.value} from the {envelope.role.value} is not allowed now: "
                f"{state.phase.value}, round {state.round}, {state.turn.value}'s turn{final}"
            )
        step = _Step(state, self.arbiter, received_at)
        _MOVES[move](step, envelope)
        self.state = step.state
        return step.entries

    # Timers and operators --------------------------------------------------------------------

    def next_deadline(self) -> datetime | None:
        """When :meth:`expire` will next have something to do, or ``None``."""
        if self.state.terminal:
            return None
        due = [d for d in (self.state.turn_deadline, self.state.deadline) if d is not None]
        return min(due) if due else None

    def expire(self, now: datetime) -> list[Entry]:
        """Close the session if a timer has fallen due by ``now``; else do nothing."""
        due = self.next_deadline()
        if due is None or now < due:
            return []
        state = self.state
        step = _Step(state, self.arbiter, now)
        if state.deadline is not None and state.deadline <= now:
            step.close(
                Reason.DEADLINE_EXPIRED, f"deadline {format_timestamp(state.deadline)} passed"
            )
        elif state.final_answer:
            # No final answer: the last round is judged on its counter, and the session ends.
            judgement, spread, _ = _judge_counter(state, self.arbiter)
            step.verdict(
                judgement,
                buyer_price=state.buyer_price,
                merchant_price=state.merchant_price,
                buyer_terms=state.buyer_terms,
                merchant_terms=state.merchant_terms,
            )
            step.close(
                Reason.MAX_ROUNDS_REACHED,
                f"the buyer gave no final answer within {state.response_window_s} s",
                last_spread=spread,
            )
        else:
            assert state.turn is not None
            step.close(
                Reason.RESPONSE_TIMEOUT,
                f"the {state.turn.value} did not move within {state.response_window_s} s",
            )
        self.state = step.state
        return step.entries

    def terminate(self, now: datetime, detail: str) -> list[Entry]:
        """An operator ends a live session."""
        if self.state.terminal:
            raise SessionTerminal(f"session is {self.state.phase.value}")
        step = _Step(self.state, self.arbiter, now)
        step.close(Reason.OPERATOR_TERMINATED, detail[:1000])
        self.state = step.state
        return step.entries


class _Step:
    """One transition in progress: a working copy of the state and the entries it appends.

    Each method takes the other fields a move changes with it (``**changes``), so a move copies
    the state once per entry rather than once per field it touches.
    """

    def __init__(self, state: SessionState, arbiter: Arbiter, now: datetime) -> None:
        self.state = state
        self.arbiter = arbiter
        self.now = now
        self.entries: list[Entry] = []

    def window_end(self) -> datetime:
        return self.now + timedelta(seconds=self.state.response_window_s)

    def log(self, envelope: Envelope, **changes: Any) -> None:
        self._append(
            envelope.body, message_ids=self.state.message_ids | {envelope.message_id}, **changes
        )

    def _append(self, body: JsonObject, **changes: Any) -> Entry:
        head = self.state.head
        entry = make_entry(
            seq=head.seq + 1, received_at=self.now, envelope=body, prev_hash=head.entry_hash
        )
        self.entries.append(entry)
        self.state = _evolve(self.state, {"head": head.after(entry), **changes})
        return entry

    def _emit(self, kind: MessageType, payload: JsonObject, **changes: Any) -> Entry:
        state = self.state
        return self._append(
            {
                "oanp_version": OANP_VERSION,
                "message_id": f"{ARBITER_ID_PREFIX}{state.head.seq + 1}",
                "session_id": state.session_id,
                "timestamp": format_timestamp(self.now),
                "sender": {"role": Role.ARBITER.value, "agent_id": self.arbiter.arbiter_id},
                "type": kind.value,
                "payload": payload,
            },
            **changes,
        )

    def moving(self, turn: Role) -> dict[str, Any]:
        """The changes that hand the turn to ``turn``, whose response window starts now."""
        return {"phase": Phase.NEGOTIATING, "turn": turn, "turn_deadline": self.window_end()}

    def to_move(self, turn: Role, **changes: Any) -> None:
        self.state = _evolve(self.state, {**self.moving(turn), **changes})

    def verdict(
        self,
        judgement: Judgement,
        *,
        buyer_price: Decimal | None,
        merchant_price: Decimal | None,
        buyer_terms: Values | None = None,
        merchant_terms: Values | None = None,
        failed: str | None = None,
    ) -> None:
        """Judge the round on the prices (and, with issues, the terms) it ended on."""
        spread = None
        if buyer_price is not None and merchant_price is not None:
            spread = merchant_price - buyer_price
        checks = dict.fromkeys(INVARIANTS[:5], "pass")
        if failed:
            checks[failed] = "fail"
        payload: JsonObject = {
            "round": self.state.round,
            "status": judgement.status.value,
            "rationale": judgement.rationale.value,
            "buyer_price": _amount(buyer_price),
            "merchant_price": _amount(merchant_price),
            "spread": _amount(spread),
            "checks": dict(checks),
        }
        if self.state.issues:
            payload["issues_open"] = issues_open(self.state.issues, buyer_terms, merchant_terms)
        self._emit(T.ROUND_VERDICT, payload, phase=Phase.EVALUATING, turn=None)

    def close(self, reason: Reason, detail: str, **changes: Any) -> None:
        self._emit(
            T.SESSION_CLOSE,
            {"reason": reason.value, "detail": detail, "round": self.state.round},
            phase=Phase.CLOSED,
            turn=None,
            turn_deadline=None,
            close_reason=reason,
            **changes,
        )

    def agree(
        self, price: Decimal, terms: Values | None, settlement: JsonObject | None = None
    ) -> None:
        state, arbiter = self.state, self.arbiter
        agreement: JsonObject = {
            "oanp_version": OANP_VERSION,
            "session_id": state.session_id,
            "arbiter_id": arbiter.arbiter_id,
            "buyer_agent_id": state.buyer_agent_id,
            "merchant_agent_id": state.merchant_agent_id,
            "item": state.item,
            "currency": state.currency,
            "final_price": price_to_json(price),
            "session_digest": state.head.entry_hash,
            "log_length": state.head.seq,
            "invariants_satisfied": list(INVARIANTS),
            "agreed_at": format_timestamp(self.now),
        }
        if state.issues:
            assert terms is not None
            agreement["final_terms"] = terms_json(state.issues, terms)
        if settlement is not None:
            agreement["settlement"] = settlement
        signature = arbiter.signer.sign_detached(canonical_bytes(agreement), typ=AGREEMENT_TYP)
        self._emit(
            T.SESSION_AGREE,
            {
                "final_price": price_to_json(price),
                "currency": state.currency,
                "session_digest": state.head.entry_hash,
                "invariants_satisfied": list(INVARIANTS),
                "agreement": agreement,
                "signature": signature,
                "signature_alg": arbiter.signer.alg,
                "kid": arbiter.signer.kid,
                "jwks_uri": arbiter.jwks_uri,
            },
            phase=Phase.AGREED,
            turn=None,
            turn_deadline=None,
            final_price=price,
        )

    # Checks shared by priced moves -----------------------------------------------------------

    def priced(self, envelope: Envelope) -> tuple[Offer, Values | None]:
        """Refuse (422) a wrong round, a price finer than the currency, or terms outside the
        session's issues; nothing is logged. Returns the offer and its terms' values."""
        offer = envelope.payload
        assert isinstance(offer, Offer)
        state = self.state
        if offer.round != state.round:
            raise WrongRound(f"this is round {state.round}, not {offer.round}")
        if not fits_currency(offer.price, state.currency):
            raise PricePrecision(
                f"{state.currency} prices have at most {minor_units(state.currency)} decimals"
            )
        if not state.issues:
            if offer.terms is not None:
                raise BadTerms(
                    "this session negotiates the price alone",
                    errors=[FieldError("$.payload.terms", "the session declares no issues")],
                )
            return offer, None
        return offer, read_terms(state.issues, offer.terms)

    def violated(
        self,
        envelope: Envelope,
        reason: Reason,
        detail: str,
        *,
        buyer: tuple[Decimal | None, Values | None],
        merchant: tuple[Decimal | None, Values | None],
    ) -> None:
        """Log the breaching envelope as evidence, judge the round violated on each side's
        ``(price, terms)``, close."""
        self.log(envelope)
        self.verdict(
            Judgement(VerdictStatus.VIOLATED, reason),
            buyer_price=buyer[0],
            merchant_price=merchant[0],
            buyer_terms=buyer[1],
            merchant_terms=merchant[1],
            failed=breach_invariant(reason),
        )
        self.close(reason, detail)

    def conclude_round(self, judgement: Judgement, spread: Decimal, still_open: int | None) -> None:
        """After a round's fair or stuck verdict: close at the limit or stall, else go on."""
        state = self.state
        stuck = state.stuck_rounds + 1 if judgement.status is VerdictStatus.FAIR_BUT_STUCK else 0
        progress = {"last_spread": spread, "stuck_rounds": stuck, "last_issues_open": still_open}
        profile = self.arbiter.profiles[state.profile]
        if state.round >= state.max_rounds:
            self.close(
                Reason.MAX_ROUNDS_REACHED,
                f"no agreement after {state.max_rounds} rounds",
                **progress,
            )
        elif profile.stalled(stuck):
            self.close(Reason.STALLED, f"{stuck} consecutive rounds without progress", **progress)
        else:
            self.to_move(
                B,
                round=state.round + 1,
                previous_buyer_price=state.buyer_price,
                buyer_price=None,
                previous_buyer_terms=state.buyer_terms,
                buyer_terms=None,
                **progress,
            )


def _judge_counter(state: SessionState, arbiter: Arbiter) -> tuple[Judgement, Decimal, int | None]:
    """The profile's judgement of a round the merchant countered, with the spread and (with
    issues) the count of issues open it was judged on."""
    assert state.buyer_price is not None and state.merchant_price is not None
    spread = state.merchant_price - state.buyer_price
    still_open = (
        issues_open(state.issues, state.buyer_terms, state.merchant_terms) if state.issues else None
    )
    judgement = arbiter.profiles[state.profile].judge_counter(
        state.round,
        spread,
        state.last_spread,
        issues_open=still_open,
        previous_open=state.last_issues_open,
    )
    return judgement, spread, still_open


def _amount(value: Decimal | None) -> int | float | None:
    return None if value is None else price_to_json(value)


COMMITMENT_DETAIL = "the {role}'s constraints_commit differs from the one it committed"


def _ack(step: _Step, envelope: Envelope) -> None:
    payload = envelope.payload
    assert isinstance(payload, Ack)
    if step.state.settlement is not None and is_weak(payload.constraints_commit):
        raise WeakCommitment(WEAK_FOR_SETTLEMENT.format(role="merchant"))
    step.log(envelope, merchant_commit=payload.constraints_commit, round=1, **step.moving(B))


WEAK_FOR_SETTLEMENT = (
    "the session asks for settlement by reveal, which needs the {role}'s commitment salted "
    '("sha256:…"), not the unsalted reference form ("0x…")'
)


def _reveal(step: _Step, envelope: Envelope) -> None:
    """``settle.reveal`` (docs/protocol.md §5, settlement): the first puts the session in
    SETTLING, the second settles at the midpoint or finds no zone. A reveal that does not open
    its commitment, or whose limit the party's own prices broke, is evidence of a breach."""
    reveal = envelope.payload
    assert isinstance(reveal, SettleReveal)
    state, role = step.state, envelope.role
    if state.settlement is None:
        raise SettlementNotEnabled("the session was not opened with settlement: reveal")
    if reveal.round != state.round:
        raise WrongRound(f"this is round {state.round}, not {reveal.round}")
    party: CommitRole = "buyer" if role is B else "merchant"
    limit = limit_of(party, reveal.constraints)
    if limit is None or limit <= 0:
        raise NotSettleable(
            f"the {party}'s constraints name no positive {LIMIT_KEYS[party]} to settle on"
        )
    if state.issues and issues_open(state.issues, state.buyer_standing_terms, state.merchant_terms):
        raise NotSettleable(
            "settlement by reveal settles the price alone: the other issues must match first"
        )
    committed = state.commitment_of(role)
    assert committed is not None  # a live session past OPENING has both commitments
    standing = {
        "buyer": (state.buyer_standing, state.buyer_standing_terms),
        "merchant": (state.merchant_price, state.merchant_terms),
    }
    if reveal.constraints_commit != committed or not opens(
        committed,
        constraints=reveal.constraints,
        item=state.item,
        max_rounds=state.max_rounds,
        salt=reveal.salt,
    ):
        detail = f"the {party}'s reveal does not open the commitment it made"
        step.violated(envelope, Reason.COMMITMENT_MISMATCH, detail, **standing)
        return
    own = state.buyer_standing if role is B else state.merchant_price
    if own is not None and limit_breaches(party, reveal.constraints, [(state.round, own)]):
        side = "above its ceiling" if role is B else "below its floor"
        detail = f"the {party} offered {own}, {side} {limit}"
        step.violated(envelope, Reason.LIMIT_BREACHED, detail, **standing)
        return
    limits = {"revealed_ceiling": limit} if role is B else {"revealed_floor": limit}
    if state.phase is Phase.NEGOTIATING:
        other = M if role is B else B
        step.log(envelope, **{**step.moving(other), "phase": Phase.SETTLING, **limits})
        return
    step.log(envelope, **limits)
    _settle(step)


def _settle(step: _Step) -> None:
    """Both limits are in the log: the midpoint within the standing prices, or no zone."""
    state = step.state
    ceiling, floor = state.revealed_ceiling, state.revealed_floor
    assert ceiling is not None and floor is not None
    # With issues, settlement was allowed only once both sides' terms matched.
    terms = state.merchant_terms
    if ceiling < floor:
        step.verdict(
            Judgement(VerdictStatus.FAIR_BUT_STUCK, Reason.NO_ZONE),
            buyer_price=ceiling,
            merchant_price=floor,
            buyer_terms=terms,
            merchant_terms=terms,
        )
        step.close(Reason.NO_ZONE, f"the buyer's ceiling {ceiling} is under the floor {floor}")
        return
    price = settlement_price(
        ceiling,
        floor,
        currency=state.currency,
        buyer_standing=state.buyer_standing,
        merchant_standing=state.merchant_price,
    )
    step.verdict(
        Judgement(VerdictStatus.FAIR, Reason.SETTLED),
        buyer_price=price,
        merchant_price=price,
        buyer_terms=terms,
        merchant_terms=terms,
    )
    step.agree(
        price,
        terms,
        settlement={
            "rule": SETTLEMENT_RULE,
            "ceiling": price_to_json(ceiling),
            "floor": price_to_json(floor),
        },
    )


def _breached(
    step: _Step,
    envelope: Envelope,
    offer: Offer,
    values: Values | None,
    *,
    buyer: tuple[Decimal | None, Values | None],
    merchant: tuple[Decimal | None, Values | None],
) -> bool:
    """I3, then I4: on a breach, log it as evidence, judge the round violated on ``buyer``'s
    and ``merchant``'s ``(price, terms)``, close."""
    state, role = step.state, envelope.role
    if offer.constraints_commit != state.commitment_of(role):
        reason, detail = Reason.COMMITMENT_MISMATCH, COMMITMENT_DETAIL.format(role=role.value)
    elif envelope.type is T.OFFER_ACCEPT:
        return False  # naming the standing offer was checked; accepting it is never reneging
    else:
        if role is B:
            previous, previous_terms = state.previous_buyer_price, state.previous_buyer_terms
        else:
            previous, previous_terms = state.merchant_price, state.merchant_terms
        if previous is None or not is_pure_retraction(
            role is M, state.issues, (previous, previous_terms or ()), (offer.price, values or ())
        ):
            return False
        reason = Reason.BUYER_RENEGED if role is B else Reason.MERCHANT_RENEGED
        detail = _retraction_detail(role, previous, offer.price, bool(state.issues))
    step.violated(envelope, reason, detail, buyer=buyer, merchant=merchant)
    return True


def _retraction_detail(role: Role, previous: Decimal, price: Decimal, with_terms: bool) -> str:
    if not with_terms:
        verb = "lowered" if role is B else "raised"
        return f"the {role.value} {verb} its price from {previous} to {price}"
    return (
        f"the {role.value}'s offer is worse for the other side than its previous one on some "
        "terms and better on none"
    )


def _propose(step: _Step, envelope: Envelope) -> None:
    offer, values = step.priced(envelope)
    state = step.state
    buyer, merchant = (offer.price, values), (state.merchant_price, state.merchant_terms)
    if _breached(step, envelope, offer, values, buyer=buyer, merchant=merchant):
        return
    step.log(envelope, buyer_price=offer.price, buyer_terms=values, **step.moving(M))


def _counter(step: _Step, envelope: Envelope) -> None:
    offer, values = step.priced(envelope)
    state = step.state
    assert state.buyer_price is not None
    buyer, merchant = (state.buyer_price, state.buyer_terms), (offer.price, values)
    if _breached(step, envelope, offer, values, buyer=buyer, merchant=merchant):
        return
    if state.round >= state.max_rounds:
        # The last round's counter: the buyer's final answer decides (docs/protocol.md §5).
        step.log(
            envelope,
            merchant_price=offer.price,
            merchant_terms=values,
            final_answer=True,
            **step.moving(B),
        )
        return
    step.log(envelope, merchant_price=offer.price, merchant_terms=values)
    judgement, spread, still_open = _judge_counter(step.state, step.arbiter)
    step.verdict(
        judgement,
        buyer_price=state.buyer_price,
        merchant_price=offer.price,
        buyer_terms=state.buyer_terms,
        merchant_terms=values,
    )
    step.conclude_round(judgement, spread, still_open)


def _accept(step: _Step, envelope: Envelope) -> None:
    offer, values = step.priced(envelope)
    state = step.state
    mine = envelope.role is B
    standing = state.merchant_price if mine else state.buyer_price
    if standing is None or offer.price != standing:
        named = "nothing" if standing is None else str(standing)
        raise PriceNotStanding(f"the other side's standing price is {named}, not {offer.price}")
    standing_terms = state.merchant_terms if mine else state.buyer_terms
    if values != standing_terms:
        raise TermsNotStanding(
            "an accept repeats the other side's standing terms exactly",
            errors=[FieldError("$.payload.terms", "differs from the other side's standing terms")],
        )
    both = (offer.price, values)
    if _breached(step, envelope, offer, values, buyer=both, merchant=both):
        return
    step.log(
        envelope,
        buyer_price=offer.price,
        merchant_price=offer.price,
        buyer_terms=values,
        merchant_terms=values,
    )
    step.verdict(
        Judgement(VerdictStatus.FAIR, Reason.AGREEMENT),
        buyer_price=offer.price,
        merchant_price=offer.price,
        buyer_terms=values,
        merchant_terms=values,
    )
    step.agree(offer.price, values)


def _withdraw(step: _Step, envelope: Envelope) -> None:
    payload = envelope.payload
    assert isinstance(payload, Withdraw)
    state = step.state
    committed = state.commitment_of(envelope.role)
    if committed is not None and payload.constraints_commit != committed:
        detail = COMMITMENT_DETAIL.format(role=envelope.role.value)
        if state.phase is Phase.OPENING:
            # No round has started, so there is no round to judge: evidence, then close.
            step.log(envelope)
            step.close(Reason.COMMITMENT_MISMATCH, detail)
        else:
            step.violated(
                envelope,
                Reason.COMMITMENT_MISMATCH,
                detail,
                buyer=(state.buyer_price, state.buyer_terms),
                merchant=(state.merchant_price, state.merchant_terms),
            )
        return
    step.log(envelope)
    reason = Reason.WITHDRAWN_BY_BUYER if envelope.role is B else Reason.WITHDRAWN_BY_MERCHANT
    step.close(reason, f"the {envelope.role.value} withdrew")


_MOVES = {
    Move.ACK: _ack,
    Move.PROPOSE: _propose,
    Move.COUNTER: _counter,
    Move.BUYER_ACCEPT: _accept,
    Move.MERCHANT_ACCEPT: _accept,
    Move.WITHDRAW: _withdraw,
    Move.REVEAL: _reveal,
}
