"""The arbiter's session state machine (docs/protocol.md §5), sans-IO.

A :class:`Negotiation` is fed parsed envelopes with the arbiter's clock reading and answers
with the log entries they cause: the party's own entry, then the arbiter's (``round.verdict``,
``session.agree``, ``session.close``). It reads no clock and draws no randomness; the signing
key is handed in. A refused envelope raises a :class:`~oanp.wire.errors.ProtocolError` and leaves
the state exactly as it was, because every step computes a new frozen :class:`SessionState` and
only a step that completes replaces the old one.

Which party move is legal where is one table, :data:`TRANSITIONS`, keyed by
``(phase, whose turn, sender role, type)``. A completed round passes through ``EVALUATING``,
which the same step leaves for agreement, close or the next round.
"""

from __future__ import annotations

from datetime import datetime

from oanp.wire.commitments import is_weak
from oanp.wire.envelope import (
    Envelope,
    Open,
    check_sender,
    format_timestamp,
)
from oanp.wire.errors import (
    DeadlineOutOfRange,
    FieldError,
    MessageIdSeen,
    NotAParty,
    OutOfTurn,
    SchemaInvalid,
    SessionExists,
    SessionTerminal,
    TimerExpired,
    UnknownSession,
    WeakCommitment,
)
from oanp.wire.log import Entry
from oanp.wire.moves import MOVES, WEAK_FOR_SETTLEMENT, Step, judge_counter
from oanp.wire.profiles import (
    Reason,
)
from oanp.wire.state import (
    FINAL_ANSWER_MOVES,
    MAX_DEADLINE_AHEAD,
    TRANSITIONS,
    Arbiter,
    M,
    Phase,
    SessionState,
    T,
)


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
        step = Step(state, arbiter, received_at)
        step.log(envelope, turn_deadline=step.window_end())
        return cls(step.state, arbiter), step.entries

    # Party moves -----------------------------------------------------------------------------

    def feed(self, envelope: Envelope, *, received_at: datetime) -> list[Entry]:
        """Apply one party envelope; return the entries it caused (its own first).

        Raises a :class:`~oanp.wire.errors.ProtocolError` and changes nothing when it is refused.
        This is the one place that orders the checks of docs/protocol.md §14 for an existing
        session (401, 413, 400 and the key's own agent are the transport's, before it): 403 not
        a party, 422 a type the sender's role may not send, the idempotency check
        (:class:`~oanp.wire.errors.MessageIdSeen`, which the log's store resolves), 409 a reused
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
        step = Step(state, self.arbiter, received_at)
        MOVES[move](step, envelope)
        self.state = step.state
        return step.entries

    # Timers and operators --------------------------------------------------------------------

    def next_deadline(self) -> datetime | None:
        """When :meth:`expire` will next have something to do, or ``None``."""
        if self.state.terminal:
            return None
        due = [d for d in (self.state.turn_deadline, self.state.deadline) if d is not None]
        return min(due) if due else None

    def due_reason(self, now: datetime) -> Reason | None:
        """Why :meth:`expire` would close the session at ``now``: the session's deadline, the
        last round's final answer, or the window of the party to move; ``None`` if no timer
        fell due."""
        due = self.next_deadline()
        if due is None or now < due:
            return None
        if self.state.deadline is not None and self.state.deadline <= now:
            return Reason.DEADLINE_EXPIRED
        if self.state.final_answer:
            return Reason.MAX_ROUNDS_REACHED
        return Reason.RESPONSE_TIMEOUT

    def expire(self, now: datetime) -> list[Entry]:
        """Close the session if a timer has fallen due by ``now``; else do nothing."""
        reason = self.due_reason(now)
        if reason is None:
            return []
        state = self.state
        step = Step(state, self.arbiter, now)
        if reason is Reason.DEADLINE_EXPIRED:
            assert state.deadline is not None
            step.close(reason, f"deadline {format_timestamp(state.deadline)} passed")
        elif reason is Reason.MAX_ROUNDS_REACHED:
            # No final answer: the last round is judged on its counter, and the session ends.
            judgement, spread, _ = judge_counter(state, self.arbiter)
            step.verdict(
                judgement,
                buyer_price=state.buyer_price,
                merchant_price=state.merchant_price,
                buyer_terms=state.buyer_terms,
                merchant_terms=state.merchant_terms,
            )
            step.close(
                reason,
                f"the buyer gave no final answer within {state.response_window_s} s",
                last_spread=spread,
            )
        else:
            assert state.turn is not None
            step.close(
                reason, f"the {state.turn.value} did not move within {state.response_window_s} s"
            )
        self.state = step.state
        return step.entries

    def terminate(self, now: datetime, detail: str) -> list[Entry]:
        """An operator ends a live session."""
        if self.state.terminal:
            raise SessionTerminal(f"session is {self.state.phase.value}")
        step = Step(self.state, self.arbiter, now)
        step.close(Reason.OPERATOR_TERMINATED, detail[:1000])
        self.state = step.state
        return step.entries
